// Parquet answers and exports are GeoParquet 1.1: a WKB Point `geometry` column
// beside lng/lat, and the `geo` file metadata; geopandas reads them as a
// GeoDataFrame in EPSG:4326 and DuckDB still reads them as before.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { exportWindow } from '../../src/ops/exportWindow.js';
import { GEOPANDAS_MISSING, HAS_GEOPANDAS, python } from '../support/clients.js';
import { allArchived, getJson, postReport, report, startTestService, tempDir, testConfig, testRuntime, type TestService } from '../support/env.js';

const WINDOW = 'start=2026-11-20T00:00:00%2B0000&end=2026-11-21T23:59:59%2B0000';
const EMPTY = 'start=2025-01-01T00:00:00%2B0000&end=2025-01-01T23:59:59%2B0000';
const UA = { 'User-Agent': 'geoparquet-tests/1.0' };
const COLUMNS = ['pkey', 'created_at', 'source', 'status', 'url', 'image_url', 'disaster_type', 'report_data', 'instance_region_code', 'local_area_id', 'province_code', 'region_code', 'title', 'text', 'lng', 'lat', 'geometry'];

let svc: TestService;
let dir: string;
let features: any[];

/** The 21 bytes of a WKB Point, little-endian. */
function wkb(lng: number, lat: number): string {
  const b = Buffer.alloc(21);
  b.writeUInt8(1, 0);
  b.writeUInt32LE(1, 1);
  b.writeDoubleLE(lng, 5);
  b.writeDoubleLE(lat, 13);
  return b.toString('hex');
}

async function download(query: string, name: string): Promise<string> {
  const res = await fetch(`${svc.url}/reports/archive?${query}&format=parquet`, { headers: UA });
  expect(res.status).toBe(200);
  const file = path.join(dir, name);
  await fs.writeFile(file, Buffer.from(await res.arrayBuffer()));
  return file;
}

async function duck<T>(fn: (run: (sql: string) => Promise<Record<string, unknown>[]>) => Promise<T>): Promise<T> {
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  try {
    return await fn(async (sql) => (await conn.runAndReadAll(sql)).getRowObjectsJS() as Record<string, unknown>[]);
  } finally {
    conn.closeSync();
    db.closeSync();
  }
}

