// The one place that reads the environment. Everything else receives a Config.
import { isIP } from 'node:net';
import path from 'node:path';
import { Ajv } from 'ajv';
import { validateDetailed } from 'node-cron';
import { QUEUE_SETTINGS } from '../queue/settings.js';
import { KEY_NAME_PATTERN, KEY_PATTERN, parseApiKeys, type ApiKey } from '../partners/apiKeys.js';

/** One API_KEYS entry: `name:key` or a bare key. */
const API_KEY_ENTRY = `(?:${KEY_NAME_PATTERN}:)?${KEY_PATTERN}`;
/** PUBLIC_BASE_URL: an http(s) origin, a path perhaps, no query or fragment (the CDK app checks its context by it too). */
export const PUBLIC_BASE_URL_PATTERN = '^https?://[A-Za-z0-9.\\[\\]:-]+(/[A-Za-z0-9._~!$&\'()*+,;=:@%/-]*)?$';

export interface Config {
  port: number;
  /**
   * Prometheus /metrics, served apart from the public port (it names partners): its port
   * (undefined: not served) and the address it is bound to.
   */
  metrics: { port: number | undefined; host: string };
  dataDir: string;
  /** `file:///abs/dir` (embedded default) or `s3://bucket/optional/prefix`. */
  storageUrl: string;
  /** `sqlite:` (the embedded default: the ledger database under dataDir, shared by every process on it) or an SQS queue URL. */
  queueUrl: string;
  awsRegion: string;
  awsEndpointUrl: string | undefined;
  /** Partner keys from API_KEYS, named; with none here nor in the ledger, one is generated under dataDir at start. */
  apiKeys: ApiKey[];
  flushIntervalSeconds: number;
  /** How long after a change is named it is surely visible: a sync's watermark is now minus this. */
  syncSettleMs: number;
  /** How long change logs are kept: a sync's updated_after may be at most this old (older: 410, pull in full). */
  syncRetentionMs: number;
  /**
   * How long parts merged away (compaction, reprocess) stay in the store after their successor is
   * stored: an answer planned before still reads them.
   */
  retireGraceMs: number;
  archiveMaxWindowMs: number;
  cacheDir: string;
  cacheMaxBytes: number;
  /** Bytes of the API's copies of release files (least recently served out first). */
  releaseCacheMaxBytes: number;
  /** DuckDB's memory bound (it spills to disk beyond it), e.g. "256MB". */
  duckdbMemoryLimit: string;
  /** DuckDB's bound on its spill files, e.g. "4GB": past it a query fails (503) instead of filling the disk. */
  duckdbMaxTempSize: string;
  /** The API's temporary files (DuckDB's spills, Parquet answers being written); off the ledger's volume where configured. */
  tmpDir: string;
  /**
   * Whole-window archive answers at once (admission), at once for one client address, and how
   * long one more waits for a turn before a 503 (a 429 when its address's share is what it waited on);
   * pages the same, in turns of their own (each gathered whole, so its Link can go in the headers,
   * and held until its client has taken it). While one waits, an answer whose client read slower
   * than `minReadBytesPerSecond` over the last `http.sendStallMs` is cut (0: never).
   */
  heavyAnswers: { maxConcurrent: number; perAddress: number; maxPages: number; pagesPerAddress: number; queueMs: number; minReadBytesPerSecond: number };
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  worker: {
    /** Flush early when this many reports are buffered. */
    maxBufferedReports: number;
    /** A message received this many times goes to the dead-letter queue. */
    maxReceives: number;
    /** How long a received message stays hidden from other workers: past it, a crashed receiver's messages come back. */
    visibilitySeconds: number;
  };
  /** Pending markers older than this are re-enqueued by reconciliation. */
  reconcileAfterSeconds: number;
  reconcileEverySeconds: number;
  /**
   * Requests a minute: per API key on the feed, per client address on the GET endpoints; and failed
   * authentications a minute per client address, past which its requests are refused unread.
   */
  rateLimits: { feedPerMinute: number; readPerMinute: number; authFailuresPerMinute: number };
  /** Express "trust proxy": how many proxies (load balancers) sit in front. */
  trustProxy: number;
  /**
   * The service's public address, the base of every absolute URL it writes (paging links, OGC
   * and CAP links), never the request's Host (a cache would keep a forged one for everybody).
   * Undefined: the address the API listens on, as it prints it (http://localhost:PORT).
   */
  publicBaseUrl: string | undefined;
  /** What releases say of the data: its licence (an SPDX id) and who publishes it. */
  releases: { license: string; publisher: string };
  /** Timeouts of the S3 and SQS clients: a silent endpoint fails a call instead of hanging it. */
  aws: { connectTimeoutMs: number; requestTimeoutMs: number; maxAttempts: number };
  /** Longest a report's acceptance may take before the feed answers 503 (and a /ready probe, before it counts as failed). */
  acceptDeadlineMs: number;
  /** Acceptances under way (those past their deadline included) beyond which the feed answers 503 at once. */
  acceptMaxInFlight: number;
  /** Node's HTTP server limits: a client sending headers or a body slowly, or idling, cannot hold a connection longer. */
  http: { headersTimeoutMs: number; requestTimeoutMs: number; keepAliveTimeoutMs: number; sendStallMs: number };
  /** Key of the HMAC on pagination cursors; undefined: one generated once and kept (src/http/cursorSecret.ts). */
  cursorSecret: string | undefined;
  /** node-cron expressions of the scheduled jobs (jobs/). */
  schedules: { compact: string; reconcile: string; verify: string; release: string };
  /** Webhooks, the live stream and the SNS topic (src/events/). */
  events: EventsConfig;
  /** Most reports the explorer page draws as points; above it, the barangay counts alone. */
  explorerMaxPoints: number;
}

