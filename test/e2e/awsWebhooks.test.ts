// Webhooks on the AWS backend: subscriptions, the event log and each subscription's cursor are
// objects in the bucket (fauxqs; moto where conditional writes decide who sends). A loopback
// receiver (admitted by WEBHOOK_ALLOW_HOSTS) gets every archived report, signed, under one event
// id per report, through failures, a worker restart mid-backoff, and workers racing or killed.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { addSubscription, rotateSecret } from '../../src/events/manage.js';
import { featureOf } from '../../src/events/feature.js';
import { RETRACTED_PREFIX } from '../../src/events/objectEventLog.js';
import { ObjectSequence } from '../../src/events/sequence.js';
import type { ArchiveRow } from '../../src/archive/partColumns.js';
import { UnavailableError } from '../../src/shared/errors.js';
import { S3ObjectStore } from '../../src/store/s3Store.js';
import { FileObjectStore } from '../../src/store/fileStore.js';
import { CLI } from '../support/cli.js';
import { allArchived, eventually, postAll, postReport, report, startTestService, tempDir, testConfig, testRuntime, API_KEY, type TestService, pkeyOf } from '../support/env.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { HAS_MOTO, MOTO_MISSING, motoEnv, startMoto } from '../support/moto.js';
import { freePort } from '../support/net.js';
import { deliveredByPkey, pkeysOf, receiverClosedBy, sentBesideHanging, verifies } from '../support/webhookReceiver.js';
import type { Config } from '../../src/shared/config.js';

const SECRET = 'a-webhook-secret-of-thirty-two-chars';
const ENV = { WEBHOOK_ALLOW_HOSTS: '127.0.0.1', WEBHOOK_RETRY_BASE_SECONDS: '0.05' };

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function emulator(): Promise<Emulator> {
  const e = await startEmulator();
  cleanups.push(() => e.stop());
  return e;
}

async function service(config: Config, emu: Emulator, options: { worker?: boolean } = {}): Promise<TestService> {
  const svc = await startTestService(await testRuntime(config, emu), options);
  let stopped = false;
  const stop = svc.stop.bind(svc);
  svc.stop = async () => {
    if (stopped) return;
    stopped = true;
    await stop();
  };
  cleanups.push(() => svc.stop());
  return svc;
}

const receiver = () => receiverClosedBy(cleanups);

