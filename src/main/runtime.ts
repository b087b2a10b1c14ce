// Builds the service's parts from a Config: adapters for the configured backends, the ledger,
// the DuckDB instance, the event log; and, each on first use, what only some roles use: the
// intake and the archive reader (the API), the worker, webhooks and SNS relay (the worker role),
// the reconciler, the webhook administration (the CLI). The modules below take narrow deps
// of their own, which a Runtime satisfies.
import fs from 'node:fs';
import path from 'node:path';
import type { S3Client } from '@aws-sdk/client-s3';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { SNSClient } from '@aws-sdk/client-sns';
import { Archive } from '../archive/window.js';
import { PartCache } from '../archive/partCache.js';
import { BoundaryRepository } from '../boundaries/repository.js';
import type { Config } from '../shared/config.js';
import { DuckDb } from '../archive/duckdb.js';
import { ensureDataDir, ensureFolder } from '../shared/files.js';
import { Intake } from '../ingest/intake.js';
import { Reconciler } from '../ingest/reconciler.js';
import { createLogger, type Logger } from '../shared/log.js';
import { Metrics } from '../shared/metrics.js';
import { openLedgerDb } from '../sqlite/database.js';
import type { IngestLedger } from '../ledger/ledger.js';
import { importLegacyLayout } from '../ledger/legacyImport.js';
import { GENERATED_KEY_FILE, GENERATED_KEY_NAME } from '../partners/apiKeys.js';
import { archiveStates, ChangeLog } from '../archive/changes.js';
import { ObjectLedger } from '../ledger/objectLedger.js';
import { SqliteLedger } from '../ledger/sqliteLedger.js';
import type { Queue } from '../queue/queue.js';
import { SqliteQueue } from '../queue/sqliteQueue.js';
import { FileObjectStore, localFiles } from '../store/fileStore.js';
import type { ObjectStore } from '../store/objectStore.js';
import { parseS3Url } from '../store/s3Location.js';
import { Worker } from '../worker/worker.js';
import { WebhookDispatcher } from '../events/dispatcher.js';
import { EventLog } from '../events/eventLog.js';
import { HostPolicy } from '../events/hostPolicy.js';
import { announcingRetractions } from '../events/retractions.js';
import type { ReportFeature } from '../events/feature.js';
import type { EventFeed } from '../events/events.js';
import { ObjectEventLog } from '../events/objectEventLog.js';
import { objectWebhookDispatcher, ObjectWebhooks } from '../events/objectWebhooks.js';
import { objectAdmin, sqliteAdmin, type WebhookAdmin } from '../events/manage.js';
import type { ConsumerRunner } from '../events/runner.js';
import { snsRelay } from '../events/snsRelay.js';

export interface RuntimeOverrides {
  s3?: S3Client;
  sqs?: SQSClient;
  /** The SNS client of the archived-reports topic (SNS_TOPIC_ARN). */
  sns?: SNSClient;
  log?: Logger;
  /** A store built by the caller (tests: a store that fails on purpose). */
  store?: ObjectStore;
  /** Metrics of the caller's (default: a registry with the process's own metrics). */
  metrics?: Metrics;
  /**
   * DuckDB's threads for each query (default 2, the service's: one large answer at a time gets
   * both cores). A bulk job that runs its parts' queries side by side takes 1.
   */
  duckdbThreads?: number;
}

/**
 * A process's parts, for the entry points to hand to the roles and commands they start (each
 * takes the narrow deps it declares). The members marked "on first use" are built when first read.
 */
export interface Runtime {
  config: Config;
  log: Logger;
  metrics: Metrics;
  store: ObjectStore;
  queue: Queue;
  /** Every role of the ledger (acceptance, lookups, pending, retractions announced on the event log, keys, lifecycle). */
  ledger: IngestLedger;
  db: DuckDb;
  boundaries: BoundaryRepository;
  /** On first use (the API, imports). */
  readonly intake: Intake;
  /** On first use (the worker role, the scheduler, `reconcile`). */
  readonly reconciler: Reconciler;
  /** On first use (the API, `export`). */
  readonly archive: Archive;
  cache: PartCache;
  /** On first use (the worker role). */
  readonly worker: Worker;
  /** The index of what changed when (updated_after): the worker and reprocess write it, the scheduler prunes it. */
  changes: ChangeLog;
  /** Embedded backend: the event log (webhook subscriptions and deliveries, the live stream, CAP). */
  events: EventLog | undefined;
  /** The event log on either backend (SQLite embedded, the bucket on AWS): stream, CAP, SNS. */
  feed: EventFeed;
  /** Webhook subscriptions and their set-aside deliveries, on either backend (the CLI); on first use. */
  readonly webhookAdmin: WebhookAdmin;
  /** Sends webhook deliveries; the worker role starts it; on first use. */
  readonly webhooks: WebhookDispatcher | ConsumerRunner;
  /** Publishes the log on SNS_TOPIC_ARN apart from the flushes; the worker role starts it; on first use. */
  readonly snsRelay: ConsumerRunner | undefined;
  s3: S3Client | undefined;
  sqs: SQSClient | undefined;
  close(): Promise<void>;
}