export interface EventsConfig {
  /** Host names, IPs and CIDRs a webhook may reach over http, and even when private. */
  webhookAllowHosts: string[];
  /** One delivery attempt's bound (connect to last byte of the answer). */
  webhookTimeoutMs: number;
  /** First retry delay; each retry doubles it (capped at an hour). */
  webhookRetryBaseMs: number;
  /** How long a delivery is retried before it is set aside. */
  webhookRetryForMs: number;
  /** How long archived events stay readable (stream resume, CAP feed). */
  retentionMs: number;
  /** Open live-stream connections per API process; past it, 429. */
  streamMaxClients: number;
  /** Open live-stream connections per client address and API process; past it, 429. */
  streamMaxClientsPerAddress: number;
  /** A stream is ended after this long; its client reconnects with Last-Event-ID, losing nothing. */
  streamMaxLifetimeMs: number;
  streamHeartbeatMs: number;
  /** AWS: the SNS topic the worker publishes archived batches to; undefined: none. */
  snsTopicArn: string | undefined;
  /** First retry delay of a failed SNS publish; each retry doubles it (capped at five minutes). */
  snsRetryBaseMs: number;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

const envSchema = {
  type: 'object',
  properties: {
    PORT: { type: 'integer', minimum: 0, maximum: 65535 },
    METRICS_PORT: { type: 'integer', minimum: 0, maximum: 65535 },
    METRICS_HOST: { type: 'string', minLength: 1, pattern: '^[A-Za-z0-9.:-]+$' },
    DATA_DIR: { type: 'string', minLength: 1 },
    STORAGE_URL: { type: 'string', pattern: '^(file://.+|s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?)$' },
    QUEUE_URL: { type: 'string', pattern: '^(sqlite:|https?://.+)$' },
    AWS_REGION: { type: 'string', pattern: '^[a-z]{2}(-[a-z]+)+-\\d+$' },
    AWS_ENDPOINT_URL: { type: 'string', pattern: '^https?://.+' },
    API_KEYS: { type: 'string', pattern: `^\\s*${API_KEY_ENTRY}\\s*(,\\s*${API_KEY_ENTRY}\\s*)*$` },
    FLUSH_INTERVAL_SECONDS: { type: 'number', exclusiveMinimum: 0, maximum: 3600 },
    RECONCILE_AFTER_SECONDS: { type: 'number', exclusiveMinimum: 0, maximum: 86400 },
    QUEUE_VISIBILITY_SECONDS: { type: 'integer', minimum: 1, maximum: 43200 },
    SYNC_SETTLE_SECONDS: { type: 'number', exclusiveMinimum: 0, maximum: 3600 },
    RETIRE_GRACE_SECONDS: { type: 'number', minimum: 0, maximum: 3600 },
    SYNC_RETENTION_DAYS: { type: 'integer', minimum: 1, maximum: 3660 },
    ARCHIVE_MAX_WINDOW: { type: 'string', pattern: '^[1-9]\\d{0,4}[dh]?$' },
    EXPLORER_MAX_POINTS: { type: 'integer', minimum: 0, maximum: 200000 },
    CACHE_DIR: { type: 'string', minLength: 1 },
    CACHE_MAX_BYTES: { type: 'integer', minimum: 16777216 },
    RELEASE_CACHE_MAX_BYTES: { type: 'integer', minimum: 0 },
    DUCKDB_MEMORY_LIMIT: { type: 'string', pattern: '^[1-9]\\d*(KB|MB|GB)$' },
    DUCKDB_MAX_TEMP_SIZE: { type: 'string', pattern: '^[1-9]\\d*(MB|GB)$' },
    TMP_DIR: { type: 'string', minLength: 1 },
    ARCHIVE_MAX_CONCURRENT: { type: 'integer', minimum: 1, maximum: 1000 },
    ARCHIVE_MAX_CONCURRENT_PER_ADDRESS: { type: 'integer', minimum: 1, maximum: 1000 },
    ARCHIVE_MAX_CONCURRENT_PAGES: { type: 'integer', minimum: 1, maximum: 10_000 },
    ARCHIVE_QUEUE_SECONDS: { type: 'number', minimum: 0, maximum: 300 },
    ARCHIVE_MIN_READ_KIB_PER_SECOND: { type: 'number', minimum: 0, maximum: 1_048_576 },
    LOG_LEVEL: { enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] },
    RATE_LIMIT_FEED_PER_MINUTE: { type: 'integer', minimum: 1 },
    RATE_LIMIT_READ_PER_MINUTE: { type: 'integer', minimum: 1 },
    RATE_LIMIT_AUTH_FAILURES_PER_MINUTE: { type: 'integer', minimum: 1 },
    TRUST_PROXY: { type: 'integer', minimum: 0, maximum: 10 },
    PUBLIC_BASE_URL: { type: 'string', pattern: PUBLIC_BASE_URL_PATTERN },
    CURSOR_SECRET: { type: 'string', minLength: 32 },
    DATA_LICENSE: { type: 'string', pattern: '^[A-Za-z0-9.+-]{1,64}$' },
    DATA_PUBLISHER: { type: 'string', minLength: 1, maxLength: 200 },
    AWS_CONNECT_TIMEOUT_SECONDS: { type: 'number', exclusiveMinimum: 0, maximum: 60 },
    AWS_REQUEST_TIMEOUT_SECONDS: { type: 'number', exclusiveMinimum: 0, maximum: 300 },
    AWS_MAX_ATTEMPTS: { type: 'integer', minimum: 1, maximum: 10 },
    ACCEPT_DEADLINE_SECONDS: { type: 'number', exclusiveMinimum: 0, maximum: 60 },
    ACCEPT_MAX_IN_FLIGHT: { type: 'integer', minimum: 1 },
    HTTP_HEADERS_TIMEOUT_SECONDS: { type: 'number', exclusiveMinimum: 0, maximum: 600 },
    HTTP_REQUEST_TIMEOUT_SECONDS: { type: 'number', exclusiveMinimum: 0, maximum: 600 },
    HTTP_KEEP_ALIVE_TIMEOUT_SECONDS: { type: 'number', exclusiveMinimum: 0, maximum: 600 },
    HTTP_SEND_STALL_SECONDS: { type: 'number', exclusiveMinimum: 0, maximum: 3600 },
    SCHEDULE_COMPACT: { type: 'string' },
    SCHEDULE_RECONCILE: { type: 'string' },
    SCHEDULE_VERIFY: { type: 'string' },
    SCHEDULE_RELEASE: { type: 'string' },
    WEBHOOK_ALLOW_HOSTS: { type: 'string', pattern: '^\\s*[A-Za-z0-9.:/_-]+\\s*(,\\s*[A-Za-z0-9.:/_-]+\\s*)*$' },
    WEBHOOK_TIMEOUT_SECONDS: { type: 'number', exclusiveMinimum: 0, maximum: 120 },
    WEBHOOK_RETRY_BASE_SECONDS: { type: 'number', exclusiveMinimum: 0, maximum: 3600 },
    WEBHOOK_RETRY_HOURS: { type: 'number', exclusiveMinimum: 0, maximum: 720 },
    EVENTS_RETENTION_HOURS: { type: 'number', minimum: 24, maximum: 8760 },
    STREAM_MAX_CLIENTS: { type: 'integer', minimum: 1, maximum: 100000 },
    STREAM_MAX_CLIENTS_PER_ADDRESS: { type: 'integer', minimum: 1, maximum: 100000 },
    STREAM_MAX_LIFETIME_SECONDS: { type: 'number', exclusiveMinimum: 0, maximum: 604800 },
    STREAM_HEARTBEAT_SECONDS: { type: 'number', exclusiveMinimum: 0, maximum: 300 },
    SNS_TOPIC_ARN: { type: 'string', pattern: '^arn:aws[a-z-]*:sns:[a-z0-9-]+:\\d{12}:[A-Za-z0-9_-]{1,256}$' },
    SNS_RETRY_BASE_SECONDS: { type: 'number', exclusiveMinimum: 0, maximum: 300 },
  },
} as const;

