// GET /reports/archive and GET /cities: every bad query gets a 400 naming each problem.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getJson, startTestService, testConfig, testRuntime, type TestService } from '../support/env.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService(await testRuntime(await testConfig('embedded', undefined, { ARCHIVE_MAX_WINDOW: '30d' })));
});
afterAll(async () => {
  await svc?.stop();
});

const ok = 'start=2026-11-21T00:00:00%2B0800&end=2026-11-21T23:59:59%2B0800';

async function fields(query: string, headers?: Record<string, string>): Promise<string[]> {
  const res = await getJson(`${svc.url}/reports/archive?${query}`, headers);
  expect(res.status, JSON.stringify(res.body)).toBe(400);
  expect(res.body).toMatchObject({ statusCode: 400, error: 'Bad Request', message: expect.any(String) });
  return res.body.details.map((d: { field: string }) => d.field);
}

describe('GET /reports/archive rejects', () => {
  it.each([
    ['no parameters', '', ['start', 'end']],
    ['start missing', 'end=2026-11-21T23:59:59%2B0800', ['start']],
    ['start without offset', 'start=2026-11-21T00:00:00&end=2026-11-21T23:59:59%2B0800', ['start']],
    ['start not a date', 'start=yesterday&end=2026-11-21T23:59:59%2B0800', ['start']],
    ['end impossible', 'start=2026-11-21T00:00:00%2B0800&end=2026-11-31T23:59:59%2B0800', ['end']],
    ['end before start', 'start=2026-11-21T00:00:00%2B0800&end=2026-11-20T23:59:59%2B0800', ['end']],
    ['window over ARCHIVE_MAX_WINDOW', 'start=2026-01-01T00:00:00%2B0800&end=2026-11-21T23:59:59%2B0800', ['end']],
    ['unknown admin', `${ok}&admin=PH-MNL`, ['admin']],
    ['lowercase admin', `${ok}&admin=ph-qc`, ['admin']],
    ['unknown geoformat', `${ok}&geoformat=kml`, ['geoformat']],
    ['a typo in a parameter name', `${ok}&admn=PH-QC`, ['admn']],
    ['a repeated parameter', `${ok}&admin=PH-QC&admin=PH-PG`, ['admin']],
    ['several problems at once', 'start=x&geoformat=svg&foo=1', ['foo', 'start', 'end', 'geoformat']],
  ])('%s', async (_name, query, expected) => {
    expect((await fields(query)).sort()).toEqual([...expected].sort());
  });

  it('a request without User-Agent', async () => {
    // fetch always sends one; a raw request can leave it out.
    const { request } = await import('node:http');
    const body = await new Promise<{ status: number; json: any }>((resolve, reject) => {
      const req = request(`${svc.url}/reports/archive?${ok}`, { headers: {} }, (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, json: JSON.parse(text) }));
      });
      req.removeHeader('user-agent');
      req.on('error', reject);
      req.end();
    });
    expect(body.status).toBe(400);
    expect(body.json.details).toEqual([{ in: 'header', field: 'User-Agent', message: expect.stringMatching(/required/) }]);
  });

  it('accepts the largest allowed window and the supported admin codes', async () => {
    const res = await getJson(`${svc.url}/reports/archive?start=2026-10-22T00:00:00%2B0000&end=2026-11-21T00:00:00%2B0000&admin=PH-PG`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ statusCode: 200, result: { type: 'Topology', objects: { output: { type: 'GeometryCollection', geometries: [] } }, arcs: [] } });
  });

  it('sends CORS on GET answers', async () => {
    const res = await getJson(`${svc.url}/reports/archive?${ok}`);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
  });
});

describe('GET /cities rejects', () => {
  it.each([
    ['format=csv', ['format']],
    ['geoformat=wkt', ['geoformat']],
    ['city=PH-QC', ['city']],
    ['format=xml&geoformat=svg', ['format', 'geoformat']],
  ])('%s', async (query, expected) => {
    const res = await getJson(`${svc.url}/cities?${query}`);
    expect(res.status).toBe(400);
    expect(res.body.details.map((d: { field: string }) => d.field).sort()).toEqual([...expected].sort());
  });

  it('accepts format=json', async () => {
    const res = await getJson(`${svc.url}/cities?format=json&geoformat=geojson`);
    expect(res.status).toBe(200);
    expect(res.body.result.type).toBe('FeatureCollection');
  });
});
