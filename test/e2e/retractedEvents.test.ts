// A retracted report's personal fields leave the event surfaces too, on both backends: a webhook
// delivery still waiting is sent without it, a flush that read the retractions before they were
// made announces nothing after them, and a report whose archived event the log no longer keeps is
// still announced as retracted, at its place.
import { afterAll, beforeAll, afterEach, describe, expect, it } from 'vitest';
import { addSubscription } from '../../src/events/manage.js';
import type { ArchiveRow } from '../../src/archive/partColumns.js';
import type { ReportFeature } from '../../src/events/feature.js';
import type { Config } from '../../src/shared/config.js';
import { allArchived, API_KEY, BACKENDS, eventually, postReport, report, startTestService, testConfig, testRuntime, type TestService, pkeyOf } from '../support/env.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { deliveredByPkey, receiverClosedBy } from '../support/webhookReceiver.js';

const SECRET = 'Maria Santos 0917-555-0101';
const ENV = { WEBHOOK_ALLOW_HOSTS: '127.0.0.1', WEBHOOK_RETRY_BASE_SECONDS: '0.05' };

let emulator: Emulator;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(async () => {
  await emulator.stop();
});

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const retract = (url: string, postId: number) => fetch(`${url}/feeds/partner/${postId}`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY, 'User-Agent': 'flood-tests/1.0' } });