const messages: Record<string, string> = {
  METRICS_HOST: 'must be a host name or IP address to bind to, such as 127.0.0.1 or 0.0.0.0',
  STORAGE_URL: 'must be file:///absolute/dir or s3://bucket[/prefix]',
  QUEUE_URL: 'must be "sqlite:" (the ledger database under DATA_DIR) or an SQS queue URL (http or https)',
  AWS_REGION: 'must be an AWS region such as ap-southeast-1',
  AWS_ENDPOINT_URL: 'must be an http(s) URL',
  API_KEYS: 'must be a comma-separated list of name:key pairs or bare keys; names of a-z 0-9 . _ - (up to 64), keys at least 16 characters of A-Z a-z 0-9 . _ ~ -',
  CURSOR_SECRET: 'must be at least 32 characters (e.g. openssl rand -base64 32)',
  ARCHIVE_MAX_WINDOW: 'must be a number of days (366 or 366d) or hours (72h)',
  WEBHOOK_ALLOW_HOSTS: 'must be a comma-separated list of host names, IP addresses or CIDRs (e.g. hooks.example.org,10.1.0.0/16)',
  SNS_TOPIC_ARN: 'must be an SNS topic ARN (arn:aws:sns:region:account:name)',
  DATA_LICENSE: 'must be an SPDX licence id, such as CC-BY-4.0',
  DATA_PUBLISHER: 'must be a name of 1 to 200 characters',
  PUBLIC_BASE_URL: 'must be the http(s) address clients reach the service at, without query or fragment (e.g. https://floods.example.org)',
};

