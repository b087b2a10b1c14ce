// Hours that ready texts do not answer (several parts not yet compacted, parts written before
// ready texts) are built by DuckDB on every pull: a repeated answer is byte for byte the first,
// a new part in an hour shows at once, windows that cut an hour or filter it hold exactly their
// reports, and hours with several parts (duplicates from at-least-once delivery) come out once
// and in order in every format.
import fs from 'node:fs/promises';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeParquet } from '../../src/archive/partWriter.js';
import { listWindowParts } from '../../src/archive/partListing.js';
import { readRows } from '../../src/archive/readRows.js';
import { newPartKey } from '../../src/store/layout.js';
import { SERVICE_VERSION } from '../../src/shared/version.js';
import { allArchived, getJson, keysUnder, postReport, report, startTestService, tempDir, testConfig, testRuntime, type TestService, pkeyOf } from '../support/env.js';

const UA = { 'User-Agent': 'render-cache-tests/1.0' };
const FROM = Date.UTC(2026, 10, 20, 0, 0, 0);
const WINDOW = 'start=2026-11-20T00:00:00%2B0000&end=2026-11-20T23:59:59%2B0000';

async function text(url: string): Promise<string> {
  const res = await fetch(url, { headers: UA });
  expect(res.status).toBe(200);
  return res.text();
}

