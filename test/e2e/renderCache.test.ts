// Rendered hours of parts without ready texts are cached by their part set: a warm answer is
// byte for byte the cold one, a new part in an hour shows at once, and windows that cut an
// hour or filter it are never answered from a whole-hour rendering. Also: hours with several parts (duplicates
// from at-least-once delivery) come out once and in order in every format.
import fs from 'node:fs/promises';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeParquet } from '../../src/archive/partWriter.js';
import { listWindowParts } from '../../src/archive/parts.js';
import { RenderCache, type RenderedHour } from '../../src/archive/renderCache.js';
import { readRows } from '../../src/archive/rows.js';
import { newPartKey } from '../../src/reports/layout.js';
import { SERVICE_VERSION } from '../../src/version.js';
import { allArchived, getJson, keysUnder, postReport, report, startTestService, tempDir, testConfig, testRuntime, type TestService } from '../support/env.js';

const UA = { 'User-Agent': 'render-cache-tests/1.0' };
const FROM = Date.UTC(2026, 10, 20, 0, 0, 0);
const WINDOW = 'start=2026-11-20T00:00:00%2B0000&end=2026-11-20T23:59:59%2B0000';

async function text(url: string): Promise<string> {
  const res = await fetch(url, { headers: UA });
  expect(res.status).toBe(200);
  return res.text();
}

function hits(svc: TestService): Promise<number> {
  return svc.rt.metrics.renderCacheRequests.get().then((m) => m.values.find((v) => v.labels.result === 'hit')?.value ?? 0);
}