const ajv = new Ajv({ allErrors: true, coerceTypes: true });
const validateEnv = ajv.compile(envSchema);

/** Every environment variable the configuration reads (docs/operations.md has a row for each). */
export const CONFIG_VARIABLES: readonly string[] = Object.keys(envSchema.properties);

/** Variables whose values are secrets: a message names them and says what is wrong, never shows them (logs go to shared places). */
const SECRET_VARIABLES = new Set(['API_KEYS', 'CURSOR_SECRET']);

/** A variable as a message shows it: its value, or for a secret its length or which entries are wrong. */
function shown(name: string, value: string | undefined): string {
  if (!SECRET_VARIABLES.has(name)) return `${name}=${JSON.stringify(value)}`;
  if (name !== 'API_KEYS' || value === undefined) return `${name} (its value not shown: a secret; ${value?.length ?? 0} characters)`;
  // The entries' positions alone (a "name" before a colon may be part of a mistyped key).
  const entries = value.split(',');
  const entry = new RegExp(`^\\s*${API_KEY_ENTRY}\\s*$`);
  const bad = entries.flatMap((text, i) => (entry.test(text) ? [] : [String(i + 1)]));
  return `API_KEYS (its keys not shown; entries ${bad.length > 0 ? bad.join(', ') : 'none'} of ${entries.length} malformed)`;
}