describe('hours built by DuckDB', () => {
  let svc: TestService;

  beforeAll(async () => {
    svc = await startTestService(await testRuntime(await testConfig('embedded')));
    // 48 reports, two an hour, alternating cities.
    for (let i = 0; i < 48; i++) {
      const qc = i % 2 === 0;
      const body = report(7000 + i, {
        created_at: new Date(FROM + i * 30 * 60_000 + 1000).toISOString(),
        partner_city: qc ? 'Quezon City' : 'Pampanga',
        location: qc ? { lat: 14.63, lng: 121.03 + i * 0.0001 } : { lat: 15.03, lng: 120.68 },
      });
      expect((await postReport(svc.url, body)).status).toBe(201);
    }
    await allArchived(svc.rt);
    // Parts without ready texts: every hour is built by DuckDB.
    await svc.rt.store.delete(await keysUnder(svc.rt, 'ready/'));
  });
  afterAll(async () => {
    await svc?.stop();
  });

  it('answers a repeated window with the same bytes, in every text format', async () => {
    for (const q of ['geoformat=geojson', 'geoformat=topojson', 'format=ndjson', 'format=csv']) {
      const first = await text(`${svc.url}/reports/archive?${WINDOW}&${q}`);
      expect(await text(`${svc.url}/reports/archive?${WINDOW}&${q}`)).toBe(first);
    }
    const geo = JSON.parse(await text(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson`));
    expect(geo.result.features).toHaveLength(48);
  });

  it('shows a report that lands in an hour already asked for at once', async () => {
    await text(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson`);
    expect((await postReport(svc.url, report(7100, { created_at: new Date(FROM + 5 * 3_600_000 + 59_000).toISOString() }))).status).toBe(201);
    await allArchived(svc.rt);
    const geo = JSON.parse(await text(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson`));
    expect(geo.result.features.map((f: any) => f.properties.pkey)).toContain(pkeyOf(7100));
    expect(geo.result.features).toHaveLength(49);
  });

  it('answers a repeated Parquet pull with the same bytes (its ETag is a strong validator), and a window with a new part anew', async () => {
    // A day of its own, so the other tests' counts hold.
    const day = Date.UTC(2026, 10, 21);
    const post = async (n: number, hour: number) => {
      expect((await postReport(svc.url, report(n, { created_at: new Date(day + hour * 3_600_000).toISOString() }))).status).toBe(201);
      await allArchived(svc.rt);
    };
    await post(7200, 1);
    const pull = async () => {
      const res = await fetch(`${svc.url}/reports/archive?start=2026-11-21T00:00:00%2B0000&end=2026-11-21T23:59:59%2B0000&format=parquet`, { headers: UA });
      expect(res.status).toBe(200);
      return Buffer.from(await res.arrayBuffer());
    };
    const cold = await pull();
    const warm = await pull();
    expect(warm.equals(cold)).toBe(true);

    await post(7201, 2);
    const file = path.join(await tempDir(), 'after.parquet');
    await fs.writeFile(file, await pull());
    const instance = await DuckDBInstance.create(':memory:');
    const conn = await instance.connect();
    const pkeys = (await conn.runAndReadAll(`SELECT pkey FROM read_parquet('${file}')`)).getRowObjectsJS().map((r) => r.pkey);
    conn.closeSync();
    instance.closeSync();
    expect(pkeys).toEqual([pkeyOf(7201), pkeyOf(7200)]);
  });

  it('answers a window that cuts an hour, or filters it, with exactly its reports', async () => {
    await text(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson`);
    // 10:00 to 10:20 holds only the 10:00:01 report; 10:30:01 is outside.
    const cut = JSON.parse(await text(`${svc.url}/reports/archive?start=2026-11-20T10:00:00%2B0000&end=2026-11-20T10:20:00%2B0000&geoformat=geojson`));
    expect(cut.result.features.map((f: any) => f.properties.created_at)).toEqual(['2026-11-20T10:00:01.000Z']);
    const fits = JSON.parse(await text(`${svc.url}/reports/archive?start=2026-11-20T10:00:00%2B0000&end=2026-11-20T10:45:00%2B0000&geoformat=geojson`));
    expect(fits.result.features.map((f: any) => f.properties.created_at)).toEqual(['2026-11-20T10:30:01.000Z', '2026-11-20T10:00:01.000Z']);
    const qc = JSON.parse(await text(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson&admin=PH-QC`));
    expect(qc.result.features.length).toBeGreaterThan(0);
    expect(qc.result.features.every((f: any) => f.properties.tags.instance_region_code === 'PH-QC')).toBe(true);
    const box = JSON.parse(await text(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson&bbox=120,14.5,121.5,14.7`));
    expect(box.result.features.length).toBe(qc.result.features.length);
  });

  it('answers duplicates spread over several parts of an hour once, in order, in every format', async () => {
    // At-least-once delivery: copies of an hour's reports in a second part.
    const hours = await listWindowParts(svc.rt.store, FROM, FROM + 86_399_999);
    const hour = hours[3]!;
    const rows = await readRows(svc.rt.db, await Promise.all(hour.parts.map((p) => svc.rt.cache.localFile(p))));
    const file = path.join(await tempDir(), 'copy.parquet');
    await writeParquet(svc.rt.db, rows, file);
    await svc.rt.store.put(newPartKey(hour.hourMs), await fs.readFile(file));

    const geo = JSON.parse(await text(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson`));
    const pkeys = geo.result.features.map((f: any) => f.properties.pkey);
    expect(new Set(pkeys).size).toBe(pkeys.length);
    expect(pkeys).toHaveLength(49);
    const created = geo.result.features.map((f: any) => f.properties.created_at);
    expect(created).toEqual([...created].sort().reverse());
    expect((await getJson(`${svc.url}/reports/archive/count?${WINDOW}`)).body.result.count).toBe(49);

    const res = await fetch(`${svc.url}/reports/archive?${WINDOW}&format=parquet`, { headers: UA });
    const out = path.join(await tempDir(), 'window.parquet');
    await fs.writeFile(out, Buffer.from(await res.arrayBuffer()));
    const db = await DuckDBInstance.create(':memory:');
    const conn = await db.connect();
    try {
      const got = (await conn.runAndReadAll(`SELECT pkey FROM read_parquet('${out}')`)).getRowObjectsJS().map((r) => r.pkey);
      expect(got).toEqual(pkeys);
    } finally {
      conn.closeSync();
      db.closeSync();
    }
  });
});

describe('validators', () => {
  it('knows its release (package.json), which its keys and the archive validators carry', async () => {
    const pkg = JSON.parse(await fs.readFile(path.resolve(import.meta.dirname, '../../package.json'), 'utf8'));
    expect(SERVICE_VERSION).toBe(pkg.version);
  });
});
