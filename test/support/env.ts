// Test backends: the embedded default (temp dir, SQLite ledger and queue) and
// S3/SQS on fauxqs. Both run the same code above the ports.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LIST, listValue, VARCHAR } from '@duckdb/node-api';
import { nameOfBareKey } from '../../src/partners/apiKeys.js';
import { REPORTS_PREFIX } from '../../src/store/layout.js';
import { bootstrap } from '../../src/main/bootstrap.js';
import { loadConfig, type Config } from '../../src/shared/config.js';
import { createLogger } from '../../src/shared/log.js';
import { createRuntime, type Runtime, type RuntimeOverrides } from '../../src/main/runtime.js';
import { startService, type RunningService } from '../../src/main/service.js';
import type { AcceptanceLedger, HeldAcceptResult, HeldRecord, IngestRecord } from '../../src/ledger/ledger.js';
import type { Emulator } from './fauxqs.js';

export const API_KEY = 'test-key-0123456789abcdef';
export const OTHER_KEY = 'other-key-0123456789abcdef';
/** The names the service gives these keys (bare in API_KEYS): a partner's post_ids and pkeys are under its key's name. */
export const API_KEY_NAME = nameOfBareKey(API_KEY);
export const OTHER_KEY_NAME = nameOfBareKey(OTHER_KEY);

/** The pkey of a report posted with a named key (by default API_KEY's). */
export function pkeyOf(postId: number, partner = API_KEY_NAME): string {
  return `partner-${partner}-${postId}`;
}

export type BackendKind = 'embedded' | 'aws';
export const BACKENDS: BackendKind[] = ['embedded', 'aws'];

const here = path.dirname(fileURLToPath(import.meta.url));
/** The PSA/NAMRIA boundaries beside the project (never copied into it). */
export const SHARED_PH = path.resolve(here, '../../../shared/data/ph');
export const SHARED_PH_NATIONAL = path.resolve(here, '../../../shared/data/ph-national');
export const HAS_SHARED_PH = fs.existsSync(path.join(SHARED_PH, 'cities.geojson'));
export const SHARED_PH_MISSING = `skipped: PSA/NAMRIA boundaries not found at ${SHARED_PH}`;

export async function tempDir(prefix = 'flood-test-'): Promise<string> {
  return fsp.mkdtemp(path.join(os.tmpdir(), prefix));
}

/** A config for one backend, each test run with its own directory, bucket and queue. */
export async function testConfig(kind: BackendKind, emulator?: Emulator, env: Record<string, string> = {}): Promise<Config> {
  const dir = await tempDir();
  const id = randomBytes(4).toString('hex');
  const base: Record<string, string> = {
    DATA_DIR: dir,
    API_KEYS: `${API_KEY},${OTHER_KEY}`,
    FLUSH_INTERVAL_SECONDS: '0.2',
    LOG_LEVEL: 'silent',
    // A first post starts the ledger's commit thread, which on a host busy with other suites took
    // past the default 2 s once: a 503 for the host's sake. Tests of the deadline set their own.
    ACCEPT_DEADLINE_SECONDS: '10',
    // Merged-away parts deleted at once: a test of the grace sets its own.
    RETIRE_GRACE_SECONDS: '0',
  };
  if (kind === 'aws') {
    if (!emulator) throw new Error('the aws backend needs an emulator');
    base.STORAGE_URL = `s3://archive-${id}/flood`;
    base.QUEUE_URL = emulator.queueUrl(`reports-${id}`);
    base.AWS_ENDPOINT_URL = emulator.endpoint;
  }
  return loadConfig({ ...base, ...env }, dir);
}

export async function testRuntime(config: Config, emulator?: Emulator, extra: RuntimeOverrides = {}): Promise<Runtime> {
  const overrides: RuntimeOverrides = { log: createLogger('silent'), ...extra };
  if (config.storageUrl.startsWith('s3://')) {
    overrides.s3 = extra.s3 ?? emulator!.s3;
    overrides.sqs = extra.sqs ?? emulator!.sqs;
  }
  const rt = await createRuntime(config, overrides);
  // SQS requests go to the endpoint and name the queue by URL path, so the
  // configured URL works even though fauxqs answers with another host name.
  await bootstrap(config, { ...(emulator && { s3: emulator.s3, sqs: emulator.sqs }) });
  return rt;
}