/** The SDK clients the configuration needs; the SDK is loaded only then (the embedded default runs without it). */
export async function awsClients(config: Config): Promise<{ s3?: S3Client; sqs?: SQSClient; sns?: SNSClient }> {
  // A stalled endpoint (accepts, never answers) must fail calls, not hold them: a bound on
  // connecting, and on silence. S3 bounds idleness only (a part download may take long while
  // it progresses); SQS messages are small, so a whole call is bounded (a long poll passes its own).
  const { connectTimeoutMs, requestTimeoutMs, maxAttempts } = config.aws;
  const common = {
    region: config.awsRegion,
    maxAttempts,
    ...(config.awsEndpointUrl ? { endpoint: config.awsEndpointUrl } : {}),
  };
  return {
    s3: config.storageUrl.startsWith('s3://')
      ? new (await import('@aws-sdk/client-s3')).S3Client({
          ...common,
          forcePathStyle: config.awsEndpointUrl !== undefined,
          requestHandler: { connectionTimeout: connectTimeoutMs, socketTimeout: requestTimeoutMs },
        })
      : undefined,
    sqs:
      config.queueUrl !== 'sqlite:'
        ? new (await import('@aws-sdk/client-sqs')).SQSClient({
            ...common,
            requestHandler: { connectionTimeout: connectTimeoutMs, requestTimeout: requestTimeoutMs, throwOnRequestTimeout: true },
          })
        : undefined,
    sns: config.events.snsTopicArn
      ? new (await import('@aws-sdk/client-sns')).SNSClient({
          ...common,
          requestHandler: { connectionTimeout: connectTimeoutMs, requestTimeout: requestTimeoutMs, throwOnRequestTimeout: true },
        })
      : undefined,
  };
}

