// Invariants 1-3 (docs/architecture.md) under failure: outages answer 503 and lose nothing; crashes
// of the worker at its kill points lose nothing and duplicate nothing in answers;
// a repeated post_id is "already exists" before a flush, after it, and after a restart.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import path from 'node:path';
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { bootstrap } from '../../src/main/bootstrap.js';
import type { Config } from '../../src/shared/config.js';
import type { Runtime } from '../../src/main/runtime.js';
import Database from 'better-sqlite3';
import { deadLettersFor } from '../../src/ops/deadLetters.js';
import { sqlString } from '../../src/archive/duckdb.js';
import { failAfterPuts } from '../support/faultyStore.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { acceptedPkeys,
  API_KEY_NAME,
  allArchived,
  BACKENDS,
  eventually,
  getJson,
  keysUnder,
  pendingCount,
  postReport,
  report,
  startTestService,
  testConfig,
  testRuntime,
  pkeyOf,
} from '../support/env.js';

const WINDOW = 'start=2026-11-01T00:00:00%2B0000&end=2026-11-30T23:59:59%2B0000&geoformat=geojson';

async function archivedPkeys(url: string): Promise<string[]> {
  const res = await getJson(`${url}/reports/archive?${WINDOW}`);
  expect(res.status).toBe(200);
  return res.body.result.features.map((f: { properties: { pkey: string } }) => f.properties.pkey);
}

/** Posts through a running API, then lets the worker of `rt` drain the queue into its buffer. */
async function bufferAll(rt: Runtime, n: number): Promise<void> {
  await eventually(async () => {
    await rt.worker.pollOnce(0);
    return rt.worker.buffered === n ? true : undefined;
  }, 10_000, `${n} buffered reports`);
}

/** Takes every message off the queue as a crashed worker would, and lets them be lost. */
async function loseMessages(rt: Runtime): Promise<void> {
  await eventually(async () => {
    const got = await rt.queue.receive({ maxMessages: 10, waitSeconds: 1, visibilitySeconds: 60 });
    if (got.length > 0) await rt.queue.delete(got.map((m) => m.receipt));
    const depth = await rt.queue.depth();
    return depth.visible + depth.inFlight === 0 ? true : undefined;
  }, 10_000, 'the queue drained');
}