export interface TestService {
  rt: Runtime;
  service: RunningService;
  url: string;
  /** Prometheus /metrics on its own port, when the config sets METRICS_PORT. */
  metricsUrl: string | undefined;
  stop(): Promise<void>;
}

export async function startTestService(
  rt: Runtime,
  options: { worker?: boolean; reconcile?: boolean } = {},
): Promise<TestService> {
  const service = await startService(rt, {
    api: true,
    worker: options.worker ?? true,
    reconcile: options.reconcile ?? true,
    port: 0,
    host: '127.0.0.1',
    apiKeys: rt.config.apiKeys,
  });
  return {
    rt,
    service,
    url: service.url!,
    metricsUrl: service.metricsUrl,
    async stop() {
      await service.stop();
      await rt.close();
    },
  };
}

export interface PostOptions {
  key?: string | null;
  contentType?: string | null;
  raw?: string;
}

export async function postReport(url: string, body: unknown, options: PostOptions = {}): Promise<{ status: number; body: any; headers: Headers }> {
  const headers: Record<string, string> = {};
  const key = options.key === undefined ? API_KEY : options.key;
  if (key !== null) headers['X-Api-Key'] = key;
  const contentType = options.contentType === undefined ? 'application/json' : options.contentType;
  if (contentType !== null) headers['Content-Type'] = contentType;
  const res = await fetch(`${url}/feeds/partner`, {
    method: 'POST',
    headers,
    body: options.raw ?? JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
}

/** Posts `report(id)` for each id, twenty at a time; throws unless every one is accepted as new (201). */
export async function postAll(url: string, ids: readonly number[]): Promise<void> {
  for (let i = 0; i < ids.length; i += 20) {
    const results = await Promise.all(ids.slice(i, i + 20).map((id) => postReport(url, report(id))));
    const refused = results.find((r) => r.status !== 201);
    if (refused) throw new Error(`a post was answered ${refused.status}, not 201: ${JSON.stringify(refused.body)}`);
  }
}

/**
 * Posts as a partner does: a 503 (the service too busy to accept durably in time) is sent again
 * with the same body, for up to `ms`. For a test's seed reports, where the feed's answers under
 * load are not what is tested. An acceptance cut off by its deadline may still complete, and
 * the retry then answers 200 (docs/http.md): such a post counts as new, its status given as 201.
 */
export async function postAccepted(url: string, body: unknown, ms = 60_000): Promise<{ status: number; body: any; headers: Headers }> {
  const deadline = Date.now() + ms;
  let cutOff = false;
  for (;;) {
    const res = await postReport(url, body);
    if (res.status === 200 && cutOff) return { ...res, status: 201 };
    if (res.status !== 503 || Date.now() > deadline) return res;
    cutOff = true;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

export async function getJson(url: string, headers: Record<string, string> = { 'User-Agent': 'flood-tests/1.0' }): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(url, { headers });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
}

/** Polls until `check` returns a value other than undefined, or fails after `ms`. */
export async function eventually<T>(check: () => Promise<T | undefined>, ms = 15_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export function report(postId: number, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    post_id: postId,
    created_at: '2026-11-21T13:05:00+08:00',
    partner_city: 'Quezon City',
    disaster_type: 'flood',
    location: { lat: 14.6516, lng: 121.0497 },
    ...overrides,
  };
}

/** Every key in the store under a prefix. */
export async function keysUnder(rt: Runtime, prefix: string): Promise<string[]> {
  const out: string[] = [];
  for await (const info of rt.store.list({ prefix })) out.push(info.key);
  return out;
}

/** The pkeys the ledger accepted, sorted. */
export async function acceptedPkeys(rt: Runtime): Promise<string[]> {
  const out: string[] = [];
  for await (const page of rt.ledger.accepted(0, 8.64e15)) out.push(...page.map((r) => r.pkey));
  return out.sort();
}

/** `read` over local copies of every part in the store (none when it holds no part). */
async function withPartFiles<T>(rt: Runtime, read: (files: string[]) => Promise<T>): Promise<T> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'flood-parts-'));
  try {
    const files: string[] = [];
    for (const key of await keysUnder(rt, REPORTS_PREFIX)) {
      const file = path.join(dir, `${files.length}.parquet`);
      await fsp.writeFile(file, (await rt.store.get(key))!.body);
      files.push(file);
    }
    return await read(files);
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

/** A report's row as the archive's parts hold it (every column), read by DuckDB; undefined when no part holds it. */
export async function archivedRow(rt: Runtime, pkey: string): Promise<Record<string, unknown> | undefined> {
  return withPartFiles(rt, async (files) => {
    if (files.length === 0) return undefined;
    return rt.db.withConnection(async (conn) => {
      const reader = await conn.runAndReadAll(`SELECT * FROM read_parquet($files, union_by_name = true) WHERE pkey = $pkey`, { files: listValue(files), pkey }, { files: LIST(VARCHAR), pkey: VARCHAR });
      return reader.getRowObjectsJS()[0] as Record<string, unknown> | undefined;
    });
  });
}

/** How many rows the archive's parts hold of each report (answers show one; storage may hold more). */
export async function storedCopies(rt: Runtime): Promise<Map<string, number>> {
  return withPartFiles(rt, async (files) => {
    if (files.length === 0) return new Map();
    return rt.db.withConnection(async (conn) => {
      const reader = await conn.runAndReadAll(`SELECT pkey, count(*)::INTEGER FROM read_parquet($files, union_by_name = true) GROUP BY pkey`, { files: listValue(files) }, { files: LIST(VARCHAR) });
      return new Map(reader.getRows() as [string, number][]);
    });
  });
}

/** Each stored report's boundary version and city tag, by pkey (the last part read wins: copies agree). */
export async function storedTags(rt: Runtime): Promise<Map<string, { version: string; city: string | null }>> {
  return withPartFiles(rt, async (files) => {
    if (files.length === 0) return new Map();
    return rt.db.withConnection(async (conn) => {
      const reader = await conn.runAndReadAll(`SELECT pkey, boundary_version, instance_region_code FROM read_parquet($files, union_by_name = true)`, { files: listValue(files) }, { files: LIST(VARCHAR) });
      return new Map((reader.getRows() as [string, string, string | null][]).map(([pkey, version, city]) => [pkey, { version, city }]));
    });
  });
}

/** How many accepted reports the ledger says still wait to be archived. */
export async function pendingCount(rt: Runtime): Promise<number> {
  let n = 0;
  for await (const page of rt.ledger.accepted(0, 8.64e15)) n += page.filter((r) => r.pending).length;
  return n;
}

/** Waits until every accepted report is archived: nothing pending in the ledger, nothing buffered. */
export async function allArchived(rt: Runtime, ms = 20_000): Promise<void> {
  await eventually(
    async () => ((await pendingCount(rt)) === 0 && rt.worker.buffered === 0 ? true : undefined),
    ms,
    'every accepted report to be archived',
  );
}

/**
 * Records as a bulk import hands them to acceptHeld (HeldRecord): each record's JSON without its
 * received_at, which the ledger adds, and its identity.
 */
export function heldRecords(records: readonly IngestRecord[]): HeldRecord[] {
  return records.map(({ received_at: _receivedAt, ...record }) => ({
    pkey: record.pkey,
    source: record.source,
    ...(record.partner !== undefined && { partner: record.partner }),
    post_id: record.post_id,
    created_at_ms: Date.parse(record.report.created_at),
    json: JSON.stringify(record),
  }));
}

/** acceptHeld of whole records (heldRecords), received now. */
export function acceptHeld(ledger: Pick<AcceptanceLedger, 'acceptHeld'>, records: readonly IngestRecord[], holdUntilMs: number): Promise<HeldAcceptResult[]> {
  return ledger.acceptHeld(heldRecords(records), new Date().toISOString(), holdUntilMs);
}
