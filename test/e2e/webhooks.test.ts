// Webhooks end to end on the embedded backend: a loopback receiver (admitted by
// WEBHOOK_ALLOW_HOSTS) gets every archived report, signed, exactly once by event id, through
// failures, a slow neighbour and a worker killed mid-stream; bad subscriptions store nothing.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { addSubscription } from '../../src/events/manage.js';
import { SubscriptionError } from '../../src/events/subscriptions.js';
import { runCli } from '../support/cli.js';
import { allArchived, eventually, postAll, postReport, report, startTestService, testConfig, testRuntime, type TestService, pkeyOf } from '../support/env.js';
import { deliveredByPkey, pkeysOf, receiverClosedBy, sentBesideHanging, verifies } from '../support/webhookReceiver.js';

const CLI = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../dist/src/main/flood-archive.cjs');
const SECRET = 'a-webhook-secret-of-thirty-two-chars';
const ENV = { WEBHOOK_ALLOW_HOSTS: '127.0.0.1', WEBHOOK_RETRY_BASE_SECONDS: '0.05' };

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function service(env: Record<string, string> = {}, options: { worker?: boolean } = {}): Promise<TestService> {
  const svc = await startTestService(await testRuntime(await testConfig('embedded', undefined, { ...ENV, ...env })), options);
  cleanups.push(() => svc.stop());
  return svc;
}

const receiver = () => receiverClosedBy(cleanups);