beforeAll(async () => {
  svc = await startTestService(await testRuntime(await testConfig('embedded')));
  dir = await tempDir();
  for (let i = 0; i < 40; i++) {
    const qc = i % 2 === 0;
    // Coordinates with long binary fractions, negative and power-of-two-adjacent values would all show a wrong bit.
    const body = report(800 + i, {
      created_at: new Date(Date.UTC(2026, 10, 20) + i * 71 * 60_000).toISOString(),
      partner_city: qc ? 'Quezon City' : 'Pampanga',
      location: qc ? { lat: 14.6 + i / 997, lng: 121 + i / 1009 } : { lat: 15 + i / 1013, lng: 120.5 + i / 991 },
    });
    expect((await postReport(svc.url, body)).status).toBe(201);
  }
  await allArchived(svc.rt);
  features = (await getJson(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson`)).body.result.features;
  expect(features).toHaveLength(40);
});
afterAll(async () => {
  await svc?.stop();
});

describe('GeoParquet answers', () => {
  it('DuckDB reads the archive columns (the geometry as its GEOMETRY type), lng/lat kept, and a WKB Point per row, in the answer order', async () => {
    const file = await download(WINDOW, 'window.parquet');
    await duck(async (run) => {
      // DuckDB recognises GeoParquet: the column reads as its GEOMETRY type.
      expect(String((await run(`SELECT typeof(geometry) AS t FROM read_parquet('${file}') LIMIT 1`))[0]!.t)).toMatch(/^GEOMETRY/);
      await run('SET enable_geoparquet_conversion = false');
      const columns = (await run(`SELECT name FROM parquet_schema('${file}') WHERE num_children IS NULL`)).map((r) => r.name);
      expect(columns).toEqual(COLUMNS);
      const rows = await run(`SELECT pkey, lng, lat, hex(geometry::BLOB) AS wkb FROM read_parquet('${file}')`);
      expect(rows.map((r) => r.pkey)).toEqual(features.map((f) => f.properties.pkey));
      for (const [i, r] of rows.entries()) {
        expect([r.lng, r.lat]).toEqual(features[i].geometry.coordinates);
        expect(String(r.wkb).toLowerCase()).toBe(wkb(r.lng as number, r.lat as number));
      }
      const kv = await run(`SELECT decode(value) AS value FROM parquet_kv_metadata('${file}') WHERE decode(key) = 'geo'`);
      const geo = JSON.parse(String(kv[0]!.value));
      const xs = features.map((f) => f.geometry.coordinates[0]);
      const ys = features.map((f) => f.geometry.coordinates[1]);
      expect(geo).toMatchObject({
        version: '1.1.0',
        primary_column: 'geometry',
        columns: { geometry: { encoding: 'WKB', geometry_types: ['Point'], bbox: [Math.min(...xs), Math.min(...ys), Math.max(...xs), Math.max(...ys)] } },
      });
      expect(geo.columns.geometry.crs.id).toEqual({ authority: 'EPSG', code: 4326 });
    });
  });

  it.skipIf(!HAS_GEOPANDAS)('geopandas reads a GeoDataFrame in EPSG:4326 with the right points', async () => {
    const file = await download(WINDOW, 'window-gpd.parquet');
    const out = await python(
      `
import json, sys, geopandas
gdf = geopandas.read_parquet(sys.argv[1])
print(json.dumps({'type': type(gdf).__name__, 'epsg': gdf.crs.to_epsg(), 'geom_types': sorted(set(gdf.geom_type)),
  'points': [[p.x, p.y] for p in gdf.geometry], 'pkeys': gdf['pkey'].tolist(), 'lnglat': gdf[['lng', 'lat']].values.tolist()}))
`,
      file,
    );
    expect(out.type).toBe('GeoDataFrame');
    expect(out.epsg).toBe(4326);
    expect(out.geom_types).toEqual(['Point']);
    expect(out.pkeys).toEqual(features.map((f) => f.properties.pkey));
    expect(out.points).toEqual(features.map((f) => f.geometry.coordinates));
    expect(out.lnglat).toEqual(out.points);
  });

  it.skipIf(!HAS_GEOPANDAS)('an empty window is a valid GeoParquet file with no rows', async () => {
    const file = await download(EMPTY, 'empty.parquet');
    const out = await python(`
import json, sys, geopandas
gdf = geopandas.read_parquet(sys.argv[1])
print(json.dumps({'rows': len(gdf), 'epsg': gdf.crs.to_epsg(), 'columns': list(gdf.columns)}))
`, file);
    expect(out).toEqual({ rows: 0, epsg: 4326, columns: COLUMNS });
  });

  it('exports (`export --format parquet`) are GeoParquet too', async () => {
    const file = path.join(dir, 'export.parquet');
    await exportWindow(svc.rt, { startMs: Date.parse('2026-11-20T00:00:00Z'), endMs: Date.parse('2026-11-21T23:59:59Z'), admin: undefined }, 'parquet', file);
    await duck(async (run) => {
      await run('SET enable_geoparquet_conversion = false');
      const rows = await run(`SELECT pkey, lng, lat, hex(geometry::BLOB) AS wkb FROM read_parquet('${file}')`);
      expect(rows.map((r) => r.pkey)).toEqual(features.map((f) => f.properties.pkey));
      for (const r of rows) expect(String(r.wkb).toLowerCase()).toBe(wkb(r.lng as number, r.lat as number));
      expect((await run(`SELECT count(*)::INTEGER AS n FROM parquet_kv_metadata('${file}') WHERE decode(key) = 'geo'`))[0]!.n).toBe(1);
    });
  });
});

if (!HAS_GEOPANDAS) console.warn(GEOPANDAS_MISSING);
