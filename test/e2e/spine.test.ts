// End to end on both backends: partners post, the worker archives, researchers
// read the archive back exactly, in GeoJSON and TopoJSON. The AWS backend runs twice: on
// fauxqs and on moto_server, a second, independent implementation of S3 and SQS.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { feature } from 'topojson-client';
import { topology } from 'topojson-server';
import type { Topology } from 'topojson-specification';
import { defaultBoundaries } from '../../src/boundaries/defaultBoundaries.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { HAS_MOTO, MOTO_MISSING, startMoto } from '../support/moto.js';
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
  type TestService,
  pkeyOf,
} from '../support/env.js';

const QMC = { lat: 14.6516, lng: 121.0497 };
const SAN_FERNANDO = { lat: 15.0286, lng: 120.6898 };
const MANILA_CITY_HALL = { lat: 14.5896, lng: 120.9812 };

// The window of 21 Nov 2026 in Manila time: [2026-11-20T16:00:00Z, 2026-11-21T15:59:59Z].
const START = '2026-11-21T00:00:00%2B0800';
const END = '2026-11-21T23:59:59%2B0800';

interface Case {
  body: Record<string, unknown>;
  inWindow: boolean;
  city: string | null;
  createdUtc: string;
}

const cases: Case[] = [
  { body: report(1001, { location: QMC, title: 'Baha sa QMC' }), inWindow: true, city: 'PH-QC', createdUtc: '2026-11-21T05:05:00.000Z' },
  {
    body: report(1002, {
      created_at: '2026-11-21T06:30:15.250Z',
      title: 'Flooded street',
      text: 'Knee-deep "water" near the school\nsince 2pm',
      image_url: 'https://images.example.org/1002.jpg',
    }),
    inWindow: true,
    city: 'PH-QC',
    createdUtc: '2026-11-21T06:30:15.250Z',
  },
  {
    body: report(1003, { partner_city: 'Pampanga', location: SAN_FERNANDO, created_at: '2026-11-21T07:59:59.999-0100' }),
    inWindow: true,
    city: 'PH-PG',
    createdUtc: '2026-11-21T08:59:59.999Z',
  },
  { body: report(1004, { location: MANILA_CITY_HALL, created_at: '2026-11-21T10:00:00+00:00' }), inWindow: true, city: null, createdUtc: '2026-11-21T10:00:00.000Z' },
  { body: report(1005, { created_at: '2026-10-15T10:00:00+08:00' }), inWindow: false, city: 'PH-QC', createdUtc: '2026-10-15T02:00:00.000Z' },
  // Both bounds are inclusive.
  { body: report(1006, { created_at: '2026-11-21T00:00:00+08:00' }), inWindow: true, city: 'PH-QC', createdUtc: '2026-11-20T16:00:00.000Z' },
  { body: report(1007, { created_at: '2026-11-21T15:59:59Z' }), inWindow: true, city: 'PH-QC', createdUtc: '2026-11-21T15:59:59.000Z' },
  // An end to the second covers the whole of it: nothing falls between two consecutive windows.
  { body: report(1011, { created_at: '2026-11-21T15:59:59.500Z' }), inWindow: true, city: 'PH-QC', createdUtc: '2026-11-21T15:59:59.500Z' },
  { body: report(1008, { created_at: '2026-11-21T16:00:00Z' }), inWindow: false, city: 'PH-QC', createdUtc: '2026-11-21T16:00:00.000Z' },
  { body: report(1009, { created_at: '2026-11-20T15:59:59.999Z' }), inWindow: false, city: 'PH-QC', createdUtc: '2026-11-20T15:59:59.999Z' },
  { body: report(1010, { post_id: '1010', partner_city: 'Pampanga', location: SAN_FERNANDO, created_at: '2026-11-21T12:00:00+0800' }), inWindow: true, city: 'PH-PG', createdUtc: '2026-11-21T04:00:00.000Z' },
];

/** The barangays of the cases' points under the shipped boundaries: Central (Quezon Memorial Circle), Lourdes (San Fernando). */
const BARANGAY_OF: Record<string, string> = { 'PH-QC': '1381300020', 'PH-PG': '0305416013' };

