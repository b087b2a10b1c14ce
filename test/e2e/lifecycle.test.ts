// A report's lifecycle on both backends: named partner keys, retraction by the partner that
// posted it (durable, answered once and again), a repost that stays refused, one report by its
// key (gone with 410 once retracted), and kept keys rotated and revoked across two API processes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyDigest } from '../../src/partners/apiKeys.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import {
  allArchived,
  API_KEY,
  BACKENDS,
  getJson,
  OTHER_KEY,
  postReport,
  report,
  startTestService,
  testConfig,
  testRuntime,
  type TestService,
} from '../support/env.js';

let emulator: Emulator;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(async () => {
  await emulator.stop();
});

async function del(url: string, postId: string, key: string | null): Promise<{ status: number; body: any }> {
  const res = await fetch(`${url}/feeds/partner/${postId}`, { method: 'DELETE', headers: key === null ? {} : { 'X-Api-Key': key } });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

function expectError(res: { status: number; body: any }, status: number): void {
  expect(res.status).toBe(status);
  expect(Object.keys(res.body).sort()).toEqual(['details', 'error', 'message', 'statusCode']);
  expect(res.body.statusCode).toBe(status);
}

describe.each(BACKENDS)('report lifecycle (%s)', (kind) => {
  let svc: TestService;
  let second: TestService;
  beforeAll(async () => {
    const config = await testConfig(kind, kind === 'aws' ? emulator : undefined, { API_KEYS: `alpha:${API_KEY},beta:${OTHER_KEY}` });
    svc = await startTestService(await testRuntime(config, kind === 'aws' ? emulator : undefined));
    // A second API process on the same storage, as behind a load balancer.
    second = await startTestService(await testRuntime(config, kind === 'aws' ? emulator : undefined), { worker: false, reconcile: false });
  });
  afterAll(async () => {
    await second?.stop();
    await svc?.stop();
  });

  it('records the name of the key that posted a report, and lets only that partner retract it', async () => {
    expect((await postReport(svc.url, report(1, { title: 'Juan dela Cruz, 09171234567', text: 'his house' }))).status).toBe(201);
    expect((await postReport(svc.url, report(2, { title: 'Baha sa QMC' }), { key: OTHER_KEY })).status).toBe(201);
    await allArchived(svc.rt);
    expect((await svc.rt.ledger.lookup('partner-alpha-1'))!.partner).toBe('alpha');
    expect((await svc.rt.ledger.lookup('partner-beta-2'))!.partner).toBe('beta');

    // Bad requests change nothing.
    expectError(await del(svc.url, '1', null), 401);
    expectError(await del(svc.url, '1', 'not-a-real-key-000000'), 403);
    // Another partner's post_id 1 is its own (it has none): the report is not found for it.
    const other = await del(svc.url, '1', OTHER_KEY);
    expectError(other, 404);
    expect(other.body.message).toBe('This partner posted no report with post_id 1.');
    expectError(await del(svc.url, '999', API_KEY), 404);
    for (const bad of ['abc', '-1', '1.5', '12345678901234567890', '..%2F..%2Fetc']) expectError(await del(svc.url, bad, API_KEY), 400);
    expect((await svc.rt.ledger.lookup('partner-alpha-1'))!.state).toBe('confirmed');
    expect((await getJson(`${svc.url}/reports/partner-alpha-1`)).status).toBe(200);

    const retracted = await del(svc.url, '1', API_KEY);
    expect(retracted).toMatchObject({ status: 200, body: { post_id: 1, pkey: 'partner-alpha-1', retracted: true, retracted_at: expect.any(String) } });
    // Durable before the answer: the other process reads it from the ledger at once.
    expect((await second.rt.ledger.lookup('partner-alpha-1'))!.retraction).toMatchObject({ by: 'alpha' });
    const again = await del(second.url, '1', API_KEY);
    expect(again).toMatchObject({ status: 200, body: { post_id: 1, retracted: true, retracted_at: retracted.body.retracted_at } });
  });

  it('answers a repost of a retracted post_id "already exists", says it was retracted, and never takes it back', async () => {
    const repost = await postReport(svc.url, report(1, { title: 'again' }));
    expect(repost.status).toBe(200);
    expect(repost.body).toMatchObject({ post_id: 1, created: false, retracted: true, message: expect.stringMatching(/already exists.*retracted/) });
    const plain = await postReport(svc.url, report(2, { title: 'again' }), { key: OTHER_KEY });
    expect(plain.body).toEqual({ post_id: 2, created: false, pkey: 'partner-beta-2', message: 'post_id 2 already exists' });
    expect((await svc.rt.ledger.lookup('partner-alpha-1'))!.state).toBe('retracted');
  });

  it('GET /reports/{pkey}: the Feature from its hour, 410 once retracted, 404 unknown, 400 for a bad key', async () => {
    const one = await getJson(`${second.url}/reports/partner-beta-2`);
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({
      statusCode: 200,
      result: { type: 'Feature', geometry: { type: 'Point', coordinates: [121.0497, 14.6516] }, properties: { pkey: 'partner-beta-2', title: 'Baha sa QMC', created_at: '2026-11-21T05:05:00.000Z' } },
    });
    const topo = await getJson(`${second.url}/reports/partner-beta-2?geoformat=topojson`);
    expect(topo.body.result.type).toBe('Topology');
    expect(topo.body.result.objects.output.geometries.map((g: any) => g.properties.pkey)).toEqual(['partner-beta-2']);

    const gone = await getJson(`${second.url}/reports/partner-alpha-1`);
    expectError(gone, 410);
    expect(gone.body.message).toMatch(/retracted/);
    expect(JSON.stringify(gone.body)).not.toMatch(/Juan/);
    expectError(await getJson(`${second.url}/reports/partner-999`), 404);
    for (const bad of ['..%2F..%2Fetc%2Fpasswd', 'partner-01', 'partner-', 'partner-2%2F..', 'partner-1;drop', 'PARTNER-2', 'partner-Alpha-1', 'partner-alpha-', 'partner--1', 'partner-alpha-1-']) {
      const res = await getJson(`${second.url}/reports/${bad}`);
      expect([bad, res.status]).toEqual([bad, 400]);
      expectError(res, 400);
    }
    expectError(await getJson(`${second.url}/reports/partner-beta-2?geoformat=wkt`), 400);
  });

  it('kept keys: a new one works on every API process, and a revoked one gets 403 at once on all of them', async () => {
    const key = 'gamma-key-0123456789abcdef';
    expectError(await postReport(second.url, report(30), { key }), 403);
    await svc.rt.ledger.addKey('gamma', keyDigest(key));
    expect((await postReport(second.url, report(30), { key })).status).toBe(201);
    expect((await postReport(svc.url, report(31), { key })).status).toBe(201);
    expect((await second.rt.ledger.lookup('partner-gamma-30'))!.partner).toBe('gamma');

    // Rotation: the new key works, the old one is refused everywhere, with no restart.
    const rotated = 'gamma-key-rotated-0123456789';
    expect(await svc.rt.ledger.rotateKey('gamma', keyDigest(rotated))).toBe(1);
    for (const url of [svc.url, second.url]) {
      const refused = await postReport(url, report(32), { key });
      expectError(refused, 403);
      expect(refused.body.message).toMatch(/revoked/);
    }
    expect((await postReport(second.url, report(32), { key: rotated })).status).toBe(201);
    // The rotated key is still gamma's: gamma may retract what its earlier key posted.
    expect((await del(svc.url, '30', rotated)).status).toBe(200);
    await svc.rt.ledger.revokeKeys('gamma');
    for (const url of [svc.url, second.url]) expectError(await postReport(url, report(33), { key: rotated }), 403);
  });
});