describe('webhooks on AWS (fauxqs)', () => {
  it('twenty endpoints that never answer hold twenty sends: another subscription is sent its report while they hang', async () => {
    const emu = await emulator();
    const svc = await service(await testConfig('aws', emu, { ...ENV, WEBHOOK_TIMEOUT_SECONDS: '30' }), emu);
    const dead = await receiver();
    const live = await receiver();
    await sentBesideHanging(svc, dead, live, SECRET, 25_000);
    expect(dead.received).toHaveLength(20);
  }, 90_000);

  it('signs what waits with a rotated secret, keeping its event ids', async () => {
    const emu = await emulator();
    const svc = await service(await testConfig('aws', emu, ENV), emu);
    const hook = await receiver();
    const rotated = 'a-rotated-secret-of-thirty-two-chars';
    // The receiver already holds the new secret: it refuses anything signed otherwise.
    hook.answer = (req, _n, body) => ({ status: verifies({ headers: req.headers, body }, rotated) ? 204 : 503 });
    const sub = await addSubscription(svc.rt, { url: hook.url, secret: SECRET, admins: [], localAreas: [], events: [] });
    await postAll(svc.url, [61, 62]);
    await allArchived(svc.rt);
    await eventually(async () => (hook.received.length >= 2 ? true : undefined), 15_000, 'attempts signed with the first secret');
    const first = hook.received[0]!;
    expect(verifies(first, SECRET)).toBe(true);

    await rotateSecret(svc.rt, sub.id, rotated);
    expect((await svc.rt.webhookAdmin.get(sub.id))?.secret).toBe(rotated);
    const delivered = await eventually(async () => {
      const ok = hook.received.filter((g) => verifies(g, rotated));
      return ok.flatMap((g) => pkeysOf(g.body)).length >= 2 ? ok : undefined;
    }, 30_000, 'delivered with the new secret');
    expect(delivered.flatMap((g) => pkeysOf(g.body)).sort()).toEqual([pkeyOf(61), pkeyOf(62)]);
    expect(delivered.map((g) => g.headers['webhook-id'])).toContain(first.headers['webhook-id']);
  }, 60_000);

  it('POSTs each archived report once, signed, to the subscriptions that filter for it; subscriptions are kept in the bucket', async () => {
    const emu = await emulator();
    const svc = await service(await testConfig('aws', emu, ENV), emu);
    const all = await receiver();
    const pg = await receiver();
    const gone = await receiver();
    const sub = await addSubscription(svc.rt, { url: all.url, secret: SECRET, admins: [], localAreas: [], events: ['archived'] });
    await addSubscription(svc.rt, { url: pg.url, secret: SECRET, admins: ['PH-PG'], localAreas: [], events: [] });
    const removed = await addSubscription(svc.rt, { url: gone.url, secret: SECRET, admins: [], localAreas: [], events: [] });
    expect(await svc.rt.webhookAdmin.remove(removed.id)).toBe(true);
    expect(await svc.rt.webhookAdmin.remove(removed.id)).toBe(false);
    // Another process on the same bucket sees them: nothing is kept in one process's memory.
    const other = await testRuntime(svc.rt.config, emu);
    expect((await other.webhookAdmin.list()).map((s) => s.id).sort()).toEqual((await svc.rt.webhookAdmin.list()).map((s) => s.id).sort());
    expect((await other.webhookAdmin.list())).toHaveLength(2);
    await other.close();

    await postAll(svc.url, [1, 2, 3]);
    await postReport(svc.url, report(4, { partner_city: 'Pampanga', location: { lat: 15.0286, lng: 120.6898 } }));
    await allArchived(svc.rt);
    await eventually(async () => (deliveredByPkey(all).size === 4 && deliveredByPkey(pg).size === 1 ? true : undefined), 15_000, 'the deliveries');
    expect([...deliveredByPkey(pg).keys()]).toEqual([pkeyOf(4)]);
    expect(gone.received).toHaveLength(0);
    const event = JSON.parse(all.received[0]!.body);
    expect(event).toMatchObject({ specversion: '1.0', source: '/reports', type: 'ph.floodarchive.report.archived.v1', datacontenttype: 'application/geo+json' });
    expect(event.id).toBe(all.received[0]!.headers['webhook-id']);
    for (const g of all.received) {
      expect(verifies(g, sub.secret)).toBe(true);
      expect(verifies({ ...g, body: g.body.replace('partner-', 'partner-9') }, sub.secret)).toBe(false);
    }
    for (const ids of deliveredByPkey(all).values()) expect(ids.size).toBe(1);
  });

  it('a subscription removed while its worker delivers to it: the worker lets it go, and stops when asked', async () => {
    const emu = await emulator();
    const svc = await service(await testConfig('aws', emu, ENV), emu);
    const hook = await receiver();
    const sub = await addSubscription(svc.rt, { url: hook.url, secret: SECRET, admins: [], localAreas: [], events: [] });
    await postAll(svc.url, [81]);
    await allArchived(svc.rt);
    // Its cursor has states: the worker's consumer remembers the newest.
    await eventually(async () => (deliveredByPkey(hook).size === 1 ? true : undefined), 15_000, 'the first delivery');
    expect(await svc.rt.webhookAdmin.remove(sub.id)).toBe(true);
    // A report archived before the worker's list of subscriptions is read again (every 5 s): the
    // consumer of the removed subscription steps, and finds its states gone.
    await postAll(svc.url, [82]);
    await allArchived(svc.rt);
    await new Promise((r) => setTimeout(r, 1_000));
    const stopped = await Promise.race([svc.stop().then(() => true), new Promise<false>((r) => setTimeout(() => r(false), 20_000))]);
    expect(stopped).toBe(true);
    expect([...deliveredByPkey(hook).keys()]).toEqual([pkeyOf(81)]);
  }, 60_000);

  it('retries a failing receiver with backoff across a worker restart, under the same event id, until it recovers', async () => {
    const emu = await emulator();
    const config = await testConfig('aws', emu, { ...ENV, WEBHOOK_RETRY_BASE_SECONDS: '0.3' });
    const first = await service(config, emu);
    const hook = await receiver();
    hook.answer = () => ({ status: 500 });
    await addSubscription(first.rt, { url: hook.url, secret: SECRET, admins: [], localAreas: [], events: [] });
    await postAll(first.url, [21, 22, 23]);
    await allArchived(first.rt);
    await eventually(async () => (hook.received.length >= 2 ? true : undefined), 15_000, 'failed attempts');
    const failedId = hook.received[0]!.headers['webhook-id'];
    const backlog = await first.rt.webhookAdmin.backlog(await first.rt.webhookAdmin.list());
    expect([...backlog.values()][0]!.pending).toBe(3);
    // The worker goes away mid-backoff; another one on the same bucket carries on.
    await first.stop();
    hook.answer = () => ({ status: 204 });
    const before = hook.received.length;
    await service(config, emu);
    await eventually(async () => (hook.received.length > before && deliveredByPkey(hook).size === 3 ? true : undefined), 20_000, 'recovery');
    // Every attempt carried the same batch under the same id: the receiver keeps it once.
    expect(new Set(hook.received.map((g) => g.headers['webhook-id']))).toEqual(new Set([failedId]));
    expect([...deliveredByPkey(hook).keys()].sort()).toEqual([pkeyOf(21), pkeyOf(22), pkeyOf(23)]);
  });

  it('sets a batch aside after its retry period, lists it, and redrives it from the CLI', async () => {
    const emu = await emulator();
    // 5.4 s from the events' recording: time for retries however long the first attempt takes to come.
    const config = await testConfig('aws', emu, { ...ENV, WEBHOOK_RETRY_HOURS: '0.0015' });
    const svc = await service(config, emu);
    const hook = await receiver();
    hook.answer = () => ({ status: 503 });
    const sub = await addSubscription(svc.rt, { url: hook.url, secret: SECRET, admins: [], localAreas: [], events: [] });
    await postAll(svc.url, [31, 32]);
    await allArchived(svc.rt);
    const aside = await eventually(async () => {
      const d = await svc.rt.webhookAdmin.failed();
      return d.length > 0 ? d : undefined;
    }, 15_000, 'set aside');
    expect(aside[0]).toMatchObject({ subscriptionId: sub.id, state: 'set_aside', lastError: 'answered 503', count: 2 });
    expect(aside[0]!.attempts).toBeGreaterThan(1);
    await new Promise((r) => setTimeout(r, 700));
    const before = hook.received.length;
    await new Promise((r) => setTimeout(r, 700));
    expect(hook.received.length).toBe(before); // set aside: no more attempts

    expect([...deliveredByPkey(hook).keys()].sort()).toEqual([pkeyOf(31), pkeyOf(32)]);
    // One of them is retracted, and a week on, its mark in the log pruned, the batch is redriven
    // (from the command line: a process of its own): the ledger's word keeps it out.
    expect((await fetch(`${svc.url}/feeds/partner/31`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } })).status).toBe(200);
    await svc.rt.store.delete([`${RETRACTED_PREFIX}${pkeyOf(31)}`]);
    const ops = await testRuntime(config, emu);
    try {
      const policy = new (await import('../../src/events/hostPolicy.js')).HostPolicy(['127.0.0.1']);
      // Redriven while the endpoint still fails: kept aside, the attempt and its error counted.
      hook.answer = () => ({ status: 500 });
      expect(await ops.webhookAdmin.redrive(sub.id, policy, 5_000)).toEqual({ redriven: 0, stillFailing: 1 });
      expect(await ops.webhookAdmin.failed()).toEqual([{ ...aside[0]!, attempts: aside[0]!.attempts + 1, lastError: 'answered 500' }]);
      hook.answer = () => ({ status: 200 });
      const before = hook.received.length;
      const r = await ops.webhookAdmin.redrive(sub.id, policy, 5_000);
      expect(r).toEqual({ redriven: 1, stillFailing: 0 });
      expect(await ops.webhookAdmin.failed()).toEqual([]);
      const redriven = hook.received.slice(before).filter((g) => g.headers['webhook-id'] === aside[0]!.id);
      expect(redriven.map((g) => pkeysOf(g.body))).toEqual([[pkeyOf(32)]]);
    } finally {
      await ops.close();
    }
  });

  it('appends from racing writers on an atomic create-if-absent: each number given once, none missing', async () => {
    const dir = await tempDir();
    const writers = Array.from({ length: 4 }, () => new ObjectSequence<{ w: number; i: number }>(new FileObjectStore(dir), 'events/v1/log/'));
    const numbers = await racingAppends(writers, 15, false);
    expect(numbers.flat().sort((a, b) => a - b)).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
    for (const [w, got] of numbers.entries()) {
      for (const [i, n] of got.entries()) expect(await writers[0]!.get(n)).toEqual({ w, i });
    }
  });

  it('records a repeated flush once, also from a fresh worker process after a crash', async () => {
    const emu = await emulator();
    const svc = await service(await testConfig('aws', emu, ENV), emu, { worker: false });
    const row = {
      pkey: 'partner-70', created_at_ms: Date.parse('2026-11-21T05:00:00Z'), source: 'partner', status: 'confirmed', url: null, image_url: null,
      disaster_type: 'flood', report_data: null, instance_region_code: 'PH-QC', local_area_id: null, title: '', text: '', lng: 121.05, lat: 14.65,
      post_id: 70, partner_city: 'Quezon City', received_at_ms: Date.now(), boundary_version: 'v',
    };
    await svc.rt.feed.archived([row]);
    await svc.rt.feed.archived([row, { ...row, pkey: 'partner-71', post_id: 71 }]);
    // Then more batches than a count of batches back would read (retractions, a batch each), as
    // busy workers write within the hour a repeat is recognised.
    const other = featureOf({ ...row, pkey: 'partner-69', post_id: 69 } as ArchiveRow);
    for (let i = 0; i < 520; i++) await svc.rt.feed.retracted(other);
    // A process that never saw the first recording (the worker restarted after a crash).
    const fresh = await testRuntime(svc.rt.config, emu);
    cleanups.push(() => fresh.close());
    await fresh.feed.archived([row, { ...row, pkey: 'partner-71', post_id: 71 }, { ...row, pkey: 'partner-72', post_id: 72 }]);
    // Another process's append shows within a listing interval (a quarter second).
    const archived = async () => (await svc.rt.feed.since(0, 10_000)).filter((e) => e.kind === 'archived').map((e) => e.pkey);
    const pkeys = await eventually(async () => {
      const got = await archived();
      return got.length >= 3 ? got : undefined;
    }, 5_000, 'the fresh process\'s batch');
    await new Promise((r) => setTimeout(r, 500));
    expect(await archived()).toEqual(pkeys);
    expect(pkeys).toEqual(['partner-70', 'partner-71', 'partner-72']);
  });
});