function expectedFeature(c: Case) {
  const b = c.body as { post_id: number | string; location: { lat: number; lng: number }; title?: string; text?: string; image_url?: string };
  return {
    type: 'Feature',
    geometry: { type: 'Point', coordinates: [b.location.lng, b.location.lat] },
    properties: {
      pkey: pkeyOf(Number(b.post_id)),
      created_at: c.createdUtc,
      source: 'partner',
      status: 'confirmed',
      url: null,
      image_url: b.image_url ?? null,
      disaster_type: 'flood',
      report_data: null,
      tags: { instance_region_code: c.city, local_area_id: c.city === null ? null : BARANGAY_OF[c.city]!, province_code: null, region_code: null },
      title: b.title ?? '',
      text: b.text ?? '',
    },
  };
}

function newestFirst(a: { properties: { created_at: string; pkey: string } }, b: { properties: { created_at: string; pkey: string } }) {
  return b.properties.created_at.localeCompare(a.properties.created_at) || b.properties.pkey.localeCompare(a.properties.pkey);
}

if (!HAS_MOTO) console.warn(MOTO_MISSING);
const RUNS = [
  ...BACKENDS.map((kind) => ({ name: kind === 'aws' ? 'aws (fauxqs)' : kind, kind, start: startEmulator })),
  ...(HAS_MOTO ? [{ name: 'aws (moto)', kind: 'aws' as const, start: startMoto }] : []),
];