describe('webhooks', () => {
  it('POSTs each archived report once, as a signed CloudEvents 1.0 batch of GeoJSON Features', async () => {
    const svc = await service();
    const hook = await receiver();
    const sub = await addSubscription(svc.rt, { url: hook.url, secret: SECRET, admins: [], localAreas: [], events: ['archived'] });
    await postAll(svc.url, [1, 2, 3]);
    await postReport(svc.url, report(4, { partner_city: 'Pampanga', location: { lat: 15.0286, lng: 120.6898 } }));
    await allArchived(svc.rt);
    const got = await eventually(async () => (deliveredByPkey(hook).size === 4 ? hook.received : undefined), 15_000, 'four reports delivered');

    const first = got[0]!;
    expect(first.headers['content-type']).toBe('application/cloudevents+json; charset=utf-8');
    const event = JSON.parse(first.body);
    expect(event).toMatchObject({ specversion: '1.0', source: '/reports', type: 'ph.floodarchive.report.archived.v1', datacontenttype: 'application/geo+json' });
    expect(event.id).toBe(first.headers['webhook-id']);
    expect(Number.isNaN(Date.parse(event.time))).toBe(false);
    expect(event.data.type).toBe('FeatureCollection');
    const qmc = got.flatMap((g) => JSON.parse(g.body).data.features).find((f: any) => f.properties.pkey === pkeyOf(1));
    expect(qmc).toMatchObject({
      type: 'Feature',
      geometry: { type: 'Point', coordinates: [121.0497, 14.6516] },
      properties: { pkey: pkeyOf(1), created_at: '2026-11-21T05:05:00.000Z', disaster_type: 'flood', tags: { instance_region_code: 'PH-QC' } },
    });

    for (const g of got) {
      expect(verifies(g, sub.secret)).toBe(true);
      expect(verifies(g, 'another-secret-of-thirty-two-chars!')).toBe(false);
      // A body changed on the way no longer matches its signature.
      expect(verifies({ ...g, body: g.body.replace('partner-', 'partner-9') }, sub.secret)).toBe(false);
      // Nor does an old signature with a new timestamp.
      expect(verifies({ ...g, headers: { ...g.headers, 'webhook-timestamp': String(Number(g.headers['webhook-timestamp']) + 1) } }, sub.secret)).toBe(false);
    }
    for (const ids of deliveredByPkey(hook).values()) expect(ids.size).toBe(1);
  });

  it('twenty endpoints that never answer hold twenty sends: another subscription is sent its report while they hang', async () => {
    const svc = await service({ WEBHOOK_TIMEOUT_SECONDS: '30' });
    const dead = await receiver();
    const live = await receiver();
    await sentBesideHanging(svc, dead, live, SECRET, 15_000);
    expect(dead.received).toHaveLength(20);
  });

  it('sends only what a subscription filters for, and nothing to a removed one', async () => {
    const svc = await service();
    const pg = await receiver();
    const gone = await receiver();
    await addSubscription(svc.rt, { url: pg.url, secret: SECRET, admins: ['PH-PG'], localAreas: [], events: ['archived'] });
    const removed = await addSubscription(svc.rt, { url: gone.url, secret: SECRET, admins: [], localAreas: [], events: [] });
    expect(svc.rt.events!.removeSubscription(removed.id)).toBe(true);
    await postAll(svc.url, [10, 11]);
    await postReport(svc.url, report(12, { partner_city: 'Pampanga', location: { lat: 15.0286, lng: 120.6898 } }));
    await allArchived(svc.rt);
    await eventually(async () => (deliveredByPkey(pg).size === 1 ? true : undefined), 10_000, 'the Pampanga report');
    expect([...deliveredByPkey(pg).keys()]).toEqual([pkeyOf(12)]);
    expect(gone.received).toHaveLength(0);
  });

  it('retries a receiver that answers 500 until it recovers, with the same event id', async () => {
    const svc = await service();
    const hook = await receiver();
    hook.answer = (_req, n) => ({ status: n < 4 ? 500 : 200 });
    await addSubscription(svc.rt, { url: hook.url, secret: SECRET, admins: [], localAreas: [], events: [] });
    await postAll(svc.url, [21, 22, 23]);
    await allArchived(svc.rt);
    await eventually(async () => (hook.received.length >= 5 && svc.rt.events!.deliveries('pending').length === 0 ? true : undefined), 20_000, 'recovery');
    expect([...deliveredByPkey(hook).keys()].sort()).toEqual([pkeyOf(21), pkeyOf(22), pkeyOf(23)]);
    // The retries of one batch repeat its id: the receiver de-duplicates by it.
    const ids = hook.received.map((g) => g.headers['webhook-id']);
    expect(new Set(ids).size).toBeLessThan(ids.length);
    for (const g of hook.received) expect(verifies(g, SECRET)).toBe(true);
  });

  it('keeps a subscription in order: a later event waits while an earlier one is retried', async () => {
    const svc = await service();
    const hook = await receiver();
    const [first, second] = [pkeyOf(31), pkeyOf(32)];
    let holding = true;
    // The first report's event fails until it is let through; the second's must not overtake it.
    hook.answer = (_req, _n, body) => ({ status: holding && pkeysOf(body).includes(first) ? 503 : 200 });
    await addSubscription(svc.rt, { url: hook.url, secret: SECRET, admins: [], localAreas: [], events: ['archived'] });
    await postAll(svc.url, [31]);
    await eventually(async () => (hook.received.length >= 1 ? true : undefined), 10_000, 'the first attempt');
    await postAll(svc.url, [32]);
    // Archived: its event and its delivery are recorded together.
    await allArchived(svc.rt);
    // Three more failed attempts of the first (50 ms backoff and up) while the second is due.
    await eventually(async () => (hook.received.length >= 4 ? true : undefined), 10_000, 'retries of the first');
    holding = false;
    await eventually(async () => (svc.rt.events!.deliveries('pending').length === 0 ? true : undefined), 10_000, 'both delivered');
    const sent = hook.received.map((g) => pkeysOf(g.body));
    expect(sent.filter((pkeys) => pkeys.includes(second))).toHaveLength(1);
    expect(sent.findIndex((pkeys) => pkeys.includes(second))).toBe(sent.length - 1);
    expect(sent.slice(0, -1).every((pkeys) => pkeys.includes(first))).toBe(true);
  });

  it('rotates a secret read from a file or standard input: undelivered events are kept and signed with the new one', async () => {
    const svc = await service();
    const hook = await receiver();
    const rotatedSecret = 'a-rotated-secret-of-thirty-two-chars';
    // The receiver already holds the new secret: it refuses anything signed otherwise.
    hook.answer = (req, _n, body) => ({ status: verifies({ headers: req.headers, body }, rotatedSecret) ? 204 : 503 });
    const env = { ...ENV, DATA_DIR: svc.rt.config.dataDir };
    const file = path.join(svc.rt.config.dataDir, 'webhook-secret');
    await fs.writeFile(file, `${SECRET}\n`, { mode: 0o600 });
    const added = await runCli(['subscriptions', 'add', '--url', hook.url, '--secret-file', file, '--json'], env);
    expect(added.code, added.stderr).toBe(0);
    expect(added.stderr).toBe('');
    const id = JSON.parse(added.stdout).id as string;

    await postAll(svc.url, [41, 42]);
    await allArchived(svc.rt);
    await eventually(async () => (hook.received.length >= 2 ? true : undefined), 10_000, 'attempts signed with the first secret');
    const first = hook.received[0]!;
    expect(verifies(first, SECRET)).toBe(true);

    const rotated = await runCli(['subscriptions', 'rotate-secret', '--id', id, '--secret-file', '-'], env, `${rotatedSecret}\n`);
    expect(rotated.code, rotated.stderr).toBe(0);
    expect(rotated.stdout).toContain(id);
    await eventually(async () => (svc.rt.events!.deliveries('pending').length === 0 ? true : undefined), 15_000, 'delivered after the rotation');
    const delivered = hook.received.filter((g) => verifies(g, rotatedSecret));
    expect(delivered.map((g) => pkeysOf(g.body)).flat().sort()).toEqual([pkeyOf(41), pkeyOf(42)]);
    // The same events as those refused before: kept, not dropped or re-minted.
    expect(delivered.map((g) => g.headers['webhook-id'])).toContain(first.headers['webhook-id']);
    expect(delivered.every((g) => !verifies(g, SECRET))).toBe(true);
    expect(svc.rt.events!.deliveries('set_aside')).toEqual([]);

    const unknown = await runCli(['subscriptions', 'rotate-secret', '--id', 'sub_nope', '--secret-file', '-'], env, rotatedSecret);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/no subscription "sub_nope"/);
    const short = await runCli(['subscriptions', 'rotate-secret', '--id', id, '--secret-file', '-'], env, 'short\n');
    expect(short.code).toBe(2);
    expect(short.stderr).toMatch(/at least 24 characters/);
  }, 60_000);

  it('sets a delivery aside after its retry period, lists it, and redrives it', async () => {
    const svc = await service({ WEBHOOK_RETRY_HOURS: '0.0005' }); // 1.8 s
    const hook = await receiver();
    hook.answer = () => ({ status: 503 });
    const sub = await addSubscription(svc.rt, { url: hook.url, secret: SECRET, admins: [], localAreas: [], events: [] });
    await postAll(svc.url, [31, 32]);
    await allArchived(svc.rt);
    const aside = await eventually(async () => {
      const d = svc.rt.events!.deliveries('set_aside');
      return d.length > 0 && svc.rt.events!.deliveries('pending').length === 0 ? d : undefined;
    }, 15_000, 'set aside');
    expect(aside[0]).toMatchObject({ subscriptionId: sub.id, state: 'set_aside', lastError: 'answered 503' });
    expect(aside[0]!.attempts).toBeGreaterThan(1);
    const before = hook.received.length;
    await new Promise((r) => setTimeout(r, 500));
    expect(hook.received.length).toBe(before); // set aside: no more attempts

    hook.answer = () => ({ status: 200 });
    // Each event's time as first sent: when it happened, not when it was redriven.
    const timeOf = (body: string) => (JSON.parse(body) as { id: string; time: string });
    const firstTimes = new Map(hook.received.map((r) => [timeOf(r.body).id, timeOf(r.body).time]));
    expect(svc.rt.events!.redrive(sub.id)).toBe(aside.length);
    await eventually(async () => (svc.rt.events!.deliveries('set_aside').length === 0 && svc.rt.events!.deliveries('pending').length === 0 ? true : undefined), 10_000, 'redriven');
    expect([...deliveredByPkey(hook).keys()].sort()).toEqual([pkeyOf(31), pkeyOf(32)]);
    const redriven = hook.received.slice(before).map((r) => timeOf(r.body));
    expect(redriven.length).toBeGreaterThan(0);
    for (const e of redriven) expect(e.time).toBe(firstTimes.get(e.id));
  });

  it('a receiver that never answers delays neither the archive nor another subscriber', async () => {
    const svc = await service({ WEBHOOK_TIMEOUT_SECONDS: '20' });
    const stuck = await receiver();
    stuck.answer = () => ({ status: 200, delayMs: 60_000 });
    const fast = await receiver();
    await addSubscription(svc.rt, { url: stuck.url, secret: SECRET, admins: [], localAreas: [], events: [] });
    await addSubscription(svc.rt, { url: fast.url, secret: SECRET, admins: [], localAreas: [], events: [] });
    for (const batch of [[41, 42], [43, 44], [45, 46]]) {
      await postAll(svc.url, batch);
      await allArchived(svc.rt, 5_000);
      await eventually(async () => (batch.every((id) => deliveredByPkey(fast).has(pkeyOf(id))) ? true : undefined), 5_000, 'the fast receiver');
    }
    expect(stuck.received).toHaveLength(1); // its first batch, still unanswered
  });

  it('does not follow a redirect', async () => {
    const svc = await service();
    const target = await receiver();
    const hook = await receiver();
    hook.answer = () => ({ status: 307, headers: { Location: target.url } });
    await addSubscription(svc.rt, { url: hook.url, secret: SECRET, admins: [], localAreas: [], events: [] });
    await postAll(svc.url, [51]);
    await allArchived(svc.rt);
    await eventually(async () => (hook.received.length >= 2 ? true : undefined), 10_000, 'retries');
    expect(target.received).toHaveLength(0);
    expect(svc.rt.events!.deliveries('pending')[0]?.lastError).toMatch(/307 \(redirects are not followed\)/);
  });

  it('refuses a private address at delivery time when the allow-list no longer admits it', async () => {
    const hook = await receiver();
    const open = await service();
    const sub = await addSubscription(open.rt, { url: hook.url, secret: SECRET, admins: [], localAreas: [], events: [] });
    await open.stop();
    cleanups.length = 0;
    // The same data directory, now without the allow-list: the stored loopback URL is not reached.
    const closed = await startTestService(await testRuntime({ ...open.rt.config, events: { ...open.rt.config.events, webhookAllowHosts: [] } }));
    cleanups.push(() => closed.stop());
    expect(closed.rt.events!.subscription(sub.id)).toBeDefined();
    await postAll(closed.url, [61]);
    await allArchived(closed.rt);
    await eventually(async () => (closed.rt.events!.deliveries('pending')[0]?.lastError ? true : undefined), 10_000, 'a refused attempt');
    expect(closed.rt.events!.deliveries('pending')[0]!.lastError).toMatch(/refused: the URL must be https/);
    expect(hook.received).toHaveLength(0);
  });

  it('refuses bad subscriptions with every reason, and stores nothing', async () => {
    const svc = await service({ WEBHOOK_ALLOW_HOSTS: '' }, { worker: false });
    const bad = async (input: Partial<Parameters<typeof addSubscription>[1]>, reason: RegExp) => {
      const err = await addSubscription(svc.rt, { url: 'https://hooks.example.org/flood', secret: SECRET, admins: [], localAreas: [], events: [], ...input }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SubscriptionError);
      expect((err as SubscriptionError).problems.join('\n')).toMatch(reason);
    };
    await bad({ url: 'not a url' }, /is not an absolute URL/);
    await bad({ url: 'ftp://hooks.example.org/x' }, /must be an https URL/);
    await bad({ url: 'http://hooks.example.org/x' }, /must be https/);
    await bad({ url: 'https://10.0.0.5/hook' }, /private, loopback, link-local or reserved/);
    await bad({ url: 'https://169.254.169.254/latest/meta-data' }, /private, loopback, link-local or reserved/);
    await bad({ url: 'https://[::1]/hook' }, /private, loopback, link-local or reserved/);
    await bad({ url: 'https://[::ffff:192.168.1.1]/hook' }, /private, loopback, link-local or reserved/);
    await bad({ url: 'https://localhost/hook' }, /local or cloud metadata host/);
    await bad({ url: 'https://user:pw@hooks.example.org/x' }, /credentials/);
    await bad({ secret: 'short' }, /at least 24 characters/);
    await bad({ admins: ['PH-XX'] }, /--admin "PH-XX" must be one of: PH-QC, PH-PG/);
    await bad({ localAreas: ['0000000000'] }, /not a barangay PSGC code/);
    await bad({ events: ['archived', 'deleted'] }, /"deleted" is not one of archived, retracted/);
    const all = await addSubscription(svc.rt, { url: 'http://10.0.0.5', secret: 'x', admins: ['X'], localAreas: [], events: ['nope'] }).catch((e: SubscriptionError) => e.problems);
    expect(all).toHaveLength(4);
    expect(svc.rt.events!.subscriptions()).toEqual([]);
    // A public https URL is accepted.
    await addSubscription(svc.rt, { url: 'https://hooks.example.org/flood', secret: SECRET, admins: ['PH-QC'], localAreas: [], events: ['archived', 'retracted'] });
    expect(svc.rt.events!.subscriptions()).toHaveLength(1);
  });

  it('records a repeated flush once: no second event for a report announced before', async () => {
    const svc = await service({}, { worker: false });
    const hook = await receiver();
    await addSubscription(svc.rt, { url: hook.url, secret: SECRET, admins: [], localAreas: [], events: [] });
    const row = {
      pkey: 'partner-70', created_at_ms: Date.parse('2026-11-21T05:00:00Z'), source: 'partner', status: 'confirmed', url: null, image_url: null,
      disaster_type: 'flood', report_data: null, instance_region_code: 'PH-QC', local_area_id: null, title: '', text: '', lng: 121.05, lat: 14.65,
      post_id: 70, partner_city: 'Quezon City', received_at_ms: Date.now(), boundary_version: 'v',
    };
    await svc.rt.events!.archived([row]);
    await svc.rt.events!.archived([row, { ...row, pkey: 'partner-71', post_id: 71 }]);
    const pending = svc.rt.events!.deliveries('pending');
    expect(pending.map((d) => d.count)).toEqual([1, 1]);
    expect(svc.rt.events!.since(0).map((e) => e.pkey)).toEqual(['partner-70', 'partner-71']);
  });
});