/** Each writer appends `count` entries at once with the others; the numbers each was given. */
async function racingAppends(writers: ObjectSequence<{ w: number; i: number }>[], count: number, retryUnavailable: boolean): Promise<number[][]> {
  return Promise.all(writers.map(async (seq, w) => {
    const got: number[] = [];
    for (let i = 0; i < count; i++) {
      // moto sometimes answers a conditional PUT racing another with a 500 page: a failed
      // append is retried, as the worker retries a failed flush.
      for (let attempt = 0; ; attempt++) {
        try {
          got.push(await seq.append({ w, i }));
          break;
        } catch (err) {
          if (!retryUnavailable || !(err instanceof UnavailableError) || attempt >= 5) throw err;
        }
      }
    }
    return got;
  }));
}

/** Posts as a partner does: a 503 (busy, nothing accepted) is retried. */
async function postPatiently(url: string, ids: number[]): Promise<void> {
  for (let i = 0; i < ids.length; i += 5) {
    await Promise.all(ids.slice(i, i + 5).map(async (id) => {
      for (let attempt = 0; ; attempt++) {
        const r = await postReport(url, report(id));
        if (r.status === 201 || r.status === 200) return;
        if (r.status !== 503 || attempt >= 20) throw new Error(`post ${id}: ${r.status}`);
        await new Promise((res) => setTimeout(res, 200));
      }
    }));
  }
}