/** Builds the config from an environment; throws ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): Config {
  const raw: Record<string, string | number> = {};
  for (const name of Object.keys(envSchema.properties)) {
    const value = env[name];
    if (value !== undefined && value !== '') raw[name] = value;
  }
  // Ajv's coercion reads " " as 0, "0x10" as 16 and "Infinity" past any maximum: a number is
  // written in decimal, finite, or refused here.
  const notDecimal = Object.entries(envSchema.properties).flatMap(([name, spec]) => {
    const value = raw[name];
    const type = 'type' in spec ? spec.type : undefined;
    if ((type !== 'number' && type !== 'integer') || value === undefined || isDecimal(String(value))) return [];
    delete raw[name];
    return [`${shown(name, env[name])}: ${messages[name] ?? `must be a decimal number${type === 'integer' ? ' (whole)' : ''}`}`];
  });
  const valid = validateEnv(raw);
  if (!valid || notDecimal.length > 0) {
    const problems = (validateEnv.errors ?? []).map((e) => {
      const name = e.instancePath.slice(1);
      return `${shown(name, env[name])}: ${messages[name] ?? e.message}`;
    });
    throw new ConfigError(`invalid configuration: ${[...notDecimal, ...problems].join('; ')}`);
  }
  const v = raw as Record<string, string | number | undefined>;
  const dataDir = path.resolve(cwd, String(v.DATA_DIR ?? 'data'));
  const flushIntervalSeconds = Number(v.FLUSH_INTERVAL_SECONDS ?? 30);
  /** A duration that must outlast two flushes, or its default. */
  const twoFlushesAtLeast = (name: 'RECONCILE_AFTER_SECONDS' | 'QUEUE_VISIBILITY_SECONDS', fallback: number): number => {
    const value = Number(v[name] ?? fallback);
    if (value < flushIntervalSeconds * 2) {
      throw new ConfigError(`invalid configuration: ${name}=${JSON.stringify(env[name])}: must be at least twice FLUSH_INTERVAL_SECONDS (${flushIntervalSeconds * 2})`);
    }
    return value;
  };
  // Sooner, a report still in a worker's buffer (or its flush) would be sent again for nothing.
  const reconcileAfterSeconds = twoFlushesAtLeast('RECONCILE_AFTER_SECONDS', Math.max(60, flushIntervalSeconds * 4));
  // Shorter, every message would come back to another worker before its receiver had flushed it.
  const visibilitySeconds = twoFlushesAtLeast('QUEUE_VISIBILITY_SECONDS', QUEUE_SETTINGS.visibilityTimeoutSeconds(flushIntervalSeconds));
  const window = String(v.ARCHIVE_MAX_WINDOW ?? '366d');
  const windowHours = window.endsWith('h') ? Number.parseInt(window, 10) : Number.parseInt(window, 10) * 24;
  const storageUrl = String(v.STORAGE_URL ?? `file://${path.join(dataDir, 'store')}`);
  if (storageUrl.startsWith('file://') && !path.isAbsolute(storageUrl.slice('file://'.length))) {
    throw new ConfigError(`invalid configuration: STORAGE_URL=${JSON.stringify(storageUrl)}: ${messages.STORAGE_URL}`);
  }
  const cacheDir = path.resolve(cwd, String(v.CACHE_DIR ?? path.join(dataDir, 'cache')));
  // The caches remove what they do not know in their folder: a store's files among them would go.
  if (storageUrl.startsWith('file://')) {
    const storeDir = path.resolve(storageUrl.slice('file://'.length));
    if (within(cacheDir, storeDir) || within(storeDir, cacheDir)) {
      throw new ConfigError(`invalid configuration: CACHE_DIR=${JSON.stringify(cacheDir)}: must be a folder of its own, neither holding nor inside the store's folder (${storeDir}): the cache removes files it did not write`);
    }
  }
  const schedules = {
    compact: String(v.SCHEDULE_COMPACT ?? '5 * * * *'),
    reconcile: String(v.SCHEDULE_RECONCILE ?? '*/2 * * * *'),
    verify: String(v.SCHEDULE_VERIFY ?? '30 2 * * *'),
    release: String(v.SCHEDULE_RELEASE ?? '30 3 2 * *'),
  };
  const badCron = Object.entries(schedules).flatMap(([job, expr]) => {
    const problem = cronProblem(expr);
    return problem ? [`SCHEDULE_${job.toUpperCase()}=${JSON.stringify(expr)}: ${problem}`] : [];
  });
  if (badCron.length > 0) throw new ConfigError(`invalid configuration: ${badCron.join('; ')}`);
  const duckdbMemoryLimit = String(v.DUCKDB_MEMORY_LIMIT ?? '256MB');
  // In kilobytes DuckDB fails even a count's first allocation (2 KiB at 1KB), with no answer
  // but an error; from 1MB a query it cannot fit is an out-of-memory 503.
  if (bytesOf(duckdbMemoryLimit) < 1024 ** 2) {
    throw new ConfigError(`invalid configuration: DUCKDB_MEMORY_LIMIT=${JSON.stringify(env.DUCKDB_MEMORY_LIMIT)}: must be at least 1MB (256MB by default)`);
  }
  // About 64 MB of DuckDB's memory for each answer under way: what a day being built and a storm
  // hour's slice need, measured, with room to spare. Half of them for one address by default.
  const maxConcurrent = Number(v.ARCHIVE_MAX_CONCURRENT ?? Math.max(1, Math.floor(bytesOf(duckdbMemoryLimit) / (64 * 1024 ** 2))));
  // A page of 10,000 reports with their texts held some 30 MB while a slow client took it.
  const maxPages = Number(v.ARCHIVE_MAX_CONCURRENT_PAGES ?? 2 * maxConcurrent);
  const heavyAnswers = {
    maxConcurrent,
    perAddress: Math.min(maxConcurrent, Number(v.ARCHIVE_MAX_CONCURRENT_PER_ADDRESS ?? Math.max(1, Math.floor(maxConcurrent / 2)))),
    maxPages,
    pagesPerAddress: Math.max(1, Math.floor(maxPages / 2)),
    queueMs: seconds(v.ARCHIVE_QUEUE_SECONDS, 10),
    minReadBytesPerSecond: Number(v.ARCHIVE_MIN_READ_KIB_PER_SECOND ?? 64) * 1024,
  };
  const headersTimeoutMs = seconds(v.HTTP_HEADERS_TIMEOUT_SECONDS, 10);
  const requestTimeoutMs = seconds(v.HTTP_REQUEST_TIMEOUT_SECONDS, 30);
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new ConfigError('invalid configuration: HTTP_HEADERS_TIMEOUT_SECONDS must not exceed HTTP_REQUEST_TIMEOUT_SECONDS');
  }
  const port = Number(v.PORT ?? 8080);
  const metricsPort = v.METRICS_PORT === undefined ? undefined : Number(v.METRICS_PORT);
  if (metricsPort !== undefined && metricsPort !== 0 && metricsPort === port) {
    throw new ConfigError(`invalid configuration: METRICS_PORT=${metricsPort}: must differ from PORT, as /metrics is kept off the public port`);
  }
  return {
    port,
    metrics: { port: metricsPort, host: String(v.METRICS_HOST ?? '0.0.0.0') },
    dataDir,
    storageUrl,
    queueUrl: String(v.QUEUE_URL ?? 'sqlite:'),
    awsRegion: String(v.AWS_REGION ?? 'us-east-1'),
    awsEndpointUrl: v.AWS_ENDPOINT_URL === undefined ? undefined : String(v.AWS_ENDPOINT_URL),
    apiKeys: v.API_KEYS === undefined ? [] : keysOwnedOnce(parseApiKeys(String(v.API_KEYS))),
    flushIntervalSeconds,
    syncSettleMs: seconds(v.SYNC_SETTLE_SECONDS, 60),
    retireGraceMs: seconds(v.RETIRE_GRACE_SECONDS, 30),
    syncRetentionMs: Number(v.SYNC_RETENTION_DAYS ?? 30) * 86_400_000,
    archiveMaxWindowMs: windowHours * 3_600_000,
    cacheDir,
    cacheMaxBytes: Number(v.CACHE_MAX_BYTES ?? 2 * 1024 ** 3),
    releaseCacheMaxBytes: Number(v.RELEASE_CACHE_MAX_BYTES ?? 2 * 1024 ** 3),
    duckdbMemoryLimit,
    duckdbMaxTempSize: String(v.DUCKDB_MAX_TEMP_SIZE ?? '4GB'),
    tmpDir: path.resolve(cwd, String(v.TMP_DIR ?? path.join(dataDir, 'tmp'))),
    heavyAnswers,
    logLevel: (v.LOG_LEVEL ?? 'info') as Config['logLevel'],
    worker: { maxBufferedReports: 5000, maxReceives: QUEUE_SETTINGS.maxReceiveCount, visibilitySeconds },
    reconcileAfterSeconds,
    reconcileEverySeconds: Math.max(30, flushIntervalSeconds * 2),
    schedules,
    rateLimits: {
      feedPerMinute: Number(v.RATE_LIMIT_FEED_PER_MINUTE ?? 60_000),
      readPerMinute: Number(v.RATE_LIMIT_READ_PER_MINUTE ?? 600),
      authFailuresPerMinute: Number(v.RATE_LIMIT_AUTH_FAILURES_PER_MINUTE ?? 30),
    },
    trustProxy: Number(v.TRUST_PROXY ?? 0),
    publicBaseUrl: v.PUBLIC_BASE_URL === undefined ? undefined : String(v.PUBLIC_BASE_URL).replace(/\/+$/, ''),
    cursorSecret: v.CURSOR_SECRET === undefined ? undefined : String(v.CURSOR_SECRET),
    releases: { license: String(v.DATA_LICENSE ?? 'CC-BY-4.0'), publisher: String(v.DATA_PUBLISHER ?? 'Philippine flood report archive') },
    aws: {
      connectTimeoutMs: seconds(v.AWS_CONNECT_TIMEOUT_SECONDS, 1),
      requestTimeoutMs: seconds(v.AWS_REQUEST_TIMEOUT_SECONDS, 5),
      maxAttempts: Number(v.AWS_MAX_ATTEMPTS ?? 3),
    },
    acceptDeadlineMs: seconds(v.ACCEPT_DEADLINE_SECONDS, 2),
    acceptMaxInFlight: Number(v.ACCEPT_MAX_IN_FLIGHT ?? 1024),
    http: { headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs: seconds(v.HTTP_KEEP_ALIVE_TIMEOUT_SECONDS, 5), sendStallMs: seconds(v.HTTP_SEND_STALL_SECONDS, 60) },
    events: eventsConfig(v),
    explorerMaxPoints: Number(v.EXPLORER_MAX_POINTS ?? 20_000),
  };
}