describe('webhooks across a worker kill', () => {
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
  });

  function startWorker(dataDir: string): ChildProcess {
    const child = spawn(process.execPath, [CLI, 'worker'], {
      env: { PATH: process.env.PATH ?? '', TZ: 'UTC', LOG_LEVEL: 'silent', DATA_DIR: dataDir, FLUSH_INTERVAL_SECONDS: '0.2', ...ENV },
      stdio: 'ignore',
    });
    children.push(child);
    return child;
  }

  it('delivers every archived report, each under exactly one event id', { timeout: 150_000 }, async () => {
    const svc = await service({}, { worker: false });
    const hook = await receiver();
    const sub = await addSubscription(svc.rt, { url: hook.url, secret: SECRET, admins: [], localAreas: [], events: [] });
    const ids = Array.from({ length: 300 }, (_, i) => 1000 + i);
    const first = startWorker(svc.rt.config.dataDir);
    await postAll(svc.url, ids.slice(0, 150));
    await eventually(async () => (hook.received.length > 0 ? true : undefined), 20_000, 'a first delivery');
    // Killed mid-stream: whatever it had received but not flushed comes back after its visibility timeout.
    first.kill('SIGKILL');
    await postAll(svc.url, ids.slice(150));
    startWorker(svc.rt.config.dataDir);
    await eventually(async () => (deliveredByPkey(hook).size === ids.length ? true : undefined), 120_000, 'all 300 reports delivered');
    for (const [pkey, eventIds] of deliveredByPkey(hook)) expect(eventIds.size, pkey).toBe(1);
    for (const g of hook.received) expect(verifies(g, sub.secret)).toBe(true);
  });
});