describe.skipIf(!HAS_MOTO)('several workers on S3 with conditional writes (moto)', () => {
  it(`appends from racing writers make one gap-free sequence ${HAS_MOTO ? '' : MOTO_MISSING}`, { timeout: 90_000 }, async () => {
    const moto = await startMoto();
    cleanups.push(() => moto.stop());
    const bucket = `events-${randomBytes(4).toString('hex')}`;
    const { CreateBucketCommand } = await import('@aws-sdk/client-s3');
    await moto.s3.send(new CreateBucketCommand({ Bucket: bucket }));
    const writers = Array.from({ length: 4 }, () => new ObjectSequence<{ w: number; i: number }>(new S3ObjectStore(moto.s3, { bucket, prefix: 'p/' }), 'log/'));
    const numbers = await racingAppends(writers, 15, true);
    // No number is missing, whatever raced: a reader following the sequence passes nothing.
    const head = await writers[0]!.head();
    expect((await writers[0]!.numbersAfter(0)).map((e) => e.n)).toEqual(Array.from({ length: head }, (_, i) => i + 1));
    for (const n of numbers.flat()) expect(n).toBeLessThanOrEqual(head);
    // moto checks If-None-Match and writes apart, so two PUTs arriving together can both succeed
    // there (one entry then overwrites another); S3 makes the check and the write one step.
    // Exclusivity is checked on a store whose create-if-absent is atomic (the test above).
  });

  it('two worker processes, one killed mid-stream: every report delivered, each under exactly one event id', { timeout: 180_000 }, async () => {
    const moto = await startMoto();
    cleanups.push(() => moto.stop());
    const id = randomBytes(4).toString('hex');
    const shared = {
      ...motoEnv(moto, id),
      API_KEYS: API_KEY,
      FLUSH_INTERVAL_SECONDS: '0.3',
      // The killed worker's messages come back to the other one 3 s on, not after the default 31.
      QUEUE_VISIBILITY_SECONDS: '3',
      LOG_LEVEL: 'silent',
      WEBHOOK_TIMEOUT_SECONDS: '2',
      ...ENV,
    };
    const children: ChildProcess[] = [];
    cleanups.push(async () => {
      for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    });
    const start = async (command: string, env: Record<string, string> = {}) => {
      const child = spawn(process.execPath, [CLI, command], { env: { ...shared, DATA_DIR: await tempDir(), ...env }, stdio: 'ignore' });
      children.push(child);
      return child;
    };
    const boot = await start('bootstrap');
    await new Promise((r) => boot.once('exit', r));
    expect(boot.exitCode).toBe(0);

    const hook = await receiver();
    // Slow answers keep batches in flight, so the kill lands mid-delivery too.
    hook.answer = () => ({ status: 204, delayMs: 50 });
    const port = await freePort();
    await start('serve', { PORT: String(port) });
    const url = `http://127.0.0.1:${port}`;
    await eventually(() => fetch(`${url}/health`).then((r) => (r.ok ? true : undefined)), 30_000, 'the API');
    const add = spawn(process.execPath, [CLI, 'subscriptions', 'add', '--url', hook.url, '--secret', SECRET], { env: { ...shared, DATA_DIR: await tempDir() }, stdio: 'ignore' });
    await new Promise((r) => add.once('exit', r));
    expect(add.exitCode).toBe(0);

    const victim = await start('worker');
    await start('worker');
    const ids = Array.from({ length: 200 }, (_, i) => 3000 + i);
    await postPatiently(url, ids.slice(0, 100));
    await eventually(async () => (hook.received.length > 0 ? true : undefined), 30_000, 'a first delivery');
    victim.kill('SIGKILL');
    await postPatiently(url, ids.slice(100));
    await eventually(async () => (deliveredByPkey(hook).size === ids.length ? true : undefined), 150_000, 'all 200 reports delivered');
    for (const [pkey, eventIds] of deliveredByPkey(hook)) expect(eventIds.size, pkey).toBe(1);
    for (const g of hook.received) expect(verifies(g, SECRET)).toBe(true);
  });
});