describe.each(BACKENDS)('durability on the %s backend', (kind) => {
  let emulator: Emulator | undefined;
  beforeAll(async () => {
    if (kind === 'aws') emulator = await startEmulator();
  });
  afterAll(async () => {
    await emulator?.stop();
  });

  it('a repeated post_id is "already exists" before its flush, after it, and after a restart; the first version is kept', async () => {
    const config = await testConfig(kind, emulator);
    let svc = await startTestService(await testRuntime(config, emulator), { worker: false, reconcile: false });
    expect((await postReport(svc.url, report(1, { title: 'first' }))).status).toBe(201);
    const beforeFlush = await postReport(svc.url, report(1, { title: 'second' }));
    expect(beforeFlush.status).toBe(200);
    expect(beforeFlush.body.created).toBe(false);

    await bufferAll(svc.rt, 1);
    await svc.rt.worker.flush();
    const afterFlush = await postReport(svc.url, report(1, { title: 'third' }));
    expect(afterFlush.status).toBe(200);
    await svc.stop();

    svc = await startTestService(await testRuntime(config, emulator));
    const afterRestart = await postReport(svc.url, report(1, { title: 'fourth' }));
    expect(afterRestart.status).toBe(200);
    expect(afterRestart.body).toEqual({ post_id: 1, created: false, pkey: pkeyOf(1), message: 'post_id 1 already exists' });
    const res = await getJson(`${svc.url}/reports/archive?${WINDOW}`);
    expect(res.body.result.features.map((f: any) => [f.properties.pkey, f.properties.title])).toEqual([[pkeyOf(1), 'first']]);
    await svc.stop();
  });

  it('kill point: a worker dying after writing its parts, before acknowledging, loses and duplicates nothing', async () => {
    const config = await testConfig(kind, emulator);
    const base = await testRuntime(config, emulator);
    await base.close();
    const { store } = base;
    // Dies right after its fifth part is stored, before anything is acknowledged.
    const crashing = await testRuntime(config, emulator, { store: failAfterPuts(store, 'reports/', 5) });
    const api = await startTestService(crashing, { worker: false, reconcile: false });
    const ids = [11, 12, 13, 14, 15];
    for (const id of ids) expect((await postReport(api.url, report(id, { created_at: `2026-11-21T0${id - 10}:00:00Z` }))).status).toBe(201);
    await bufferAll(crashing, ids.length);
    await expect(crashing.worker.flush()).rejects.toThrow(/simulated crash/);
    const partsAfterCrash = await keysUnder(crashing, 'reports/v1/');
    expect(partsAfterCrash).toHaveLength(ids.length);
    expect(await pendingCount(crashing)).toBe(ids.length);
    await api.stop(); // the crashed process is gone; its buffer with it

    // The next process reconciles the still-pending reports and archives them again.
    const next = await startTestService(await testRuntime(config, emulator));
    await next.rt.reconciler.run(0);
    await allArchived(next.rt);
    // Every report now sits in two parts; the answer still has each exactly once.
    expect((await keysUnder(next.rt, 'reports/v1/')).length).toBe(2 * ids.length);
    expect((await archivedPkeys(next.url)).sort()).toEqual(ids.map((id) => pkeyOf(id)).sort());
    await next.stop();
  });

  it('kill point: a worker dying after receiving, before writing, loses nothing', async () => {
    const config = await testConfig(kind, emulator);
    const first = await startTestService(await testRuntime(config, emulator), { worker: false, reconcile: false });
    const ids = [21, 22, 23];
    for (const id of ids) expect((await postReport(first.url, report(id))).status).toBe(201);
    await bufferAll(first.rt, ids.length);
    await first.service.server!.close();
    await first.rt.close(); // dies with three reports buffered and nothing written

    const next = await startTestService(await testRuntime(config, emulator));
    await next.rt.reconciler.run(0);
    await eventually(async () => ((await archivedPkeys(next.url)).length === ids.length ? true : undefined), 15_000, 'reports archived');
    expect((await archivedPkeys(next.url)).sort()).toEqual(ids.map((id) => pkeyOf(id)).sort());
    // The ledger marks them archived once their parts are stored: just after they show.
    await allArchived(next.rt);
    await next.stop();
  });

  it('a poison message goes to the dead-letter queue and does not block the others', async () => {
    const config = await testConfig(kind, emulator);
    const svc = await startTestService(await testRuntime(config, emulator));
    await svc.rt.queue.send(['{"this is": "not an ingest record"}']);
    for (const id of [31, 32]) expect((await postReport(svc.url, report(id))).status).toBe(201);
    await eventually(async () => ((await archivedPkeys(svc.url)).length === 2 ? true : undefined), 15_000, 'good reports archived');
    // The poison message cycles on the flush cadence until it is moved aside.
    await eventually(
      async () => {
        const depth = await svc.rt.queue.depth();
        return depth.visible + depth.inFlight === 0 ? true : undefined;
      },
      30_000,
      'the poison message to leave the queue',
    );
    if (kind === 'embedded') {
      expect((await deadLettersFor(svc.rt).list()).map((d) => d.body)).toEqual(['{"this is": "not an ingest record"}']);
    } else {
      const { deadLetterQueueUrl } = await bootstrap(config, { s3: emulator!.s3, sqs: emulator!.sqs });
      const out = await emulator!.sqs.send(new ReceiveMessageCommand({ QueueUrl: deadLetterQueueUrl, MaxNumberOfMessages: 10 }));
      expect((out.Messages ?? []).map((m) => m.Body)).toEqual(['{"this is": "not an ingest record"}']);
    }
    await svc.stop();
  }, 60_000);

  // Markers and keys are the S3 ledger's own; the embedded one keeps rows in one transaction.
  if (kind === 'aws') it('a marker whose key was lost in a crash is accepted: retries say "already exists", reconciliation rebuilds the key and archives the first version', async () => {
    const config = await testConfig(kind, emulator);
    const rt = await testRuntime(config, emulator);
    const svc = await startTestService(rt, { worker: false, reconcile: false });
    expect((await postReport(svc.url, report(71, { title: 'first' }))).status).toBe(201);
    // The crash: the marker is durable, the key never made it.
    await rt.store.delete([`ingest/keys/partner/${API_KEY_NAME}/71.json`]);
    const retry = await postReport(svc.url, report(71, { title: 'second' }));
    expect(retry.status).toBe(200);
    expect(retry.body.created).toBe(false);

    expect(await rt.reconciler.run(0)).toEqual({ requeued: 1 });
    expect((await rt.ledger.get({ source: 'partner', partner: API_KEY_NAME, post_id: 71 }))!.record!.report.title).toBe('first');
    expect(JSON.parse((await rt.store.get(`ingest/keys/partner/${API_KEY_NAME}/71.json`))!.body.toString()).report.title).toBe('first');
    rt.worker.start();
    await allArchived(rt);
    const res = await getJson(`${svc.url}/reports/archive?${WINDOW}`);
    expect(res.body.result.features.map((f: any) => [f.properties.pkey, f.properties.title])).toEqual([[pkeyOf(71), 'first']]);
    await rt.worker.stop();
    await svc.stop();
  });

  it('reconciliation re-enqueues only reports whose message is gone, once per period', async () => {
    const config = await testConfig(kind, emulator);
    const rt = await testRuntime(config, emulator);
    const svc = await startTestService(rt, { worker: false, reconcile: false });
    for (const id of [75, 76]) expect((await postReport(svc.url, report(id))).status).toBe(201);
    await loseMessages(rt);
    expect(await rt.reconciler.run(0)).toEqual({ requeued: 2 });
    expect(await rt.reconciler.run(60_000)).toEqual({ requeued: 0 });
    rt.worker.start();
    await allArchived(rt);
    expect((await archivedPkeys(svc.url)).sort()).toEqual([pkeyOf(75), pkeyOf(76)]);
    await rt.worker.stop();
    await svc.stop();
  });

  it('a message sent again for a report archived since is dropped without a second copy; one still pending is archived', async () => {
    const config = await testConfig(kind, emulator);
    const rt = await testRuntime(config, emulator);
    const svc = await startTestService(rt, { worker: false, reconcile: false });
    // A report's message as reconciliation sends it again (the ledger keeps its record until it is archived).
    const again = async (id: number) => JSON.stringify({ ...(await rt.ledger.get({ source: 'partner', partner: API_KEY_NAME, post_id: id }))!.record!, redelivery: true });
    for (const id of [81, 82]) expect((await postReport(svc.url, report(id))).status).toBe(201);
    const sentAgain = [await again(81), await again(82)];
    await bufferAll(rt, 2);
    await rt.worker.flush();
    expect((await rt.queue.depth()).visible).toBe(0);
    // Reconciliation that raced the flush sends 81 and 82 again; 83, still pending, comes twice.
    expect((await postReport(svc.url, report(83))).status).toBe(201);
    await rt.queue.send([...sentAgain, await again(83)]);
    await eventually(async () => {
      await rt.worker.pollOnce(0);
      return (await rt.queue.depth()).visible === 0 && rt.worker.buffered === 1 ? true : undefined;
    }, 10_000, 'the messages taken');
    // 81 and 82 are done with (their messages deleted); 83's two wait for its flush.
    expect((await rt.queue.depth()).inFlight).toBe(2);
    await rt.worker.flush();
    expect((await archivedPkeys(svc.url)).sort()).toEqual([pkeyOf(81), pkeyOf(82), pkeyOf(83)]);
    // In the parts themselves, before any read-time de-duplication: each report once.
    const files: string[] = [];
    for await (const info of rt.store.list({ prefix: 'reports/v1/' })) files.push(await rt.cache.localFile(info));
    const stored = await rt.db.withConnection(async (conn) => (await conn.runAndReadAll(`SELECT pkey FROM read_parquet([${files.map(sqlString).join(', ')}]) ORDER BY pkey`)).getColumnsJS()[0]);
    expect(stored).toEqual([pkeyOf(81), pkeyOf(82), pkeyOf(83)]);
    await svc.stop();
  });

  it("the reconciliation timers of several processes take turns: one run a period, however many start or restart", async () => {
    const config = await testConfig(kind, emulator);
    const rt = await testRuntime(config, emulator);
    const svc = await startTestService(rt, { worker: false, reconcile: false });
    for (const id of [77, 78]) expect((await postReport(svc.url, report(id))).status).toBe(201);
    await loseMessages(rt);
    // Three processes of one deployment (a restart is a new one), their timers in one period.
    // (Two at the same instant are decided by If-None-Match, which the store contract checks on moto.)
    const others = [await testRuntime(config, emulator), await testRuntime(config, emulator)];
    const restarted = await testRuntime(config, emulator);
    // At the start of a period, so that all of them fall within it.
    const period = 8_000;
    const nextPeriod = () => new Promise((r) => setTimeout(r, period - (Date.now() % period) + 20));
    await nextPeriod();
    const runs = [];
    for (const r of [rt, ...others, rt]) runs.push(await r.reconciler.runInTurn(0, period));
    expect(runs).toEqual([{ requeued: 2 }, undefined, undefined, undefined]);
    expect(await restarted.reconciler.runInTurn(0, period)).toBeUndefined();
    await loseMessages(rt);
    await nextPeriod();
    expect(await restarted.reconciler.runInTurn(0, period)).toEqual({ requeued: 2 });
    expect(await rt.reconciler.runInTurn(0, period)).toBeUndefined();
    // Within a process, a timer that fires while its last run goes on waits for the next period.
    await loseMessages(rt);
    await nextPeriod();
    expect(await Promise.all([others[0]!.reconciler.runInTurn(0, period), others[0]!.reconciler.runInTurn(0, period)])).toEqual([{ requeued: 2 }, undefined]);
    for (const r of [...others, restarted]) await r.close();
    await svc.stop();
  });
});