function eventsConfig(v: Record<string, string | number | undefined>): EventsConfig {
  const allow = v.WEBHOOK_ALLOW_HOSTS === undefined ? [] : String(v.WEBHOOK_ALLOW_HOSTS).split(',').map((h) => h.trim().toLowerCase());
  const bad = allow.filter((h) => h.includes('/') && !isCidr(h));
  if (bad.length > 0) throw new ConfigError(`invalid configuration: WEBHOOK_ALLOW_HOSTS: ${bad.join(', ')}: ${messages.WEBHOOK_ALLOW_HOSTS}`);
  const retentionMs = seconds(v.EVENTS_RETENTION_HOURS, 7 * 24) * 3600;
  // Retried from when its events were recorded, and set aside well before the log drops them
  // (a day, or half the retention if shorter, to work through a long outage's backlog). A
  // value set past that is refused rather than shortened without a word; the default is
  // shortened to fit a short retention.
  const retryCapMs = retentionMs - Math.min(86_400_000, retentionMs / 2);
  if (v.WEBHOOK_RETRY_HOURS !== undefined && seconds(v.WEBHOOK_RETRY_HOURS, 0) * 3600 > retryCapMs) {
    throw new ConfigError(
      `invalid configuration: WEBHOOK_RETRY_HOURS=${v.WEBHOOK_RETRY_HOURS}: must end a day (or half the retention) before EVENTS_RETENTION_HOURS (${retentionMs / 3_600_000}) drops the events: at most ${retryCapMs / 3_600_000}`,
    );
  }
  return {
    webhookAllowHosts: allow,
    webhookTimeoutMs: seconds(v.WEBHOOK_TIMEOUT_SECONDS, 10),
    webhookRetryBaseMs: seconds(v.WEBHOOK_RETRY_BASE_SECONDS, 10),
    webhookRetryForMs: Math.min(seconds(v.WEBHOOK_RETRY_HOURS, 24) * 3600, retryCapMs),
    retentionMs,
    streamMaxClients: Number(v.STREAM_MAX_CLIENTS ?? 200),
    streamMaxClientsPerAddress: Number(v.STREAM_MAX_CLIENTS_PER_ADDRESS ?? 4),
    streamMaxLifetimeMs: seconds(v.STREAM_MAX_LIFETIME_SECONDS, 3600),
    streamHeartbeatMs: seconds(v.STREAM_HEARTBEAT_SECONDS, 15),
    snsTopicArn: v.SNS_TOPIC_ARN === undefined ? undefined : String(v.SNS_TOPIC_ARN),
    snsRetryBaseMs: seconds(v.SNS_RETRY_BASE_SECONDS, 2),
  };
}

