// Parquet answers are spliced from the row groups stored beside the parts (copied byte for
// byte, with a new footer), DuckDB writing only the days it must (cut by the window, several
// parts, a retraction not yet purged). Whatever the mix, the file is one valid GeoParquet file
// that DuckDB and pyarrow read as the same reports, in the same order, as the GeoJSON answer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { compact } from '../../src/ops/compact.js';
import { HAS_PYARROW, python, PYARROW_MISSING } from '../support/clients.js';
import { allArchived, API_KEY, getJson, keysUnder, postReport, report, startTestService, tempDir, testConfig, testRuntime, type TestService } from '../support/env.js';

const UA = { 'User-Agent': 'parquet-answer-tests/1.0' };
const FROM = Date.UTC(2026, 10, 14);
const DAY_MS = 86_400_000;
/** Four days: the first three compacted, the last left in hour parts. */
const WHOLE = 'start=2026-11-14T00:00:00%2B0000&end=2026-11-17T23:59:59%2B0000';
/** Cuts the first and the last day. */
const CUT = 'start=2026-11-14T09:30:00%2B0000&end=2026-11-17T05:10:00%2B0000';
const QC = `${WHOLE}&admin=PH-QC`;
const COLUMNS = ['pkey', 'created_at', 'source', 'status', 'url', 'image_url', 'disaster_type', 'report_data', 'instance_region_code', 'local_area_id', 'province_code', 'region_code', 'title', 'text', 'lng', 'lat', 'geometry'];

let svc: TestService;
let dir: string;
/** An instant before any report was posted: a sync from it has every report changed. */
let beforePosts: string;

async function parquet(query: string, name: string): Promise<string> {
  const res = await fetch(`${svc.url}/reports/archive?${query}&format=parquet`, { headers: UA });
  expect(res.status).toBe(200);
  const body = Buffer.from(await res.arrayBuffer());
  expect(Number(res.headers.get('content-length'))).toBe(body.length);
  const file = path.join(dir, name);
  await fs.writeFile(file, body);
  return file;
}

async function features(query: string): Promise<any[]> {
  const { status, body } = await getJson(`${svc.url}/reports/archive?${query}&geoformat=geojson`, UA);
  expect(status).toBe(200);
  return body.result.features;
}

async function duck<T>(fn: (run: (sql: string) => Promise<Record<string, unknown>[]>) => Promise<T>): Promise<T> {
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  try {
    await conn.run('SET enable_geoparquet_conversion = false');
    return await fn(async (sql) => (await conn.runAndReadAll(sql)).getRowObjectsJS() as Record<string, unknown>[]);
  } finally {
    conn.closeSync();
    db.closeSync();
  }
}

/** The file's reports as the GeoJSON answer states them (properties in their published order, and the point). */
async function asFeatures(file: string): Promise<unknown[]> {
  return duck(async (run) => {
    const rows = await run(`SELECT *, strftime(created_at, '%Y-%m-%dT%H:%M:%S.%gZ') AS iso, hex(geometry) AS wkb FROM read_parquet('${file}')`);
    return rows.map((r) => {
      const wkb = Buffer.from(String(r.wkb), 'hex');
      // The WKB Point holds the same doubles as lng/lat.
      expect([wkb.readDoubleLE(5), wkb.readDoubleLE(13)]).toEqual([r.lng, r.lat]);
      return {
        type: 'Feature',
        geometry: { type: 'Point', coordinates: [r.lng, r.lat] },
        properties: {
          pkey: r.pkey, created_at: r.iso, source: r.source, status: r.status, url: r.url, image_url: r.image_url, disaster_type: r.disaster_type,
          report_data: r.report_data === null ? null : JSON.parse(String(r.report_data)), tags: { instance_region_code: r.instance_region_code, local_area_id: r.local_area_id, province_code: r.province_code, region_code: r.region_code }, title: r.title, text: r.text,
        },
      };
    });
  });
}

async function rowGroups(file: string): Promise<number> {
  return duck(async (run) => Number((await run(`SELECT count(DISTINCT row_group_id) AS n FROM parquet_metadata('${file}')`))[0]!.n));
}

async function geoBbox(file: string): Promise<number[]> {
  return duck(async (run) => JSON.parse(String((await run(`SELECT decode(value) AS v FROM parquet_kv_metadata('${file}') WHERE decode(key) = 'geo'`))[0]!.v)).columns.geometry.bbox);
}

const bboxOf = (fs: any[]) => {
  const xs = fs.map((f) => f.geometry.coordinates[0]);
  const ys = fs.map((f) => f.geometry.coordinates[1]);
  return [Math.min(...xs), Math.min(...ys), Math.max(...xs), Math.max(...ys)];
};

