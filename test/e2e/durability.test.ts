// Invariants 1-3 under failure: outages answer 503 and lose nothing; crashes
// of the worker at its kill points lose nothing and duplicate nothing in answers;
// a repeated post_id is "already exists" before a flush, after it, and after a restart.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { bootstrap } from '../../src/bootstrap.js';
import type { Config } from '../../src/config.js';
import type { Runtime } from '../../src/runtime.js';
import { Intake } from '../../src/ingest/intake.js';
import { parsePartnerReport } from '../../src/reports/partnerReport.js';
import { FileObjectStore } from '../../src/store/fileStore.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { allArchived,
  BACKENDS,
  eventually,
  getJson,
  keysUnder,
  postReport,
  report,
  startTestService,
  testConfig,
  testRuntime,
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
    expect(afterRestart.body).toEqual({ post_id: 1, created: false, message: 'post_id 1 already exists' });
    const res = await getJson(`${svc.url}/reports/archive?${WINDOW}`);
    expect(res.body.result.features.map((f: any) => [f.properties.pkey, f.properties.title])).toEqual([['partner-1', 'first']]);
    await svc.stop();
  });

  it('kill point: a worker dying after writing its parts, before acknowledging, loses and duplicates nothing', async () => {
    const config = await testConfig(kind, emulator);
    const crashing = await testRuntime(config, emulator, {
      afterPartsWritten: async () => {
        throw new Error('simulated crash after the parts were written');
      },
    });
    const api = await startTestService(crashing, { worker: false, reconcile: false });
    const ids = [11, 12, 13, 14, 15];
    for (const id of ids) expect((await postReport(api.url, report(id, { created_at: `2026-11-21T0${id - 10}:00:00Z` }))).status).toBe(201);
    await bufferAll(crashing, ids.length);
    await expect(crashing.worker.flush()).rejects.toThrow(/simulated crash/);
    const partsAfterCrash = await keysUnder(crashing, 'reports/v1/');
    expect(partsAfterCrash).toHaveLength(ids.length);
    expect(await keysUnder(crashing, 'ingest/pending/')).toHaveLength(ids.length);
    await api.stop(); // the crashed process is gone; its buffer with it

    // The next process reconciles the still-pending reports and archives them again.
    const next = await startTestService(await testRuntime(config, emulator));
    await next.rt.reconciler.run(0);
    await allArchived(next.rt);
    // Every report now sits in two parts; the answer still has each exactly once.
    expect((await keysUnder(next.rt, 'reports/v1/')).length).toBe(2 * ids.length);
    expect((await archivedPkeys(next.url)).sort()).toEqual(ids.map((id) => `partner-${id}`).sort());
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
    expect((await archivedPkeys(next.url)).sort()).toEqual(ids.map((id) => `partner-${id}`).sort());
    expect(await keysUnder(next.rt, 'ingest/pending/')).toEqual([]);
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
      const dead = await keysUnder(svc.rt, 'dead-letter/');
      expect(dead).toHaveLength(1);
      const body = JSON.parse((await svc.rt.store.get(dead[0]!))!.body.toString());
      expect(body.body).toBe('{"this is": "not an ingest record"}');
    } else {
      const { deadLetterQueueUrl } = await bootstrap(config, { s3: emulator!.s3, sqs: emulator!.sqs });
      const out = await emulator!.sqs.send(new ReceiveMessageCommand({ QueueUrl: deadLetterQueueUrl, MaxNumberOfMessages: 10 }));
      expect((out.Messages ?? []).map((m) => m.Body)).toEqual(['{"this is": "not an ingest record"}']);
    }
    await svc.stop();
  }, 60_000);

  it('a marker whose key was lost in a crash is accepted: retries say "already exists", reconciliation rebuilds the key and archives the first version', async () => {
    const config = await testConfig(kind, emulator);
    const rt = await testRuntime(config, emulator);
    const svc = await startTestService(rt, { worker: false, reconcile: false });
    expect((await postReport(svc.url, report(71, { title: 'first' }))).status).toBe(201);
    // The crash: the marker is durable, the key's name never made it.
    await rt.store.delete(['ingest/keys/partner/71.json']);
    const retry = await postReport(svc.url, report(71, { title: 'second' }));
    expect(retry.status).toBe(200);
    expect(retry.body.created).toBe(false);

    const result = await rt.reconciler.run(0);
    expect(result).toMatchObject({ requeued: 1, abandonedRemoved: 0 });
    expect(JSON.parse((await rt.store.get('ingest/keys/partner/71.json'))!.body.toString()).report.title).toBe('first');
    rt.worker.start();
    await allArchived(rt);
    const res = await getJson(`${svc.url}/reports/archive?${WINDOW}`);
    expect(res.body.result.features.map((f: any) => [f.properties.pkey, f.properties.title])).toEqual([['partner-71', 'first']]);
    await rt.worker.stop();
    await svc.stop();
  });

  it('a marker torn by a crash during its own creation: reconciliation removes it; a retry replaces it once it is old, 503 before', async () => {
    const config = await testConfig(kind, emulator);
    const rt = await testRuntime(config, emulator);
    const svc = await startTestService(rt, { worker: false, reconcile: false });
    await rt.store.put('ingest/pending/partner/72.json', '{"v":1,"pkey":"partn');
    const fresh = await postReport(svc.url, report(72));
    expect(fresh.status).toBe(503);
    expect(fresh.headers.get('retry-after')).toBeTruthy();
    expect(await rt.reconciler.run(0)).toMatchObject({ requeued: 0, abandonedRemoved: 1 });
    expect(await keysUnder(rt, 'ingest/')).toEqual([]);

    // An old torn marker, found by the retry before reconciliation ran.
    await rt.store.put('ingest/pending/partner/73.json', '');
    const old = new Intake(rt.store, rt.queue, () => Date.now() + 120_000);
    expect(await old.accept(parsePartnerReport(report(73), Date.now()))).toEqual({ created: true, pkey: 'partner-73' });
    expect(JSON.parse((await rt.store.get('ingest/pending/partner/73.json'))!.body.toString()).pkey).toBe('partner-73');
    expect(await keysUnder(rt, 'ingest/keys/')).toEqual(['ingest/keys/partner/73.json']);

    // A marker from before markers carried records is empty; its key holds the record.
    const record = { v: 1, pkey: 'partner-74', source: 'partner', post_id: 74, received_at: new Date().toISOString(), report: parsePartnerReport(report(74)) };
    await rt.store.put('ingest/keys/partner/74.json', JSON.stringify(record));
    await rt.store.put('ingest/pending/partner/74.json', '');
    expect(await rt.reconciler.run(0)).toMatchObject({ requeued: 2, abandonedRemoved: 0 });
    expect(JSON.parse((await rt.store.get('ingest/pending/partner/74.json'))!.body.toString())).toEqual(record);
    await svc.stop();
  });
});