function isCidr(text: string): boolean {
  const [ip, bits] = text.split('/');
  if (!ip || bits === undefined || !/^\d{1,3}$/.test(bits)) return false;
  const kind = isIP(ip);
  return kind !== 0 && Number(bits) <= (kind === 4 ? 32 : 128);
}

const CRON_FIELDS = ['minute', 'hour', 'day of month', 'month', 'day of week'];

/**
 * What is wrong with a cron expression, or undefined. Besides node-cron's own checks, a range
 * that runs backwards (`5-1`, `FRI-MON`): node-cron takes it and wraps it round (minutes 5 to 59,
 * then 0 and 1), which few who write it mean.
 */
function cronProblem(expr: string): string | undefined {
  const example = 'e.g. "5 * * * *" (minute hour day-of-month month day-of-week, UTC)';
  const checked = validateDetailed(expr);
  if (!checked.valid) return `must be a cron expression, ${example}: ${checked.errors.map((e) => e.message).join('; ') || 'not one'}`;
  const fields = expr.trim().split(/\s+/);
  const names = fields.length === 6 ? ['second', ...CRON_FIELDS] : CRON_FIELDS;
  for (const [i, field] of fields.entries()) {
    for (const part of field.split(',')) {
      const range = /^(\w+)-(\w+)(\/\d+)?$/.exec(part);
      if (range && cronValue(range[1]!) > cronValue(range[2]!, names[i] === 'day of week')) return `the ${names[i]} range ${range[1]}-${range[2]} runs backwards: write it from the smaller to the larger, ${example}`;
    }
  }
  return undefined;
}