beforeAll(async () => {
  // Changes are in a sync's answer once settled (half a second here).
  svc = await startTestService(await testRuntime(await testConfig('embedded', undefined, { SYNC_SETTLE_SECONDS: '0.5' })));
  dir = await tempDir();
  beforePosts = new Date(Date.now() - 1_000).toISOString();
  // Four days, a report every 50 minutes, two cities, texts that need escaping, some URLs.
  for (let i = 0; i < 4 * 29; i++) {
    const qc = i % 3 !== 0;
    const body = report(9000 + i, {
      created_at: new Date(FROM + i * 50 * 60_000 + 7_000).toISOString(),
      partner_city: qc ? 'Quezon City' : 'Pampanga',
      location: qc ? { lat: 14.6 + i / 1999, lng: 121.01 + i / 2003 } : { lat: 15.02 + i / 997, lng: 120.6 + i / 991 },
      title: `Baha "${i}", ñ`,
      text: i % 4 === 0 ? 'Line one\nline two\\ and a tab\t' : 'Hanggang tuhod',
      ...(i % 5 === 0 ? { image_url: `https://example.org/r/${i}.jpg` } : {}),
    });
    expect((await postReport(svc.url, body)).status).toBe(201);
  }
  await allArchived(svc.rt);
  await compact(svc.rt, { fromMs: FROM, toMs: FROM + 3 * DAY_MS - 1, closedBeforeMs: FROM + 3 * DAY_MS });
});
afterAll(async () => {
  await svc?.stop();
});

describe('Parquet answers spliced from stored row groups', () => {
  it('a window of whole days is the stored row groups (a compacted day, an hour part: one each), the same reports as the GeoJSON answer', async () => {
    const file = await parquet(WHOLE, 'whole.parquet');
    const expected = await features(WHOLE);
    expect(expected.length).toBe(4 * 29);
    expect(await asFeatures(file)).toEqual(expected);
    // The last day's hours: one stored row group each when each has one part (else DuckDB writes the day).
    const hours = (await keysUnder(svc.rt, 'reports/')).filter((k) => k.includes('day=17/')).map((k) => k.split('/hour=')[1]!.slice(0, 2));
    expect(hours.length).toBeGreaterThan(1);
    expect(await rowGroups(file)).toBe(3 + (new Set(hours).size === hours.length ? hours.length : 1));
    expect(await geoBbox(file)).toEqual(bboxOf(expected));
  });

  it('a window that cuts days, and a filtered one, hold exactly their reports', async () => {
    for (const [query, name] of [[CUT, 'cut.parquet'], [QC, 'qc.parquet']] as const) {
      const file = await parquet(query, name);
      const expected = await features(query);
      expect(expected.length).toBeGreaterThan(0);
      expect(expected.length).toBeLessThan(4 * 29);
      expect(await asFeatures(file), query).toEqual(expected);
      expect(await geoBbox(file), query).toEqual(bboxOf(expected));
    }
  });

  it("a sync's answer (updated_after) holds the changed reports in the answer's order, as the GeoJSON answer does", async () => {
    const sync = `${WHOLE}&updated_after=${encodeURIComponent(beforePosts)}`;
    await new Promise((r) => setTimeout(r, 600));
    const file = await parquet(sync, 'sync.parquet');
    const expected = await features(sync);
    expect(expected).toEqual(await features(WHOLE));
    expect(await asFeatures(file)).toEqual(expected);
  });

  it('a retraction not yet purged leaves the answer at once (its day written by DuckDB)', async () => {
    const victim = (await features(WHOLE))[40].properties.pkey as string;
    const postId = Number(victim.slice(victim.lastIndexOf('-') + 1));
    const res = await fetch(`${svc.url}/feeds/partner/${postId}`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY, ...UA } });
    expect(res.status).toBe(200);
    const file = await parquet(WHOLE, 'retracted.parquet');
    const after = await asFeatures(file);
    expect(after).toEqual(await features(WHOLE));
    expect(after.map((f: any) => f.properties.pkey)).not.toContain(victim);
    expect(after).toHaveLength(4 * 29 - 1);
  });

  it.skipIf(!HAS_PYARROW)('pyarrow reads it: the columns, every row group, the geo metadata', async () => {
    const file = await parquet(WHOLE, 'pyarrow.parquet');
    const expected = await features(WHOLE);
    const out = await python(
      `
import json, sys, pyarrow.parquet as pq
f = pq.ParquetFile(sys.argv[1])
t = f.read()
geo = json.loads(f.schema_arrow.metadata[b'geo'])
print(json.dumps({'columns': t.column_names, 'rows': t.num_rows, 'groups': f.num_row_groups,
  'pkeys': t.column('pkey').to_pylist(), 'created': [str(x) for x in t.column('created_at').to_pylist()[:1]],
  'stats_rows': sum(f.metadata.row_group(i).num_rows for i in range(f.num_row_groups)), 'primary': geo['primary_column']}))
`,
      file,
    );
    expect(out.columns).toEqual(COLUMNS);
    expect(out.rows).toBe(expected.length);
    expect(out.stats_rows).toBe(expected.length);
    expect(out.groups).toBe(await rowGroups(file));
    expect(out.pkeys).toEqual(expected.map((f) => f.properties.pkey));
    expect(out.primary).toBe('geometry');
  });
});

if (!HAS_PYARROW) console.warn(PYARROW_MISSING);
