// GET /reports/archive/stats and GET /cities/{code}/local-areas, over reports posted
// through the feed and tagged with the real PSA/NAMRIA barangays.
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { feature } from 'topojson-client';
import type { Topology } from 'topojson-specification';
import {
  HAS_SHARED_PH,
  SHARED_PH_MISSING,
  allArchived,
  getJson,
  postReport,
  report,
  startTestService,
  testConfig,
  testRuntime,
  type TestService,
} from '../support/env.js';
import { OpenApiChecker } from '../support/openapi.js';
import { loadPsaBoundaries } from '../support/sharedData.js';

if (!HAS_SHARED_PH) console.warn(SHARED_PH_MISSING);

// [lat, lng, city, barangay]: points from the data's PROVENANCE.md.
const PLACES: [number, number, string | null, string | null][] = [
  [14.6516, 121.0497, 'PH-QC', '1381300020'],
  [14.6203, 121.0537, 'PH-QC', '1381300115'],
  [15.0286, 120.6898, 'PH-PG', '0305416013'],
  [14.5896, 120.9812, null, null],
];
// Reports from 2025-06-01T10:00Z, one every 5 h 13 min, cycling through the places.
const N = 60;
const T0 = Date.UTC(2025, 5, 1, 10);
const STEP = (5 * 60 + 13) * 60_000;
const reports = Array.from({ length: N }, (_, i) => {
  const [lat, lng, city, barangay] = PLACES[i % PLACES.length]!;
  return { post_id: 9000 + i, ms: T0 + i * STEP, lat, lng, city, barangay };
});
const W = 'start=2025-06-01T00:00:00Z&end=2025-06-30T23:59:59Z';
const statsUrl = (svc: TestService, q: string) => `${svc.url}/reports/archive/stats?${W}&${q}`;