describe('a power loss on the embedded store', () => {
  it('loses no accepted report: each is archived once with its first version, and repeats still say "already exists"', async () => {
    const config = await testConfig('embedded');
    const root = config.storageUrl.slice('file://'.length);
    // Segments stay until the store closes, as they would at the moment of a loss.
    const keep = { checkpointAfterMs: 3_600_000, rotateAfterMs: 3_600_000 };
    const before = await testRuntime(config, undefined, { store: new FileObjectStore(root, { ...keep, bootId: 'boot-1' }) });
    let svc = await startTestService(before, { worker: false, reconcile: false });
    for (const n of [81, 82, 83, 84, 85]) expect((await postReport(svc.url, report(n, { title: 'first' }))).status).toBe(201);

    // The disk after the loss: the journal, flushed before each answer, and none of the
    // markers and keys, which were never flushed on their own.
    const journal = path.join(root, '+journal');
    const saved = path.join(await fs.mkdtemp(path.join(path.dirname(root), 'journal-')), 'segments');
    await fs.cp(journal, saved, { recursive: true });
    await svc.stop();
    await fs.rm(path.join(root, 'ingest'), { recursive: true });
    await fs.cp(saved, journal, { recursive: true });

    const after = await testRuntime(config, undefined, { store: new FileObjectStore(root, { ...keep, bootId: 'boot-2' }) });
    svc = await startTestService(after);
    const repeat = await postReport(svc.url, report(81, { title: 'second' }));
    expect(repeat.status).toBe(200);
    expect(repeat.body.created).toBe(false);
    await allArchived(after);
    expect((await archivedPkeys(svc.url)).sort()).toEqual(['partner-81', 'partner-82', 'partner-83', 'partner-84', 'partner-85']);
    const res = await getJson(`${svc.url}/reports/archive?${WINDOW}`);
    expect(new Set(res.body.result.features.map((f: any) => f.properties.title))).toEqual(new Set(['first']));
    await svc.stop();
  });
});

describe('outages answer 503 with Retry-After and lose nothing', () => {
  it('storage failing at the idempotency key: 503, and a retry creates the report (never "already exists")', async () => {
    const config: Config = await testConfig('embedded');
    const svc = await startTestService(await testRuntime(config), { worker: false, reconcile: false });
    const root = config.storageUrl.slice('file://'.length);
    // A file where the key folder should be: the marker write succeeds, the key write fails.
    await fs.mkdir(path.join(root, 'ingest'), { recursive: true });
    await fs.writeFile(path.join(root, 'ingest', 'keys'), 'in the way');
    const failed = await postReport(svc.url, report(41));
    expect(failed.status).toBe(503);
    expect(failed.headers.get('retry-after')).toBe('5');
    expect(failed.body).toMatchObject({ statusCode: 503, error: 'Service Unavailable' });
    expect(JSON.stringify(failed.body)).not.toMatch(/ENOTDIR|EEXIST|\/tmp\//);

    await fs.rm(path.join(root, 'ingest', 'keys'));
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
    expect(await archivedPkeys(svc.url)).toEqual(['partner-61']);
    await svc.stop();
    await rt.worker.stop();
    await s3.stop();
    await sqs.stop();
  });
});