describe.each(BACKENDS)('retracted reports on the event surfaces (%s)', (kind) => {
  const configOf = () => testConfig(kind, kind === 'aws' ? emulator : undefined, ENV);
  async function service(options: { worker?: boolean } = {}, config?: Config): Promise<TestService> {
    const svc = await startTestService(await testRuntime(config ?? (await configOf()), kind === 'aws' ? emulator : undefined), options);
    cleanups.push(() => svc.stop());
    return svc;
  }

  const receiver = () => receiverClosedBy(cleanups);

  it('a webhook delivery waiting for its receiver when a report is retracted is sent without the report', async () => {
    const svc = await service();
    const hook = await receiver();
    hook.answer = () => ({ status: 503 });
    await addSubscription(svc.rt, { url: hook.url, secret: 'a-webhook-secret-of-thirty-two-chars', admins: [], localAreas: [], events: ['archived'] });
    expect((await postReport(svc.url, report(41, { title: SECRET, text: `call ${SECRET}` }))).status).toBe(201);
    expect((await postReport(svc.url, report(42))).status).toBe(201);
    await allArchived(svc.rt);
    // The receiver has refused the batch holding both at least once: it waits for a retry.
    await eventually(async () => (hook.received.some((g) => g.body.includes(SECRET)) ? true : undefined), 15_000, 'a refused attempt');
    expect((await retract(svc.url, 41)).status).toBe(200);
    // An attempt already under way as the DELETE was answered may still carry it (refused too);
    // the one after that was built after the retraction. From there the receiver takes them.
    const atDelete = hook.received.length;
    await eventually(async () => (hook.received.length >= atDelete + 2 ? true : undefined), 15_000, 'an attempt made after the retraction');
    const answered = hook.received.length;
    hook.answer = () => ({ status: 204 });
    await eventually(async () => (deliveredByPkey({ ...hook, received: hook.received.slice(answered) }).has(pkeyOf(42)) ? true : undefined), 15_000, 'the retry delivered');
    // Every attempt since left it out.
    const since = hook.received.slice(answered);
    expect(since.length).toBeGreaterThan(0);
    for (const g of since) expect(g.body).not.toContain(SECRET);
    expect([...deliveredByPkey({ ...hook, received: since }).keys()]).toEqual([pkeyOf(42)]);
  });

  it('a flush that read the retractions before one was made records no archived event after it', async () => {
    // No worker: the report stays pending, retracted from the ledger's copy; then the flush that
    // read it before the retraction records it as archived.
    const svc = await service({ worker: false });
    expect((await postReport(svc.url, report(51, { title: SECRET }))).status).toBe(201);
    expect((await retract(svc.url, 51)).status).toBe(200);
    const late: ArchiveRow = {
      pkey: pkeyOf(51), created_at_ms: Date.parse('2026-11-21T05:05:00Z'), source: 'partner', status: 'confirmed', url: null, image_url: null,
      disaster_type: 'flood', report_data: null, instance_region_code: 'PH-QC', local_area_id: null, title: SECRET, text: '', lng: 121.0497, lat: 14.6516,
      post_id: 51, partner_city: 'Quezon City', received_at_ms: Date.now(), boundary_version: 'v',
    };
    await svc.rt.feed.archived([late]);
    const events = await svc.rt.feed.since(0, 100);
    expect(events.map((e) => [e.kind, e.pkey])).toEqual([['retracted', pkeyOf(51)]]);
    expect(JSON.stringify(events)).not.toContain(SECRET);
    expect(await svc.rt.feed.archivedReport(pkeyOf(51))).toBeUndefined();
    expect((await fetch(`${svc.url}/reports/${pkeyOf(51)}.cap`, { headers: { 'User-Agent': 'flood-tests/1.0' } })).status).toBe(410);
  });

  // Two API processes over HTTP on one data directory; on AWS the same race is the object log's
  // (test/unit/objectEventLog.test.ts: the emulator here does not refuse a second create of a key).
  if (kind === 'embedded') it('a DELETE sent to two API processes at once is announced once: one retracted event, whichever answers first', async () => {
    const config = await configOf();
    const first = await service({}, config);
    const second = await service({ worker: false }, config);
    const ids = [71, 72, 73, 74, 75, 76];
    for (const id of ids) expect((await postReport(first.url, report(id))).status).toBe(201);
    await allArchived(first.rt);
    // The second DELETE while the first is under way, a few milliseconds apart.
    const answers = await Promise.all(ids.map(async (id, i) => {
      const one = retract(first.url, id);
      await new Promise((r) => setTimeout(r, (i % 3) * 25));
      return [(await one).status, (await retract(second.url, id)).status];
    }));
    expect(answers).toEqual(ids.map(() => [200, 200]));
    for (const svc of [first, second]) {
      const retracted = async () => (await svc.rt.feed.since(0, 1000)).filter((e) => e.kind === 'retracted').map((e) => e.pkey).sort();
      await eventually(async () => ((await retracted()).length >= ids.length ? true : undefined), 15_000, 'every retraction announced');
      expect(await retracted()).toEqual(ids.map((id) => pkeyOf(id)));
    }
  });

  it('a report whose archived event is no longer kept is still announced as retracted, at its place and with its tags', async () => {
    const config = await configOf();
    const first = await service({}, config);
    expect((await postReport(first.url, report(61, { title: SECRET }))).status).toBe(201);
    await allArchived(first.rt);
    // Another flush after it: the log on the store keeps its newest batch, whatever its age.
    expect((await postReport(first.url, report(62))).status).toBe(201);
    await allArchived(first.rt);
    const archived = ((await (await fetch(`${first.url}/reports/${pkeyOf(61)}`, { headers: { 'User-Agent': 'flood-tests/1.0' } })).json()) as { result: ReportFeature }).result;
    // The log's retention passes (the store's times are whole seconds); an API process started
    // since has never seen the event.
    await new Promise((r) => setTimeout(r, 1_100));
    await first.rt.feed.prune(0);
    await first.stop();
    const svc = await service({ worker: false }, config);
    expect((await svc.rt.feed.since(0, 100)).filter((e) => e.pkey === pkeyOf(61))).toEqual([]);
    expect((await retract(svc.url, 61)).status).toBe(200);
    const events = (await svc.rt.feed.since(0, 100)).filter((e) => e.pkey === pkeyOf(61));
    expect(events.map((e) => [e.kind, e.pkey])).toEqual([['retracted', pkeyOf(61)]]);
    expect(events[0]!.feature).toMatchObject({ geometry: archived.geometry, properties: { status: 'retracted', title: '', tags: archived.properties.tags } });
    expect(archived.properties.tags.instance_region_code).toBe('PH-QC');
    expect(JSON.stringify(events)).not.toContain(SECRET);
  });
});