describe('outages answer 503 with Retry-After and lose nothing', () => {
  it('a ledger locked by another process: 503 with Retry-After, nothing accepted; then a retry creates the report', async () => {
    const config: Config = await testConfig('embedded');
    const svc = await startTestService(await testRuntime(config), { worker: false, reconcile: false });
    const other = new Database(path.join(config.dataDir, 'ledger.sqlite'));
    other.prepare('BEGIN EXCLUSIVE').run();
    const failed = await postReport(svc.url, report(41));
    expect(failed.status).toBe(503);
    expect(failed.headers.get('retry-after')).toBeTruthy();
    expect(failed.body).toMatchObject({ statusCode: 503, error: 'Service Unavailable' });
    expect(JSON.stringify(failed.body)).not.toMatch(/SQLITE|locked|\/tmp\//);
    other.prepare('ROLLBACK').run();
    other.close();
    expect(await acceptedPkeys(svc.rt)).toEqual([]);
    const retry = await postReport(svc.url, report(41));
    expect(retry.status).toBe(201);
    await svc.stop();
  });

  it('object store down: 503 with Retry-After', async () => {
    const s3 = await startEmulator();
    const config = await testConfig('aws', s3);
    const svc = await startTestService(await testRuntime(config, s3), { worker: false, reconcile: false });
    await s3.stop();
    const res = await postReport(svc.url, report(51));
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('5');
    expect(res.body.message).toMatch(/object store is unavailable/);
    await svc.stop();
  });

  it('queue down: 503; the report is already durable, a retry says "already exists", and it is archived once the queue is back', async () => {
    const s3 = await startEmulator();
    const sqs = await startEmulator();
    const config = await testConfig('aws', sqs);
    const mixed = { ...sqs, s3: s3.s3 };
    const rt = await testRuntime(config, mixed);
    const svc = await startTestService(rt, { worker: false, reconcile: false });
    await sqs.stop();
    const res = await postReport(svc.url, report(61));
    expect(res.status).toBe(503);
    expect(res.body.message).toMatch(/queue is unavailable/);
    const retry = await postReport(svc.url, report(61));
    expect(retry.status).toBe(200);
    expect(retry.body.created).toBe(false);

    await sqs.restart();
    await bootstrap(config, { s3: s3.s3, sqs: sqs.sqs });
    const result = await rt.reconciler.run(0);
    expect(result.requeued).toBe(1);
    rt.worker.start();
    await eventually(async () => ((await archivedPkeys(svc.url)).length === 1 ? true : undefined), 15_000, 'the report archived');
    expect(await archivedPkeys(svc.url)).toEqual([pkeyOf(61)]);
    await svc.stop();
    await rt.worker.stop();
    await s3.stop();
    await sqs.stop();
  });
});