const CRON_NAMES = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec', 'sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];

/**
 * A cron field's bound as a number: a month's name as 1–12, a weekday's as 0–6 (node-cron took
 * the expression); Sunday ending a range of weekdays as 7, as cron reads MON-SUN.
 */
function cronValue(bound: string, weekdayEnd = false): number {
  const at = CRON_NAMES.indexOf(bound.slice(0, 3).toLowerCase());
  if (at < 0) return Number(bound);
  if (at < 12) return at + 1;
  return at === 12 && weekdayEnd ? 7 : at - 12;
}

/** Bytes of a DuckDB size such as "256MB" (validated by the schema). */
function bytesOf(size: string): number {
  const units: Record<string, number> = { KB: 1024, MB: 1024 ** 2, GB: 1024 ** 3 };
  return Number.parseInt(size, 10) * units[size.slice(-2)]!;
}

/** Milliseconds of a number of seconds: a positive one is never rounded to 0 (which means "never" or "at once"). */
function seconds(value: string | number | undefined, fallback: number): number {
  const s = Number(value ?? fallback);
  return s > 0 ? Math.max(1, Math.round(s * 1000)) : 0;
}

/** Whether a variable's text is a finite number written in decimal (an exponent allowed). */
function isDecimal(text: string): boolean {
  return /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text) && Number.isFinite(Number(text));
}

/** Whether `dir` is `parent` or lies inside it. */
function within(dir: string, parent: string): boolean {
  const rel = path.relative(parent, dir);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel));
}

/**
 * The keys of API_KEYS, each given to one partner: a key listed under two names would file the
 * second partner's reports under the first's (the first listed wins), where its post_ids collide
 * and its DELETEs reach the other's reports.
 */
function keysOwnedOnce(keys: ApiKey[]): ApiKey[] {
  const owner = new Map<string, { name: string; entry: number }>();
  keys.forEach(({ name, key }, i) => {
    const first = owner.get(key);
    if (first && first.name !== name) {
      throw new ConfigError(
        `invalid configuration: API_KEYS (its keys not shown): entry ${i + 1} (${name}) has the key of entry ${first.entry} (${first.name}): each partner needs a key of its own`,
      );
    }
    if (!first) owner.set(key, { name, entry: i + 1 });
  });
  return keys;
}
