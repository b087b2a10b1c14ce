// Researchers' pulls: every format carries the same reports, count matches,
// bbox is exact, and pages cover the window exactly once while reports arrive.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { parse as parseCsv } from 'csv-parse/sync';
import { tableFromIPC } from 'apache-arrow';
import { DuckDBInstance } from '@duckdb/node-api';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { allArchived, BACKENDS, getJson, postReport, report, startTestService, tempDir, testConfig, testRuntime, type TestService } from '../support/env.js';

const WINDOW = 'start=2026-11-20T00:00:00%2B0000&end=2026-11-21T23:59:59%2B0000';
const UA = { 'User-Agent': 'format-tests/1.0' };

/** 60 reports over two days and both cities, on a grid of points. */
function seedReports(): Record<string, unknown>[] {
  return Array.from({ length: 60 }, (_, i) => {
    const qc = i % 2 === 0;
    return report(5000 + i, {
      created_at: new Date(Date.UTC(2026, 10, 20, 0, 0, 0) + i * 47 * 60_000).toISOString(),
      partner_city: qc ? 'Quezon City' : 'Pampanga',
      location: qc ? { lat: 14.62 + (i % 10) * 0.01, lng: 121.02 + (i % 7) * 0.01 } : { lat: 15.0 + (i % 10) * 0.01, lng: 120.6 + (i % 7) * 0.01 },
      title: `Report ${i}, "quoted"`,
      text: i % 3 === 0 ? 'line one\nline two' : '',
    });
  });
}