describe.each(RUNS)('spine on the $name backend', ({ kind, start }) => {
  let emulator: Emulator | undefined;
  let svc: TestService;

  beforeAll(async () => {
    if (kind === 'aws') emulator = await start();
    const config = await testConfig(kind, emulator);
    svc = await startTestService(await testRuntime(config, emulator));
  });
  afterAll(async () => {
    await svc?.stop();
    await emulator?.stop();
  });

  const archive = (query: string) => getJson(`${svc.url}/reports/archive?${query}`);

  it('archives every unique report once, with every SPEC 2.3 property right', async () => {
    for (const c of cases) {
      const res = await postReport(svc.url, c.body);
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      expect(res.body).toEqual({ post_id: Number(c.body.post_id), created: true, pkey: pkeyOf(Number(c.body.post_id)) });
    }
    // The same post_id again, with other content: "already exists", and the first version is kept.
    const again = await postReport(svc.url, { ...cases[0]!.body, title: 'second version' });
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ post_id: 1001, created: false, pkey: pkeyOf(1001), message: 'post_id 1001 already exists' });

    const expected = cases.filter((c) => c.inWindow).map(expectedFeature).sort(newestFirst);
    const body = await eventually(async () => {
      const res = await archive(`start=${START}&end=${END}&geoformat=geojson`);
      return res.body?.result?.features?.length === expected.length ? res.body : undefined;
    }, 20_000, 'the archive to show the posted reports');
    expect(body).toEqual({ statusCode: 200, result: { type: 'FeatureCollection', features: expected } });

    // Last month's report is in last month's window.
    const october = await archive('start=2026-10-15T00:00:00%2B0800&end=2026-10-15T23:59:59%2B0800&geoformat=geojson');
    expect(october.body.result.features).toEqual([expectedFeature(cases[4]!)]);
  });

  it('splits windows bounded by microseconds (as Python\'s isoformat writes them) without a report in both', async () => {
    // 1011 is at 15:59:59.500: in the window ending 250 µs after it, not in the next, starting there.
    const pkeys = async (start: string, end: string) => ((await archive(`start=${start}&end=${end}&geoformat=geojson`)).body.result.features as { properties: { pkey: string } }[]).map((f) => f.properties.pkey);
    const seam = '2026-11-21T15:59:59.500250%2B00:00';
    expect(await pkeys('2026-11-21T15:59:59.000000%2B00:00', seam)).toEqual([pkeyOf(1011), pkeyOf(1007)]);
    expect(await pkeys(seam, '2026-11-21T15:59:59.999999%2B00:00')).toEqual([]);
    // A window within one millisecond holds none, in any format: not that its end is before its start.
    const within = 'start=2026-11-21T15:59:59.500250Z&end=2026-11-21T15:59:59.500750Z';
    expect(await pkeys('2026-11-21T15:59:59.500250Z', '2026-11-21T15:59:59.500750Z')).toEqual([]);
    expect((await getJson(`${svc.url}/reports/archive/count?${within}`)).body.result).toMatchObject({ count: 0 });
    const answered = async (format: string) => {
      const res = await fetch(`${svc.url}/reports/archive?${within}&format=${format}`, { headers: { 'User-Agent': 'spine-test/1.0' } });
      return [res.status, format === 'parquet' ? (await res.arrayBuffer()).byteLength > 0 : (await res.text()).trim().split('\n').filter(Boolean).length];
    };
    expect([await answered('csv'), await answered('ndjson'), await answered('parquet')]).toEqual([[200, 1], [200, 0], [200, true]]);
  });

  it('filters by admin', async () => {
    for (const code of ['PH-QC', 'PH-PG']) {
      const res = await archive(`start=${START}&end=${END}&geoformat=geojson&admin=${code}`);
      expect(res.status).toBe(200);
      const want = cases.filter((c) => c.inWindow && c.city === code).map(expectedFeature).sort(newestFirst);
      expect(res.body.result.features).toEqual(want);
    }
  });

  it('reads a + that arrived as a space before the offset digits as +', async () => {
    const encoded = await archive(`start=${START}&end=${END}&geoformat=geojson`);
    const raw = await archive('start=2026-11-21T00:00:00+0800&end=2026-11-21T23:59:59+0800&geoformat=geojson');
    expect(raw.status).toBe(200);
    expect(raw.body).toEqual(encoded.body);
  });

  it('answers TopoJSON by default, equal to topojson-server for the same collection', async () => {
    const geo = await archive(`start=${START}&end=${END}&geoformat=geojson`);
    const topo = await archive(`start=${START}&end=${END}`);
    expect(topo.status).toBe(200);
    expect(topo.body.statusCode).toBe(200);
    expect(topo.body.result).toEqual(JSON.parse(JSON.stringify(topology({ output: geo.body.result }))));
    const decoded = feature(topo.body.result as Topology, topo.body.result.objects.output);
    expect((decoded as unknown as { features: unknown[] }).features).toEqual(geo.body.result.features);
  });

  it('answers an empty window with an empty collection in both formats', async () => {
    const q = 'start=2020-01-01T00:00:00%2B0000&end=2020-01-02T00:00:00%2B0000';
    const geo = await archive(`${q}&geoformat=geojson`);
    expect(geo.body).toEqual({ statusCode: 200, result: { type: 'FeatureCollection', features: [] } });
    const topo = await archive(q);
    expect(topo.body.result).toEqual(JSON.parse(JSON.stringify(topology({ output: geo.body.result }))));
  });

  it('stores hourly Parquet parts under the Hive layout and clears pending markers', async () => {
    const parts = await keysUnder(svc.rt, 'reports/v1/');
    expect(parts.length).toBeGreaterThan(0);
    for (const key of parts) expect(key).toMatch(/^reports\/v1\/year=\d{4}\/month=\d{2}\/day=\d{2}\/hour=\d{2}\/part-[0-9A-Z]{26}\.parquet$/);
    expect(parts.some((k) => k.startsWith('reports/v1/year=2026/month=10/day=15/hour=02/'))).toBe(true);
    await allArchived(svc.rt);
  });

  it('serves /cities as quantized TopoJSON that decodes to the published outlines, and as GeoJSON', async () => {
    const shipped = (await defaultBoundaries()).cities.features;
    const geo = await getJson(`${svc.url}/cities?geoformat=geojson`);
    expect(geo.status).toBe(200);
    expect(geo.body.result).toEqual({
      type: 'FeatureCollection',
      features: shipped.map((f) => ({ type: 'Feature', geometry: f.geometry, properties: { code: f.properties.code, name: f.properties.name } })),
    });
    const topo = await getJson(`${svc.url}/cities`);
    const t = topo.body.result;
    expect(t.type).toBe('Topology');
    expect(t.transform.scale).toHaveLength(2);
    expect(t.transform.translate).toHaveLength(2);
    expect(t.bbox).toHaveLength(4);
    expect(t.objects.output.geometries.map((g: { type: string; properties: unknown }) => [g.type, g.properties])).toEqual([
      ['Polygon', { code: 'PH-QC', name: 'Quezon City' }],
      ['Polygon', { code: 'PH-PG', name: 'Pampanga' }],
    ]);
    for (const arc of t.arcs) for (const [x, y] of arc) expect(Number.isInteger(x) && Number.isInteger(y)).toBe(true);
    const decoded = feature(t as Topology, t.objects.output) as unknown as { features: { geometry: { coordinates: number[][][] } }[] };
    decoded.features.forEach((f, i) => {
      const ring = f.geometry.coordinates[0]!;
      const want = (shipped[i]!.geometry.coordinates as number[][][])[0]!;
      expect(ring[0]).toEqual(ring[ring.length - 1]);
      expect(ring).toHaveLength(want.length);
      ring.forEach(([x, y], j) => {
        expect(Math.abs(x! - want[j]![0]!)).toBeLessThan(1e-4);
        expect(Math.abs(y! - want[j]![1]!)).toBeLessThan(1e-4);
      });
    });
  });
});