describe.skipIf(!HAS_SHARED_PH)('archive statistics and barangay boundaries', () => {
  let svc: TestService;
  beforeAll(async () => {
    const rt = await testRuntime(await testConfig('embedded'));
    await rt.boundaries.publish(await loadPsaBoundaries());
    svc = await startTestService(rt);
    for (const r of reports) {
      const res = await postReport(svc.url, report(r.post_id, { created_at: new Date(r.ms).toISOString(), location: { lat: r.lat, lng: r.lng } }));
      expect(res.status).toBe(201);
    }
    await allArchived(rt);
  });
  afterAll(async () => svc?.stop());

  /** What the stats must say, computed from the posted reports. */
  function expected(bucketOf: (ms: number) => string, keyOf: (r: (typeof reports)[number]) => string | null) {
    const m = new Map<string, { bucket: string; key: string | null; count: number }>();
    for (const r of reports) {
      const bucket = bucketOf(r.ms);
      const key = keyOf(r);
      const id = `${bucket}|${key}`;
      const hit = m.get(id);
      if (hit) hit.count += 1;
      else m.set(id, { bucket, key, count: 1 });
    }
    return [...m.values()];
  }
  const sortRows = (rows: { bucket: string; key: string | null; count: number }[]) =>
    [...rows].sort((a, b) => (a.bucket + (a.key ?? '~')).localeCompare(b.bucket + (b.key ?? '~')));

  it('counts by UTC day and barangay, oldest bucket first, total equal to /count', async () => {
    const res = await getJson(statsUrl(svc, 'interval=day&by=local_area'));
    expect(res.status).toBe(200);
    const { result } = res.body;
    expect(result).toMatchObject({ interval: 'day', by: 'local_area', tz: '+00:00', total: N });
    const count = await getJson(`${svc.url}/reports/archive/count?${W}`);
    expect(result.total).toBe(count.body.result.count);
    const want = expected((ms) => `${new Date(ms).toISOString().slice(0, 10)}T00:00:00.000Z`, (r) => r.barangay);
    expect(sortRows(result.rows)).toEqual(sortRows(want));
    const buckets = result.rows.map((r: { bucket: string }) => r.bucket);
    expect(buckets).toEqual([...buckets].sort());
  });

  it('buckets by a local offset (Manila) when tz is given, by city', async () => {
    const res = await getJson(statsUrl(svc, 'interval=day&by=city&tz=%2B0800'));
    expect(res.status).toBe(200);
    const manilaDay = (ms: number) => `${new Date(ms + 8 * 3_600_000).toISOString().slice(0, 10)}T00:00:00.000+08:00`;
    expect(sortRows(res.body.result.rows)).toEqual(sortRows(expected(manilaDay, (r) => r.city)));
    expect(res.body.result.rows.some((r: { key: string | null }) => r.key === null)).toBe(true);
  });

  it('by=none gives one row per bucket; admin and bbox filter as the archive does', async () => {
    const hours = await getJson(statsUrl(svc, 'interval=hour'));
    expect(hours.body.result.rows).toHaveLength(N);
    expect(hours.body.result.rows.every((r: { key: unknown; count: number }) => r.key === null && r.count === 1)).toBe(true);
    const qc = await getJson(statsUrl(svc, 'interval=month&admin=PH-QC'));
    expect(qc.body.result.rows).toEqual([{ bucket: '2025-06-01T00:00:00.000Z', key: null, count: reports.filter((r) => r.city === 'PH-QC').length }]);
    const box = await getJson(statsUrl(svc, 'interval=week&bbox=120.6,15.0,120.7,15.1'));
    expect(box.body.result.total).toBe(reports.filter((r) => r.city === 'PH-PG').length);
    // Weeks start on Monday: 2025-06-01 is a Sunday, so the first week starts on 2025-05-26.
    expect(box.body.result.rows[0].bucket).toBe('2025-05-26T00:00:00.000Z');
  });

  it('a closed window has a strong ETag and answers If-None-Match with 304', async () => {
    const first = await fetch(statsUrl(svc, 'interval=day&by=city'), { headers: { 'User-Agent': 't/1' } });
    const etag = first.headers.get('etag');
    // Strong: quoted, without the weak prefix W/.
    expect(etag).toMatch(/^"[^"]+"$/);
    const again = await fetch(statsUrl(svc, 'interval=day&by=city'), { headers: { 'User-Agent': 't/1', 'If-None-Match': etag! } });
    expect(again.status).toBe(304);
    const other = await fetch(statsUrl(svc, 'interval=day&by=local_area'), { headers: { 'User-Agent': 't/1' } });
    expect(other.headers.get('etag')).not.toBe(etag);
  });

  it('a closed window counted before counts a late report once it is archived (new parts, new answer)', async () => {
    const may = `${svc.url}/reports/archive/stats?start=2025-05-01T00:00:00Z&end=2025-05-31T23:59:59Z&interval=day&by=local_area`;
    const before = await fetch(may, { headers: { 'User-Agent': 't/1' } });
    const etag = before.headers.get('etag');
    expect(((await before.json()) as any).result.total).toBe(0);
    // Asked again: the same answer (kept by the window's tag).
    expect(((await (await fetch(may, { headers: { 'User-Agent': 't/1' } })).json()) as any).result.total).toBe(0);
    const [lat, lng, , barangay] = PLACES[0]!;
    expect((await postReport(svc.url, report(9999, { created_at: '2025-05-10T03:00:00Z', location: { lat, lng } }))).status).toBe(201);
    await allArchived(svc.rt);
    const after = await fetch(may, { headers: { 'User-Agent': 't/1' } });
    expect(after.headers.get('etag')).not.toBe(etag);
    expect(((await after.json()) as any).result).toMatchObject({ total: 1, rows: [{ bucket: '2025-05-10T00:00:00.000Z', key: barangay, count: 1 }] });
  });

  it('a window still open (ending now) has no ETag: its counts may still grow', async () => {
    const iso = (ms: number) => new Date(ms).toISOString().slice(0, 19) + 'Z';
    const open = `start=${iso(Date.now() - 30 * 86_400_000)}&end=${iso(Date.now())}`;
    const res = await fetch(`${svc.url}/reports/archive/stats?${open}&interval=day`, { headers: { 'User-Agent': 't/1' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('etag')).toBeNull();
    expect(res.headers.get('cache-control')).toBe('public, max-age=10');
    const count = await getJson(`${svc.url}/reports/archive/count?${open}`);
    expect(((await res.json()) as any).result.total).toBe(count.body.result.count);
  });

  it.each([
    ['interval=minute', 'interval'],
    ['by=province', 'by'],
    ['tz=%2B2500', 'tz'],
    ['tz=0800', 'tz'],
    ['admin=PH-XX', 'admin'],
    ['bins=3', 'bins'],
  ])('%s → 400 naming %s', async (q, field) => {
    const res = await getJson(statsUrl(svc, q));
    expect(res.status).toBe(400);
    expect(res.body.details.map((d: { field: string }) => d.field)).toContain(field);
  });

  it('bounds the answer: too many buckets for the window is a 400 naming interval', async () => {
    const year = 'start=2025-01-01T00:00:00Z&end=2025-12-31T23:59:59Z';
    const byArea = await getJson(`${svc.url}/reports/archive/stats?${year}&interval=day&by=local_area`);
    expect(byArea.status).toBe(200);
    const tooMany = await getJson(`${svc.url}/reports/archive/stats?${year}&interval=hour&by=local_area`);
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.details[0]).toMatchObject({ in: 'query', field: 'interval' });
  });

  it('requires a User-Agent, like the archive', async () => {
    // fetch always sends one; node:http sends none unless told.
    const { status, body } = await new Promise<{ status: number; body: any }>((resolve, reject) => {
      http.get(statsUrl(svc, 'interval=day'), (res) => {
        let text = '';
        res.on('data', (c) => (text += c)).on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
      }).on('error', reject);
    });
    expect(status).toBe(400);
    expect(body.details[0]).toMatchObject({ in: 'header', field: 'User-Agent' });
  });

  it('serves a city\'s barangays as quantized TopoJSON and as GeoJSON, with a strong ETag', async () => {
    const psa = await loadPsaBoundaries();
    const want = psa.localAreas.features.filter((f) => f.properties.city_code === 'PH-QC');
    const topo = await getJson(`${svc.url}/cities/PH-QC/local-areas`);
    expect(topo.status).toBe(200);
    const topology = topo.body.result as Topology;
    expect(topology.transform).toBeDefined();
    const decoded = feature(topology, topology.objects.output!) as unknown as GeoJSON.FeatureCollection;
    expect(decoded.features.map((f) => f.properties!.psgc).sort()).toEqual(want.map((f) => f.properties.psgc).sort());
    const geo = await getJson(`${svc.url}/cities/PH-QC/local-areas?geoformat=geojson`);
    expect(geo.body.result.features).toHaveLength(want.length);
    expect(geo.body.result.features[0].properties).toEqual({ psgc: want[0]!.properties.psgc, name: want[0]!.properties.name, city_code: 'PH-QC' });
    expect(geo.body.result.features[0].geometry).toEqual(want[0]!.geometry);
    const etag = topo.headers.get('etag')!;
    expect(etag).not.toBe(geo.headers.get('etag'));
    const again = await fetch(`${svc.url}/cities/PH-QC/local-areas`, { headers: { 'If-None-Match': etag } });
    expect(again.status).toBe(304);
  });

  it('answers as the OpenAPI document describes', async () => {
    const doc = await getJson(`${svc.url}/openapi.json`);
    const checker = new OpenApiChecker(doc.body);
    for (const [q, path] of [
      [`/reports/archive/stats?${W}&interval=day&by=local_area&tz=%2B0800`, '/reports/archive/stats'],
      [`/reports/archive/stats?${W}&interval=fortnight`, '/reports/archive/stats'],
      ['/cities/PH-QC/local-areas', '/cities/{code}/local-areas'],
      ['/cities/PH-PG/local-areas?geoformat=geojson', '/cities/{code}/local-areas'],
      ['/cities/nowhere/local-areas', '/cities/{code}/local-areas'],
    ] as const) {
      const res = await getJson(`${svc.url}${q}`);
      checker.check('GET', path, res.status, res.headers.get('content-type'), res.body);
    }
  });

  it('answers 404 in the error shape for an unknown city, 400 for an unknown parameter', async () => {
    const res = await getJson(`${svc.url}/cities/PH-XX/local-areas`);
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ statusCode: 404, error: 'Not Found' });
    expect(res.body.message).toContain('PH-QC');
    const bad = await getJson(`${svc.url}/cities/PH-QC/local-areas?format=csv`);
    expect(bad.status).toBe(400);
  });
});