describe.each(BACKENDS)('archive formats on the %s backend', (kind) => {
  let emulator: Emulator | undefined;
  let svc: TestService;
  let geo: any;

  beforeAll(async () => {
    if (kind === 'aws') emulator = await startEmulator();
    svc = await startTestService(await testRuntime(await testConfig(kind, emulator), emulator));
    for (const body of seedReports()) expect((await postReport(svc.url, body)).status).toBe(201);
    await allArchived(svc.rt);
    geo = (await getJson(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson`)).body;
    expect(geo.result.features).toHaveLength(60);
  });
  afterAll(async () => {
    await svc?.stop();
    await emulator?.stop();
  });

  const pkeys = () => geo.result.features.map((f: any) => f.properties.pkey);

  it('csv: one row per report, newest first, lng/lat columns, tags flattened, quoting intact', async () => {
    const res = await fetch(`${svc.url}/reports/archive?${WINDOW}&format=csv`, { headers: UA });
    expect(res.headers.get('content-type')).toMatch(/^text\/csv/);
    expect(res.headers.get('content-disposition')).toBe('attachment; filename="flood-reports_20261120T000000Z_20261121T235959Z.csv"');
    const rows = parseCsv(await res.text(), { columns: true }) as Record<string, string>[];
    expect(rows.map((r) => r.pkey)).toEqual(pkeys());
    const first = geo.result.features[0];
    expect(rows[0]).toEqual({
      pkey: first.properties.pkey,
      created_at: first.properties.created_at,
      source: 'partner',
      status: 'confirmed',
      url: '',
      image_url: '',
      disaster_type: 'flood',
      report_data: '',
      instance_region_code: first.properties.tags.instance_region_code ?? '',
      local_area_id: first.properties.tags.local_area_id ?? '',
      province_code: first.properties.tags.province_code ?? '',
      region_code: first.properties.tags.region_code ?? '',
      title: first.properties.title,
      text: first.properties.text,
      lng: String(first.geometry.coordinates[0]),
      lat: String(first.geometry.coordinates[1]),
    });
  });

  it('ndjson: one GeoJSON Feature per line, equal to the GeoJSON answer', async () => {
    const res = await fetch(`${svc.url}/reports/archive?${WINDOW}&format=ndjson`, { headers: UA });
    expect(res.headers.get('content-type')).toMatch(/^application\/x-ndjson/);
    const lines = (await res.text()).split('\n').filter(Boolean).map((l) => JSON.parse(l));
    expect(lines).toEqual(geo.result.features);
  });

  it('parquet: a Parquet file with the same reports, newest first', async () => {
    const res = await fetch(`${svc.url}/reports/archive?${WINDOW}&format=parquet`, { headers: UA });
    expect(res.headers.get('content-type')).toBe('application/vnd.apache.parquet');
    expect(res.headers.get('content-encoding')).toBeNull();
    const file = path.join(await tempDir(), 'a.parquet');
    await fs.writeFile(file, Buffer.from(await res.arrayBuffer()));
    const db = await DuckDBInstance.create(':memory:');
    const conn = await db.connect();
    await conn.run("SET TimeZone = 'UTC'");
    const rows = (await conn.runAndReadAll(`SELECT pkey, instance_region_code, lng, lat FROM read_parquet('${file}')`)).getRowObjectsJS();
    expect(rows.map((r) => r.pkey)).toEqual(pkeys());
    expect(rows.map((r) => [r.lng, r.lat])).toEqual(geo.result.features.map((f: any) => f.geometry.coordinates));
    conn.closeSync();
    db.closeSync();
  });

  it('arrow: an Arrow IPC stream with the same reports, even when empty', async () => {
    const res = await fetch(`${svc.url}/reports/archive?${WINDOW}&format=arrow`, { headers: UA });
    expect(res.headers.get('content-type')).toBe('application/vnd.apache.arrow.stream');
    const table = tableFromIPC(new Uint8Array(await res.arrayBuffer()));
    expect(table.getChild('pkey')!.toArray()).toEqual(pkeys());
    expect(Array.from(table.getChild('lng')!.toArray() as Float64Array)).toEqual(geo.result.features.map((f: any) => f.geometry.coordinates[0]));
    expect(table.getChild('instance_region_code')!.get(0)).toBe(geo.result.features[0].properties.tags.instance_region_code);
    const empty = await fetch(`${svc.url}/reports/archive?start=2020-01-01T00:00:00%2B0000&end=2020-01-02T00:00:00%2B0000&format=arrow`, { headers: UA });
    const none = tableFromIPC(new Uint8Array(await empty.arrayBuffer()));
    expect(none.numRows).toBe(0);
    expect(none.schema.fields.map((f) => f.name)).toContain('pkey');
  });

  it('count equals the number of features, with and without filters', async () => {
    for (const extra of ['', '&admin=PH-QC', '&admin=PH-PG', '&bbox=121.0,14.6,121.05,14.7']) {
      const count = await getJson(`${svc.url}/reports/archive/count?${WINDOW}${extra}`, UA);
      const features = await getJson(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson${extra}`, UA);
      expect(count.body).toEqual({ statusCode: 200, result: { count: features.body.result.features.length } });
    }
  });

  it('bbox keeps exactly the reports inside it, edges included', async () => {
    const box = [121.03, 14.63, 121.05, 14.66];
    const inside = geo.result.features.filter((f: any) => {
      const [x, y] = f.geometry.coordinates;
      return x >= box[0]! && x <= box[2]! && y >= box[1]! && y <= box[3]!;
    });
    expect(inside.length).toBeGreaterThan(0);
    expect(inside.some((f: any) => f.geometry.coordinates[0] === box[0] || f.geometry.coordinates[1] === box[1])).toBe(true);
    const res = await getJson(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson&bbox=${box.join(',')}`, UA);
    expect(res.body.result.features).toEqual(inside);
  });

  it('pages cover the window exactly once, newest first, even while reports arrive', async () => {
    const seen: string[] = [];
    let url: string | undefined = `${svc.url}/reports/archive?${WINDOW}&geoformat=geojson&limit=7`;
    let pages = 0;
    while (url) {
      const res = await fetch(url, { headers: UA });
      expect(res.status).toBe(200);
      const body = (await res.json()) as any;
      expect(body.result.features.length).toBeLessThanOrEqual(7);
      seen.push(...body.result.features.map((f: any) => f.properties.pkey));
      const link = res.headers.get('link');
      url = link ? /^<([^>]+)>; rel="next"$/.exec(link)![1] : undefined;
      // New reports arrive in the middle of the window while paging.
      if (pages === 1) {
        for (const id of [5900, 5901]) {
          expect((await postReport(svc.url, report(id, { created_at: '2026-11-20T12:00:00Z' }))).status).toBe(201);
        }
        await allArchived(svc.rt);
      }
      pages += 1;
    }
    expect(pages).toBe(Math.ceil(60 / 7));
    expect(seen).toEqual(pkeys());
    // The new reports are there for the next pull.
    expect((await getJson(`${svc.url}/reports/archive/count?${WINDOW}`, UA)).body.result.count).toBe(62);
    geo = (await getJson(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson`, UA)).body;
  });

  it('a TopoJSON page is what topojson-server makes of that page', async () => {
    const { topology } = await import('topojson-server');
    const geoPage = await getJson(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson&limit=9`, UA);
    const topoPage = await getJson(`${svc.url}/reports/archive?${WINDOW}&geoformat=topojson&limit=9`, UA);
    expect(geoPage.body.result.features).toHaveLength(9);
    expect(topoPage.body.result).toEqual(JSON.parse(JSON.stringify(topology({ output: geoPage.body.result }))));
  });

  it('pages work for csv too, and a cursor cannot be reused with other filters', async () => {
    const first = await fetch(`${svc.url}/reports/archive?${WINDOW}&format=csv&limit=50`, { headers: UA });
    const next = /^<([^>]+)>; rel="next"$/.exec(first.headers.get('link')!)![1]!;
    const second = await fetch(next, { headers: UA });
    const rows = [...parseCsv(await first.text(), { columns: true }), ...parseCsv(await second.text(), { columns: true })] as { pkey: string }[];
    expect(second.headers.get('link')).toBeNull();
    expect(rows.map((r) => r.pkey)).toEqual(pkeys());
    const cursor = new URL(next).searchParams.get('cursor')!;
    const wrong = await getJson(`${svc.url}/reports/archive?${WINDOW}&admin=PH-QC&limit=50&cursor=${cursor}`, UA);
    expect(wrong.status).toBe(400);
    expect(wrong.body.details[0].field).toBe('cursor');
  });
});