export async function createRuntime(config: Config, overrides: RuntimeOverrides = {}): Promise<Runtime> {
  const log = overrides.log ?? createLogger(config.logLevel);
  // Before anything below makes it as a parent of its own directory (the store, the caches).
  ensureDataDir(config.dataDir);
  ensureFolder(config.cacheDir, 'storage', 'cache folder', 'CACHE_DIR');
  ensureFolder(config.tmpDir, 'storage', 'temp folder', 'TMP_DIR');
  if (config.storageUrl.startsWith('file://')) ensureFolder(config.storageUrl.slice('file://'.length), 'storage', 'object store folder', 'STORAGE_URL');
  const defaults = overrides.s3 || overrides.sqs ? {} : await awsClients(config);
  const s3 = overrides.s3 ?? defaults.s3;
  const sqs = overrides.sqs ?? defaults.sqs;
  const sns = overrides.sns ?? defaults.sns;

  const metrics = overrides.metrics ?? new Metrics({ defaults: true });
  const storeRoot = config.storageUrl.startsWith('file://') ? config.storageUrl.slice('file://'.length) : undefined;
  const store: ObjectStore =
    overrides.store ??
    (storeRoot !== undefined
      ? new FileObjectStore(storeRoot)
      : new (await import('../store/s3Store.js')).S3ObjectStore(s3!, parseS3Url(config.storageUrl), (reason) => metrics.s3DirectFallbacks.inc({ reason })));

  // Embedded: one SQLite database holds the ledger and the queue, shared by every process on
  // DATA_DIR. AWS: the ledger is objects in the bucket, the queue SQS.
  let queue: Queue;
  let ledger: IngestLedger;
  if (config.queueUrl === 'sqlite:') {
    const ledgerDb = openLedgerDb(config.dataDir);
    const sqliteQueue = new SqliteQueue(ledgerDb, config.worker.maxReceives);
    if (config.storageUrl.startsWith('file://')) {
      const imported = importLegacyLayout(config.storageUrl.slice('file://'.length), ledgerDb, sqliteQueue, legacyOwner(config));
      if (imported) log.info(imported, 'moved the earlier release\'s ingest files into the SQLite ledger');
    }
    queue = sqliteQueue;
    ledger = new SqliteLedger(ledgerDb, sqliteQueue);
  } else {
    queue = new (await import('../queue/sqsQueue.js')).SqsQueue(sqs!, config.queueUrl);
    ledger = new ObjectLedger(store, queue);
  }

  const db = await DuckDb.open({
    tempDir: path.join(config.tmpDir, 'duckdb'),
    memoryLimit: config.duckdbMemoryLimit,
    maxTempSize: config.duckdbMaxTempSize,
    ...(overrides.duckdbThreads !== undefined && { threads: overrides.duckdbThreads }),
  });
  const boundaries = new BoundaryRepository(store, undefined, undefined, (version, err) =>
    log.warn({ version, err: String(err) }, 'the boundary version published could not be loaded: requests go on with the one before, and it is tried again in 30 s'),
  );
  // On the embedded store DuckDB reads the store's own files: the cache copies nothing.
  const cache = new PartCache(store, config.cacheDir, config.cacheMaxBytes, metrics, storeRoot !== undefined ? localFiles(storeRoot) : undefined);
  // The event log: SQLite beside the ledger on the embedded backend, numbered objects in the
  // bucket on AWS. The worker records into it; webhooks, the stream, CAP and SNS read it.
  const events = config.queueUrl === 'sqlite:' ? new EventLog(config.dataDir) : undefined;
  const feed: EventFeed = events ?? new ObjectEventLog(store);
  ledger = announcingRetractions(ledger, feed, async (lng, lat) => (await boundaries.current()).tagger.tag(lng, lat), Date.now, async (pkey, createdMs) => {
    // Its tombstone too: the ledger already says it is retracted.
    const window = await archive().open({ startMs: createdMs, endMs: createdMs, admin: undefined, pkey, limit: 1, includeRetracted: true });
    const item = (await window.page('geojson')).batches.flatMap((b) => b.items as string[])[0];
    return item === undefined ? undefined : (JSON.parse(item) as ReportFeature);
  });
  const changes = new ChangeLog(store, config.syncSettleMs, config.syncRetentionMs);

  const policy = new HostPolicy(config.events.webhookAllowHosts);
  /**
   * Webhook sends under way at once, one at most per subscription: an endpoint that never answers
   * holds one for the webhook timeout. With 16, sixteen dead endpoints held every send and the
   * others waited out that timeout; each send is a batch of 500 reports at most (some 0.8 MB).
   */
  const WEBHOOK_SENDS_AT_ONCE = 64;

  // Built on first use: a role that never asks for one never builds it.
  const objectHooks = once(() => new ObjectWebhooks(store, feed));
  const webhooks = once(() =>
    events
      ? new WebhookDispatcher(events, policy, { ...config.events, concurrency: WEBHOOK_SENDS_AT_ONCE }, log)
      : objectWebhookDispatcher(objectHooks(), feed, policy, { ...config.events, concurrency: WEBHOOK_SENDS_AT_ONCE }, log),
  );
  const relay = once(() =>
    config.events.snsTopicArn && sns
      ? snsRelay(feed, store, sns, {
          topicArn: config.events.snsTopicArn,
          retryBaseMs: config.events.snsRetryBaseMs,
          retryMaxMs: 300_000,
          // Each attempt up to the request timeout, and the SDK's backoff between them.
          callMs: config.aws.requestTimeoutMs * config.aws.maxAttempts * 2,
        }, log)
      : undefined,
  );
  const worker = once(
    () =>
      new Worker(
        {
          store,
          queue,
          ledger,
          boundaries,
          db,
          tmpDir: path.join(config.dataDir, 'tmp', 'worker'),
          log,
          metrics,
          events: feed,
          changes,
        },
        { flushIntervalSeconds: config.flushIntervalSeconds, maxBufferedReports: config.worker.maxBufferedReports, visibilitySeconds: config.worker.visibilitySeconds },
      ),
  );
  const intake = once(() => new Intake(ledger));
  const reconciler = once(() => new Reconciler(ledger, log, store));
  const archive = once(() => new Archive(store, cache, db, archiveStates(ledger, changes), log));
  const webhookAdmin = once(() => (events ? sqliteAdmin(events) : objectAdmin(objectHooks(), async (pkey) => (await ledger.lookup(pkey))?.retraction !== undefined)));
  return {
    config,
    log,
    metrics,
    store,
    queue,
    ledger,
    db,
    boundaries,
    get intake() {
      return intake();
    },
    get reconciler() {
      return reconciler();
    },
    get archive() {
      return archive();
    },
    cache,
    get worker() {
      return worker();
    },
    changes,
    events,
    feed,
    get webhookAdmin() {
      return webhookAdmin();
    },
    get webhooks() {
      return webhooks();
    },
    get snsRelay() {
      return relay();
    },
    s3,
    sqs,
    async close() {
      await webhooks.built()?.stop();
      await relay.built()?.stop();
      boundaries.close();
      // The ranged copies' journal now, so a restart keeps what this process fetched last.
      await cache.close();
      events?.close();
      queue.close();
      await ledger.close();
      db.close();
    },
  };
}

/** `build()` on the first call, its value after; `built()` is that value, or undefined before. */
function once<T>(build: () => T): (() => T) & { built(): T | undefined } {
  let value: { v: T } | undefined;
  return Object.assign(() => (value ??= { v: build() }).v, { built: () => value?.v });
}

/**
 * The partner an earlier release's ingest files belong to: that release named no partner in its
 * records, and a data dir with one key (configured, or the one it generated) had one partner.
 * With several keys configured nobody can tell, and the reports stay the operators'.
 */
function legacyOwner(config: Config): string | undefined {
  if (config.apiKeys.length === 1) return config.apiKeys[0]!.name;
  if (config.apiKeys.length === 0 && fs.existsSync(path.join(config.dataDir, GENERATED_KEY_FILE))) return GENERATED_KEY_NAME;
  return undefined;
}