describe('rendered-hour cache', () => {
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
    // The render cache serves the hours ready texts do not (several parts, or parts written
    // before them): here, every hour.
    await svc.rt.store.delete(await keysUnder(svc.rt, 'ready/'));
  });
  afterAll(async () => {
    await svc?.stop();
  });

  it('answers a repeated window from the cache with the same bytes, in every text format', async () => {
    for (const q of ['geoformat=geojson', 'geoformat=topojson', 'format=ndjson', 'format=csv']) {
      const before = await hits(svc);
      const cold = await text(`${svc.url}/reports/archive?${WINDOW}&${q}`);
      const warm = await text(`${svc.url}/reports/archive?${WINDOW}&${q}`);
      expect(warm).toBe(cold);
      expect(await hits(svc)).toBeGreaterThanOrEqual(before + 24);
    }
    const geo = JSON.parse(await text(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson`));
    expect(geo.result.features).toHaveLength(48);
    const files = await fs.readdir(path.join(svc.rt.config.cacheDir, 'rendered'));
    expect(files.filter((f) => f.endsWith('.hour'))).toHaveLength(4 * 24);
  });

  it('shows a report that lands in a cached hour at once (a new part is a new cache key)', async () => {
    await text(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson`);
    expect((await postReport(svc.url, report(7100, { created_at: new Date(FROM + 5 * 3_600_000 + 59_000).toISOString() }))).status).toBe(201);
    await allArchived(svc.rt);
    const geo = JSON.parse(await text(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson`));
    expect(geo.result.features.map((f: any) => f.properties.pkey)).toContain('partner-7100');
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
    expect(pkeys).toEqual(['partner-7201', 'partner-7200']);
  });

  it('never answers a cut hour or a filtered window from a whole-hour rendering', async () => {
    await text(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson`);
    // 10:00 to 10:20 holds only the 10:00:01 report; 10:30:01 is outside.
    const cut = JSON.parse(await text(`${svc.url}/reports/archive?start=2026-11-20T10:00:00%2B0000&end=2026-11-20T10:20:00%2B0000&geoformat=geojson`));
    expect(cut.result.features.map((f: any) => f.properties.created_at)).toEqual(['2026-11-20T10:00:01.000Z']);
    // A cut that leaves all of the hour's reports inside is served whole from the cache.
    const before = await hits(svc);
    const fits = JSON.parse(await text(`${svc.url}/reports/archive?start=2026-11-20T10:00:00%2B0000&end=2026-11-20T10:45:00%2B0000&geoformat=geojson`));
    expect(fits.result.features.map((f: any) => f.properties.created_at)).toEqual(['2026-11-20T10:30:01.000Z', '2026-11-20T10:00:01.000Z']);
    expect(await hits(svc)).toBe(before + 1);
    const qc = JSON.parse(await text(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson&admin=PH-QC`));
    expect(qc.result.features.length).toBeGreaterThan(0);
    expect(qc.result.features.every((f: any) => f.properties.tags.instance_region_code === 'PH-QC')).toBe(true);
    const box = JSON.parse(await text(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson&bbox=120,14.5,121.5,14.7`));
    expect(box.result.features.length).toBe(qc.result.features.length);
  });

  it('renders again when an entry is removed behind its back', async () => {
    const cold = await text(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson`);
    const dir = path.join(svc.rt.config.cacheDir, 'rendered');
    for (const f of await fs.readdir(dir)) await fs.rm(path.join(dir, f));
    expect(await text(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson`)).toBe(cold);
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

describe('RenderCache', () => {
  const textOf = (h: RenderedHour | undefined) => Buffer.from(typeof h!.text === 'function' ? h!.text() : h!.text).toString();
  const hour = (n: number) => ({ text: Buffer.from('x'.repeat(n)), bbox: [1, 2, 3, 4] as [number, number, number, number], minMs: 10, maxMs: 20 });

  it('knows its release (package.json), which its keys and the archive validators carry', async () => {
    const pkg = JSON.parse(await fs.readFile(path.resolve(import.meta.dirname, '../../package.json'), 'utf8'));
    expect(SERVICE_VERSION).toBe(pkg.version);
  });

  it('keys an hour by format and part set, whatever the listing order', () => {
    const a = { key: 'reports/v1/a', etag: '1', size: 1, lastModified: new Date(0) };
    const b = { key: 'reports/v1/b', etag: '2', size: 1, lastModified: new Date(0) };
    expect(RenderCache.keyOf('geojson', [a, b])).toBe(RenderCache.keyOf('geojson', [b, a]));
    expect(RenderCache.keyOf('geojson', [a, b])).not.toBe(RenderCache.keyOf('topojson', [a, b]));
    expect(RenderCache.keyOf('geojson', [a])).not.toBe(RenderCache.keyOf('geojson', [a, b]));
    expect(RenderCache.keyOf('geojson', [a])).not.toBe(RenderCache.keyOf('geojson', [{ ...a, etag: '3' }]));
  });

  it('keeps its bound by evicting the least recently used entries, and adopts them after a restart', async () => {
    const dir = await tempDir();
    const cache = new RenderCache(dir, 350);
    // What is stored is answered as a hit whose text is read when sent.
    expect(textOf(await cache.put('one', hour(100)))).toBe('x'.repeat(100));
    textOf(await cache.put('two', hour(100)));
    expect(textOf(await cache.get('one'))).toBe('x'.repeat(100));
    textOf(await cache.put('three', hour(100)));
    expect(cache.sizeBytes).toBeLessThanOrEqual(350);
    expect(await cache.get('two')).toBeUndefined();
    const one = (await cache.get('one'))!;
    expect({ bbox: one.bbox, minMs: one.minMs, maxMs: one.maxMs, text: textOf(one) }).toEqual({ ...hour(100), text: 'x'.repeat(100) });

    const again = new RenderCache(dir, 350);
    const three = (await again.get('three'))!;
    expect([three.bbox, three.minMs, three.maxMs, textOf(three)]).toEqual([[1, 2, 3, 4], 10, 20, 'x'.repeat(100)]);
    expect(again.sizeBytes).toBe(cache.sizeBytes);
  });

  it('holds no file descriptor for a hit until its text is read, however many hits are taken and never read', async () => {
    const dir = await tempDir();
    const cache = new RenderCache(dir, 1 << 30);
    const empty = { text: new Uint8Array(0), bbox: undefined, minMs: 10, maxMs: 10 };
    for (let i = 0; i < 400; i++) textOf(await cache.put(`full-${i}`, hour(50)));
    for (let i = 0; i < 400; i++) await cache.put(`empty-${i}`, empty);
    const fds = async () => (await fs.readdir('/proc/self/fd')).length;
    const before = await fds();
    // A year of hours looked up, as a long pull does, and left unread (empty hours, cut hours,
    // a client gone): no descriptor may stay open for them.
    const taken = await Promise.all([...Array(400).keys()].flatMap((i) => [cache.get(`full-${i}`), cache.get(`empty-${i}`)]));
    expect(taken.every((h) => h !== undefined)).toBe(true);
    expect((await fds()) - before).toBeLessThan(10);
    // Read later, each is whole.
    expect(textOf(taken[0])).toBe('x'.repeat(50));
    expect(textOf(taken[1])).toBe('');
  });

  it('never evicts an entry a pending answer is about to read', async () => {
    const cache = new RenderCache(await tempDir(), 250);
    textOf(await cache.put('old', hour(100)));
    const held = await cache.get('old');
    // Over the bound twice: the held entry stays until it is read, the others go first.
    textOf(await cache.put('new-1', hour(100)));
    textOf(await cache.put('new-2', hour(100)));
    expect(textOf(held)).toBe('x'.repeat(100));
    textOf(await cache.put('new-3', hour(100)));
    expect(cache.sizeBytes).toBeLessThanOrEqual(250);
  });

  it('stores nothing when turned off', async () => {
    const dir = await tempDir();
    const cache = new RenderCache(dir, 0);
    await cache.put('one', hour(10));
    expect(await cache.get('one')).toBeUndefined();
    expect(await fs.readdir(dir)).toEqual([]);
  });
});
