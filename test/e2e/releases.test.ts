// Releases: a closed year written once as monthly GeoParquet and CSV.gz files with a manifest, a
// STAC catalogue and a citation; read back by DuckDB, pyarrow and geopandas with the manifest's
// counts and checksums; served read-only with ETag and Range; a second run with the same reports
// makes nothing new, and a purged retraction makes a new revision beside the first, which stays
// byte for byte as it was.
import { createHash } from 'node:crypto';
import http from 'node:http';
import fs from 'node:fs/promises';
import path from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sqlString } from '../../src/archive/duckdb.js';
import { CSV_HEADER } from '../../src/http/archiveBody.js';
import { compact } from '../../src/ops/compact.js';
import { purgeRetracted } from '../../src/ops/purge.js';
import { reprocess } from '../../src/ops/reprocess.js';
import { parse as parseCsv } from 'csv-parse/sync';
import { loadNationalBoundaries } from '../support/sharedData.js';
import { lastMonth, releaseJob } from '../../jobs/release.js';
import { NothingToReleaseError, release, ReleaseError, ReleaseLockLostError, ReleaseRunningError } from '../../src/ops/release.js';
import { RELEASE_SINCE_KEY, releaseLockKey } from '../../src/store/layout.js';
import type { Manifest } from '../../src/releases/documents.js';
import { runCli } from '../support/cli.js';
import { HAS_GEOPANDAS, GEOPANDAS_MISSING, python } from '../support/clients.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { allArchived, API_KEY, BACKENDS, getJson, keysUnder, pkeyOf, postReport, report, startTestService, tempDir, testConfig, testRuntime, type TestService } from '../support/env.js';

const UA = { 'User-Agent': 'flood-tests/1.0' };
const YEAR = 'start=2025-01-01T00:00:00Z&end=2025-12-31T23:59:59.999Z';
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** 20 reports in June 2025, 10 in July, 1 on the last millisecond of the year, 1 in 2026 (outside). */
const POSTS = [
  ...Array.from({ length: 20 }, (_, i) => ({ id: 100 + i, at: `2025-06-${String(1 + i).padStart(2, '0')}T0${i % 10}:15:00Z` })),
  ...Array.from({ length: 10 }, (_, i) => ({ id: 200 + i, at: `2025-07-${String(10 + i).padStart(2, '0')}T12:00:00Z` })),
  { id: 300, at: '2025-12-31T23:59:59.999Z' },
  { id: 400, at: '2026-01-01T00:00:00Z' },
];

let emulator: Emulator;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(async () => {
  await emulator.stop();
});

describe.each(BACKENDS)('releases on the %s backend', (kind) => {
  let svc: TestService;
  const get = (p: string, headers: Record<string, string> = {}) => fetch(`${svc.url}${p}`, { headers: { ...UA, ...headers } });
  const manifestOf = async (id: string) => (await (await get(`/releases/${id}/manifest.json`)).json()) as Manifest;
  /**
   * The runtime whose release runs `then` once, just after the Parquet file of the month from
   * `monthMs` is written and before its CSV is read; `ran`: whether it has.
   */
  const betweenReads = (monthMs: number, then: () => Promise<void>) => {
    let ran = false;
    const open = async (...args: Parameters<typeof svc.rt.archive.open>) => {
      const window = await svc.rt.archive.open(...args);
      if (ran || args[0].startMs !== monthMs) return window;
      // On the window itself: what its reads find out (a part gone, read from a new listing) is its own.
      const written = window.writeReleaseParquet.bind(window);
      window.writeReleaseParquet = async (file: string) => {
        const facts = await written(file);
        await then();
        ran = true;
        return facts;
      };
      return window;
    };
    return { rt: { ...svc.rt, archive: { open } }, ran: () => ran };
  };

  beforeAll(async () => {
    // The cache under a dot-directory, as ~/.cache is: release files are served from it all the same.
    const cacheDir = path.join(await tempDir(), '.cache', 'flood');
    svc = await startTestService(await testRuntime(await testConfig(kind, kind === 'aws' ? emulator : undefined, { CACHE_DIR: cacheDir }), kind === 'aws' ? emulator : undefined));
    for (const p of POSTS) {
      const lng = 121.0 + (p.id % 17) * 0.003;
      expect((await postReport(svc.url, report(p.id, { created_at: p.at, location: { lat: 14.6 + (p.id % 13) * 0.004, lng } }))).status).toBe(201);
    }
    await allArchived(svc.rt);
  }, 60_000);
  afterAll(async () => {
    await svc?.stop();
  });

  it('writes a closed year as monthly GeoParquet and CSV.gz, with a manifest whose counts and checksums are the files\'', async () => {
    // The command line on the embedded backend (beside the running service); the same function in process on S3.
    let made: unknown;
    if (kind === 'embedded') {
      const run = await runCli(['release', '--period', '2025', '--json'], { DATA_DIR: svc.rt.config.dataDir, API_KEYS: API_KEY });
      expect(run.code, run.stderr).toBe(0);
      made = JSON.parse(run.stdout);
    } else made = await release(svc.rt, '2025');
    expect(made).toMatchObject({ release: '2025-r1', created: true, reports: 31, files: 24 });

    const m = await manifestOf('2025-r1');
    const count = await getJson(`${svc.url}/reports/archive/count?${YEAR}`);
    expect(m).toMatchObject({ release: '2025-r1', period: '2025', revision: 1, reports: count.body.result.count, window: { start: '2025-01-01T00:00:00.000Z', end: '2025-12-31T23:59:59.999Z' } });
    expect(m.time_extent).toEqual(['2025-06-01T00:15:00.000Z', '2025-12-31T23:59:59.999Z']);
    expect(m.files.map((f) => f.path)).toEqual(Array.from({ length: 12 }, (_, i) => `2025-${String(i + 1).padStart(2, '0')}`).flatMap((mm) => [`reports-${mm}.parquet`, `reports-${mm}.csv.gz`]));
    expect(m.license).toBe('CC-BY-4.0');
    expect(m.boundary_version.attribution).toMatch(/PSA and NAMRIA/);
    expect(m.tagged_with).toEqual([{ id: m.boundary_version.id, reports: m.reports }]);
    expect(m.changes).toEqual([{ revision: 1, created: m.created, note: 'First release of the period.' }]);
    const monthCount = async (mm: string, last: string) => (await getJson(`${svc.url}/reports/archive/count?start=2025-${mm}-01T00:00:00Z&end=2025-${mm}-${last}T23:59:59.999Z`)).body.result.count as number;
    for (const f of m.files) {
      const res = await get(`/releases/2025-r1/${f.path}`);
      expect(res.status).toBe(200);
      const body = Buffer.from(await res.arrayBuffer());
      expect([f.path, body.length, sha256(body)]).toEqual([f.path, f.bytes, f.sha256]);
      if (f.path.endsWith('.csv.gz')) {
        const lines = gunzipSync(body).toString('utf8').split('\n').filter((l) => l !== '');
        expect([f.path, lines[0]]).toEqual([f.path, CSV_HEADER]);
        expect([f.path, lines.length - 1]).toEqual([f.path, f.reports]);
      }
    }
    expect(m.files.find((f) => f.path === 'reports-2025-06.parquet')!.reports).toBe(await monthCount('06', '30'));
    expect(m.files.find((f) => f.path === 'reports-2025-07.parquet')!.reports).toBe(await monthCount('07', '31'));
    expect(m.files.find((f) => f.path === 'reports-2025-01.parquet')!.reports).toBe(0);

    // DuckDB: every row, oldest first, the covering column and the GeoParquet metadata.
    const dir = path.join(svc.rt.config.dataDir, 'downloaded');
    await fs.mkdir(dir, { recursive: true });
    const june = path.join(dir, 'june.parquet');
    await fs.writeFile(june, Buffer.from(await (await get('/releases/2025-r1/reports-2025-06.parquet')).arrayBuffer()));
    const rows = await svc.rt.db.withConnection(async (conn) => (await conn.runAndReadAll(`SELECT pkey, epoch_ms(created_at) AS t, bbox.xmin = lng AND bbox.ymax = lat AS covered FROM read_parquet(${sqlString(june)})`)).getRowObjectsJS());
    expect(rows.map((r) => Number(r.t))).toEqual([...rows.map((r) => Number(r.t))].sort((a, b) => a - b));
    expect(rows.every((r) => r.covered === true)).toBe(true);
    const geo = await svc.rt.db.withConnection(async (conn) =>
      JSON.parse(String((await conn.runAndReadAll(`SELECT decode(value) AS v FROM parquet_kv_metadata(${sqlString(june)}) WHERE decode(key) = 'geo'`)).getRowObjectsJS()[0]!.v)),
    );
    expect(geo).toMatchObject({ version: '1.1.0', primary_column: 'geometry', columns: { geometry: { encoding: 'WKB', covering: { bbox: { xmin: ['bbox', 'xmin'], ymax: ['bbox', 'ymax'] } } } } });
  }, 120_000);

  it('lists the release in a STAC catalogue whose links and checksums resolve, and serves its files read-only with ETag and Range', async () => {
    const catalogRes = await get('/releases/catalog.json');
    const catalog = (await catalogRes.json()) as any;
    expect((await get('/releases/catalog.json', { 'If-None-Match': catalogRes.headers.get('etag')! })).status).toBe(304);
    expect(catalog).toMatchObject({ type: 'Catalog', stac_version: '1.0.0' });
    const child = catalog.links.find((l: any) => l.rel === 'child');
    const collection = (await (await get(`/releases/${child.href.replace('./', '')}`)).json()) as any;
    expect(collection).toMatchObject({ type: 'Collection', id: 'flood-reports', license: 'CC-BY-4.0', extent: { temporal: { interval: [['2025-01-01T00:00:00.000Z', '2025-12-31T23:59:59.999Z']] } } });
    const items = collection.links.filter((l: any) => l.rel === 'item');
    expect(items.map((l: any) => l.href)).toEqual(['./2025-r1/item.json']);
    const item = (await (await get('/releases/2025-r1/item.json')).json()) as any;
    expect(item).toMatchObject({ type: 'Feature', stac_version: '1.0.0', id: '2025-r1', collection: 'flood-reports', properties: { datetime: null, start_datetime: '2025-01-01T00:00:00.000Z', 'flood:reports': 31 } });
    expect(item.bbox).toHaveLength(4);
    const m = await manifestOf('2025-r1');
    for (const asset of Object.values(item.assets) as any[]) {
      const res = await get(`/releases/2025-r1/${asset.href.replace('./', '')}`);
      expect([asset.href, res.status]).toEqual([asset.href, 200]);
      const body = Buffer.from(await res.arrayBuffer());
      if (asset.roles.includes('data')) expect([asset.href, asset['file:checksum'], asset['file:size']]).toEqual([asset.href, `1220${sha256(body)}`, body.length]);
    }
    expect(Object.values(item.assets).filter((a: any) => a.roles.includes('data'))).toHaveLength(m.files.length);
    const cff = await (await get('/releases/2025-r1/CITATION.cff')).text();
    expect(cff).toContain('cff-version: 1.2.0');
    // The URL the citation gives: to the STAC Item, the Location alone (no body), as the document has it.
    const landing = await fetch(`${svc.url}/releases/2025-r1/`, { headers: UA, redirect: 'manual' });
    expect([landing.status, landing.headers.get('location'), await landing.text()]).toEqual([302, `${svc.url}/releases/2025-r1/item.json`, '']);
    const doc = (await (await get('/openapi.json')).json()) as any;
    expect(Object.keys(doc.paths['/releases/{release}/'].get.responses)).toContain('302');
    expect(cff).toContain('version: "2025-r1"');
    // The boundaries' attribution as their publisher wrote it, once.
    expect(cff).toMatch(/^abstract: ".* as the archive answered on \S+Z\. Boundaries: PSA and NAMRIA 2023 [^"]*\)\."$/m);
    expect(cff).toContain(`sha256:${sha256(Buffer.from(await (await get('/releases/2025-r1/manifest.json')).arrayBuffer()))}`);

    // Read-only, at a stable URL: ranges, validators, immutable caching.
    const whole = await get('/releases/2025-r1/reports-2025-06.parquet');
    const etag = whole.headers.get('etag')!;
    expect(etag).toMatch(/^"[^"]+"$/);
    expect(whole.headers.get('cache-control')).toMatch(/immutable/);
    // Last-Modified is when the file was stored, the same from every API task and after its copy
    // here is gone, not when this process copied it.
    const stored = (await svc.rt.store.head('releases/2025-r1/reports-2025-06.parquet'))!.lastModified.toUTCString();
    expect(whole.headers.get('last-modified')).toBe(stored);
    await new Promise((r) => setTimeout(r, 1_100));
    await fs.rm(path.join(svc.rt.config.cacheDir, 'release-files'), { recursive: true, force: true });
    expect((await get('/releases/2025-r1/reports-2025-06.parquet')).headers.get('last-modified')).toBe(stored);
    expect(whole.headers.get('content-type')).toBe('application/vnd.apache.parquet');
    const size = Number(whole.headers.get('content-length'));
    const head = await get('/releases/2025-r1/reports-2025-06.parquet', { Range: 'bytes=0-3' });
    expect([head.status, Buffer.from(await head.arrayBuffer()).toString()]).toEqual([206, 'PAR1']);
    // The range unit in any case (RFC 9110 14.1).
    const cased = await get('/releases/2025-r1/reports-2025-06.parquet', { Range: 'Bytes=0-3' });
    expect([cased.status, Buffer.from(await cased.arrayBuffer()).toString()]).toEqual([206, 'PAR1']);
    const tail = await get('/releases/2025-r1/reports-2025-06.parquet', { Range: `bytes=${size - 4}-` });
    expect([tail.status, Buffer.from(await tail.arrayBuffer()).toString()]).toEqual([206, 'PAR1']);
    // A reader of Parquet footers asks for a fixed suffix, whatever the size: longer than the
    // file, it is the whole file (RFC 9110 14.1.3), not a 416.
    const footer = await get('/releases/2025-r1/reports-2025-06.parquet', { Range: `bytes=-${size + 65_536}` });
    expect([footer.status, footer.headers.get('content-range'), (await footer.arrayBuffer()).byteLength]).toEqual([206, `bytes 0-${size - 1}/${size}`, size]);
    const lastFour = await get('/releases/2025-r1/reports-2025-06.parquet', { Range: 'bytes=-4' });
    expect([lastFour.status, Buffer.from(await lastFour.arrayBuffer()).toString()]).toEqual([206, 'PAR1']);
    const again = await get('/releases/2025-r1/reports-2025-06.parquet', { 'If-None-Match': etag });
    // Validators alone on a 304 (RFC 9110 15.4.5), no representation's headers.
    expect([again.status, again.headers.get('etag'), again.headers.get('content-type')]).toEqual([304, etag, null]);
    // Range is for GET: a HEAD with one gives the whole file's headers.
    for (const range of ['bytes=0-3', `bytes=${size + 10}-`]) {
      const headRange = await fetch(`${svc.url}/releases/2025-r1/reports-2025-06.parquet`, { method: 'HEAD', headers: { ...UA, Range: range } });
      expect([range, headRange.status, headRange.headers.get('content-length'), headRange.headers.get('content-range')]).toEqual([range, 200, String(size), null]);
    }
    const unsatisfiable = await get('/releases/2025-r1/reports-2025-06.parquet', { Range: `bytes=${size + 10}-` });
    expect([unsatisfiable.status, ((await unsatisfiable.json()) as any).error, unsatisfiable.headers.get('content-range')]).toEqual([416, 'Range Not Satisfiable', `bytes */${size}`]);
    const otherVersion = await get('/releases/2025-r1/reports-2025-06.parquet', { 'If-Match': '"another"' });
    expect([otherVersion.status, ((await otherVersion.json()) as any).details[0].field]).toEqual([412, 'If-Match']);
    // If-Match before If-None-Match (RFC 9110 §13.2.2): a 412 even when If-None-Match names the file.
    const bothOther = await get('/releases/2025-r1/reports-2025-06.parquet', { 'If-Match': '"another"', 'If-None-Match': etag });
    expect(bothOther.status).toBe(412);
    expect((await get('/releases/2025-r1/reports-2025-06.parquet', { 'If-Match': etag, 'If-None-Match': etag })).status).toBe(304);
    expect((await get('/releases/2025-r1/reports-2025-06.parquet', { 'If-Unmodified-Since': 'Mon, 01 Jan 2001 00:00:00 GMT', 'If-None-Match': etag })).status).toBe(412);
    // If-Range (RFC 9110): the range only for the strong ETag or the exact date, else the whole file.
    for (const [ifRange, status] of [[etag, 206], [`W/${etag}`, 200], ['"another"', 200], [stored, 206], [new Date(Date.parse(stored) - 1_000).toUTCString(), 200]] as const) {
      const res = await get('/releases/2025-r1/reports-2025-06.parquet', { Range: 'bytes=0-3', 'If-Range': ifRange });
      expect([ifRange, res.status, (await res.arrayBuffer()).byteLength]).toEqual([ifRange, status, status === 206 ? 4 : size]);
    }
    // Ranges from other origins (a browser's Parquet reader): the headers it needs are exposed.
    const preflight = await fetch(`${svc.url}/releases/2025-r1/reports-2025-06.parquet`, { method: 'OPTIONS', headers: { Origin: 'https://stac.example.org', 'Access-Control-Request-Method': 'GET', 'Access-Control-Request-Headers': 'range, if-range' } });
    expect(preflight.headers.get('access-control-allow-headers')).toMatch(/(^|, )If-Range(,|$)/);
    expect(preflight.headers.get('access-control-allow-headers')).toMatch(/(^|, )Range(,|$)/);
    expect(whole.headers.get('access-control-expose-headers')).toMatch(/Content-Range/);
    // A copy read from the store that is not the file its manifest describes is neither served nor kept.
    const julyKey = 'releases/2025-r1/reports-2025-07.csv.gz';
    const july = (await svc.rt.store.get(julyKey))!.body;
    await svc.rt.store.put(julyKey, Buffer.concat([july, Buffer.from('x')]));
    const torn = await get('/releases/2025-r1/reports-2025-07.csv.gz');
    expect([torn.status, ((await torn.json()) as any).statusCode]).toEqual([503, 503]);
    expect(await fs.readdir(path.join(svc.rt.config.cacheDir, 'release-files'))).not.toContain('2025-r1--reports-2025-07.csv.gz');
    await svc.rt.store.put(julyKey, july);
    const mended = await get('/releases/2025-r1/reports-2025-07.csv.gz');
    expect(sha256(Buffer.from(await mended.arrayBuffer()))).toBe(m.files.find((f) => f.path === 'reports-2025-07.csv.gz')!.sha256);
    // A revision not published yet (its manifest is written last) is not served, nor kept.
    await svc.rt.store.put('releases/2025-r7/item.json', '{}');
    const longId = `2025-r${'1'.repeat(300)}`;
    for (const missing of ['/releases/2025-r9/manifest.json', '/releases/2025-r7/item.json', `/releases/${longId}/manifest.json`, `/releases/${longId}/`, '/releases/2025-r1/other.txt', '/releases/nope/manifest.json', '/releases/other.json']) {
      const res = await get(missing);
      expect([missing, res.status]).toEqual([missing, 404]);
      expect((await res.json()) as any).toMatchObject({ statusCode: 404, error: 'Not Found' });
    }
    await svc.rt.store.delete(['releases/2025-r7/item.json']);
    expect((await fs.readdir(path.join(svc.rt.config.cacheDir, 'release-files'))).filter((f) => !f.startsWith('2025-r1--'))).toEqual([]);
    // The release's own URL, as its citation gives it (with PUBLIC_BASE_URL): its STAC Item.
    for (const own of ['/releases/2025-r1/', '/releases/2025-r1']) {
      const res = await get(own);
      expect([own, res.status, res.headers.get('location')]).toEqual([own, 200, null]);
      expect(res.url).toBe(`${svc.url}/releases/2025-r1/item.json`);
      expect(((await res.json()) as any).id).toBe('2025-r1');
    }
    const listed = await getJson(`${svc.url}/releases`);
    expect(listed.body.result.releases.map((r: any) => [r.release, r.reports, r.files.length])).toEqual([['2025-r1', 31, 24]]);
    expect(listed.body.result.releases[0].files[0].url).toBe(`${svc.url}/releases/2025-r1/reports-2025-01.parquet`);
  });

  it('lives on when clients hang up on the index, the listing and the files, with gzip and without, before the answer and after its first bytes', async () => {
    const paths = ['/releases', '/releases/catalog.json', '/releases/collection.json', '/releases/2025-r1/reports-2025-06.parquet', '/releases/2025-r1/reports-2025-06.csv.gz'];
    const hangUp = (p: string, encoding: string, when: 'at once' | 'first bytes') =>
      new Promise<void>((resolve, reject) => {
        const req = http.get(`${svc.url}${p}`, { headers: { ...UA, 'Accept-Encoding': encoding } }, (res) => {
          res.once('data', () => req.destroy());
          res.on('close', () => resolve());
        });
        req.on('error', (err) => (req.destroyed ? resolve() : reject(err)));
        if (when === 'at once') setImmediate(() => req.destroy());
      });
    for (const p of paths) for (const encoding of ['gzip', 'identity']) for (const when of ['at once', 'first bytes'] as const) await hangUp(p, encoding, when);
    // The process answers on, in full.
    expect((await get('/health')).status).toBe(200);
    const m = await manifestOf('2025-r1');
    for (const f of m.files.filter((file) => file.month === '2025-06')) expect(sha256(Buffer.from(await (await get(`/releases/2025-r1/${f.path}`)).arrayBuffer()))).toBe(f.sha256);
    expect((await get('/releases/collection.json', { 'Accept-Encoding': 'gzip' })).status).toBe(200);
  });

  it('makes no new revision for the same reports; a retraction purged since makes the next, beside the first, which stays as it was', async () => {
    const first = await manifestOf('2025-r1');
    // As a run stopped after its manifest, before its citation and Item: the next run of the
    // same reports writes them, the same bytes.
    const described = ['releases/2025-r1/CITATION.cff', 'releases/2025-r1/item.json'];
    const bodies = await Promise.all(described.map(async (key) => (await svc.rt.store.get(key))!.body));
    await svc.rt.store.delete(described);
    const again = await release(svc.rt, '2025');
    expect(again).toMatchObject({ release: '2025-r1', created: false });
    expect(await Promise.all(described.map(async (key) => (await svc.rt.store.get(key))?.body))).toEqual(bodies);

    // The index as the first revision left it: the API's is the stored one, byte for byte.
    const indexOfFirst = (await svc.rt.store.get('releases/collection.json'))!.body;
    expect(Buffer.from(await (await get('/releases/collection.json')).arrayBuffer())).toEqual(indexOfFirst);

    const del = await fetch(`${svc.url}/feeds/partner/105`, { method: 'DELETE', headers: { ...UA, 'X-Api-Key': API_KEY } });
    expect(del.status).toBe(200);
    await purgeRetracted(svc.rt);
    await compact(svc.rt, { fromMs: Date.UTC(2025, 5, 1), toMs: Date.UTC(2025, 5, 30, 23), closedBeforeMs: Date.now() });
    const next = await release(svc.rt, '2025');
    expect(next).toMatchObject({ release: '2025-r2', created: true, reports: 30 });
    const m = await manifestOf('2025-r2');
    expect(m.changes.map((c) => c.revision)).toEqual([1, 2]);
    expect(m.changes[1]!.note).toBe('Since 2025-r1: 2025-06: 0 added, 1 removed, 0 changed (20 → 19 reports).');
    const file = (man: Manifest, p: string) => man.files.find((f) => f.path === p)!;
    expect(file(m, 'reports-2025-06.parquet').sha256).not.toBe(file(first, 'reports-2025-06.parquet').sha256);
    expect(file(m, 'reports-2025-07.parquet').sha256).toBe(file(first, 'reports-2025-07.parquet').sha256);
    // The first revision, byte for byte as it was.
    for (const f of first.files) expect(sha256(Buffer.from(await (await get(`/releases/2025-r1/${f.path}`)).arrayBuffer()))).toBe(f.sha256);
    expect(await manifestOf('2025-r1')).toEqual(first);
    const item = (await (await get('/releases/2025-r2/item.json')).json()) as any;
    expect(item.links).toContainEqual({ rel: 'predecessor-version', href: '../2025-r1/item.json', type: 'application/geo+json' });
    const june = gunzipSync(Buffer.from(await (await get('/releases/2025-r2/reports-2025-06.csv.gz')).arrayBuffer())).toString('utf8');
    expect(june).not.toContain(pkeyOf(105));
    const collection = (await (await get('/releases/collection.json')).json()) as any;
    expect(collection.links.filter((l: any) => l.rel === 'item').map((l: any) => l.href)).toEqual(['./2025-r1/item.json', './2025-r2/item.json']);
    // A run stopped after publishing r2, before it rewrote the stored index (the bucket's, a
    // release behind until the next run): the API's index still lists what /releases lists.
    const stored = (await svc.rt.store.get('releases/collection.json'))!.body;
    await svc.rt.store.put('releases/collection.json', indexOfFirst);
    const served = await get('/releases/collection.json');
    expect(Buffer.from(await served.arrayBuffer())).toEqual(stored);
    const listed = (await getJson(`${svc.url}/releases`)).body.result.releases.map((r: any) => `./${r.release}/item.json`);
    expect(collection.links.filter((l: any) => l.rel === 'item').map((l: any) => l.href)).toEqual(listed);
    await svc.rt.store.put('releases/collection.json', stored);
  }, 120_000);

  it('finishes a revision whose run stopped before its manifest, and passes by a folder a dead run left other bytes in', async () => {
    const made = await manifestOf('2025-r2');
    // As if the run had stopped before its manifest (so before its Item and citation): the next run makes the same revision.
    await svc.rt.store.delete(['releases/2025-r2/manifest.json', 'releases/2025-r2/item.json', 'releases/2025-r2/CITATION.cff']);
    expect((await getJson(`${svc.url}/releases`)).body.result.releases.map((r: any) => r.release)).toEqual(['2025-r1']);
    expect(await release(svc.rt, '2025')).toMatchObject({ release: '2025-r2', created: true });
    expect((await manifestOf('2025-r2')).files).toEqual(made.files);
    // A run that died before its manifest left other bytes where this run's file goes (the
    // reports changed since): its files are removed (they may hold a report retracted since;
    // its number stays unused) and the release is the next revision, whose checksums are its files' and whose
    // predecessor is the revision published before it. A run stopped before the Item of an
    // earlier revision has it written by this one.
    const del = await fetch(`${svc.url}/feeds/partner/106`, { method: 'DELETE', headers: { ...UA, 'X-Api-Key': API_KEY } });
    expect(del.status).toBe(200);
    await purgeRetracted(svc.rt);
    await svc.rt.store.put('releases/2025-r3/reports-2025-06.parquet', Buffer.from('other bytes'));
    const r2Item = (await svc.rt.store.get('releases/2025-r2/item.json'))!.body;
    await svc.rt.store.delete(['releases/2025-r2/item.json']);
    const later = await release(svc.rt, '2025');
    expect(later).toMatchObject({ release: '2025-r4', created: true, reports: 29 });
    expect(await keysUnder(svc.rt, 'releases/2025-r3/')).toEqual([]);
    const r4 = await manifestOf('2025-r4');
    expect(r4.changes.map((c) => c.revision)).toEqual([1, 2, 4]);
    const june = r4.files.find((f) => f.path === 'reports-2025-06.parquet')!;
    expect(sha256((await svc.rt.store.get('releases/2025-r4/reports-2025-06.parquet'))!.body)).toBe(june.sha256);
    const item = (await (await get('/releases/2025-r4/item.json')).json()) as any;
    expect(item.links).toContainEqual({ rel: 'predecessor-version', href: '../2025-r2/item.json', type: 'application/geo+json' });
    expect(item.properties).toMatchObject({ version: '4', 'flood:revision': 4 });
    expect((await svc.rt.store.get('releases/2025-r2/item.json'))?.body).toEqual(r2Item);
    // The run gave its lock back.
    expect(await svc.rt.store.get(releaseLockKey('2025'))).toBeUndefined();
  }, 120_000);

  it('removes after each run what dead runs left in any period no other run is making (never published, it may hold reports retracted since); a period whose run holds its lock is left to it', async () => {
    const elsewhere = JSON.stringify({ host: 'another-host', pid: 1, id: 'elsewhere', since: new Date().toISOString(), touched: new Date().toISOString() });
    // A run of 2024 killed before its manifest, never run again; one of 2023-05 at work on another host.
    await svc.rt.store.put('releases/2024-r1/reports-2024-03.parquet', Buffer.from('a dead run of 2024'));
    await svc.rt.store.put('releases/2024-r1/reports-2024-03.csv.gz', Buffer.from('a dead run of 2024'));
    await svc.rt.store.put('releases/2023-05-r2/reports-2023-05.parquet', Buffer.from('a run of 2023-05 at work'));
    await svc.rt.store.put(releaseLockKey('2023-05'), elsewhere);
    // A dead run of this run's own period, numbered past the revision this run comes to.
    await svc.rt.store.put('releases/2025-r9/reports-2025-06.parquet', Buffer.from('a dead run of 2025'));
    const published = await keysUnder(svc.rt, 'releases/2025-r4/');

    expect(await release(svc.rt, '2025')).toMatchObject({ release: '2025-r4', created: false });
    expect(await keysUnder(svc.rt, 'releases/2024-r1/')).toEqual([]);
    expect(await keysUnder(svc.rt, 'releases/2025-r9/')).toEqual([]);
    expect(await keysUnder(svc.rt, 'releases/2025-r4/')).toEqual(published);
    expect(await keysUnder(svc.rt, 'releases/2023-05-r2/')).toEqual(['releases/2023-05-r2/reports-2023-05.parquet']);
    // 2024's lock taken for the moment and given back; 2023-05's still its holder's.
    expect(await svc.rt.store.get(releaseLockKey('2024'))).toBeUndefined();
    expect((await svc.rt.store.get(releaseLockKey('2023-05')))?.body.toString('utf8')).toBe(elsewhere);
    await svc.rt.store.delete([releaseLockKey('2023-05'), 'releases/2023-05-r2/reports-2023-05.parquet']);
    // A run of a period with no report (the monthly job's empty months) removes them too.
    await svc.rt.store.put('releases/2024-r1/reports-2024-03.parquet', Buffer.from('a dead run of 2024'));
    await expect(release(svc.rt, '2019-02')).rejects.toThrow(/holds no report/);
    expect(await keysUnder(svc.rt, 'releases/2024-r1/')).toEqual([]);
  }, 120_000);

  it('serves a release once its citation and Item are written: one whose run stopped after its manifest is neither listed nor served until the next run writes them', async () => {
    // The run stops as it writes the release's citation, after its manifest.
    const store = Object.assign(Object.create(svc.rt.store) as typeof svc.rt.store, {
      putIfAbsent: async (key: string, body: string | Buffer) => {
        if (key === 'releases/2025-07-r1/CITATION.cff') throw new Error('killed after the manifest');
        return svc.rt.store.putIfAbsent(key, body);
      },
    });
    await expect(release({ ...svc.rt, store }, '2025-07')).rejects.toThrow(/killed after the manifest/);
    expect(await svc.rt.store.head('releases/2025-07-r1/manifest.json')).toBeDefined();
    const ids = async () => (await getJson(`${svc.url}/releases`)).body.result.releases.map((r: any) => r.release);
    expect(await ids()).not.toContain('2025-07-r1');
    for (const file of ['reports-2025-07.parquet', 'manifest.json', 'item.json', 'CITATION.cff', '']) {
      expect([file, (await get(`/releases/2025-07-r1/${file}`)).status]).toEqual([file, 404]);
    }
    // The next run makes no new revision for the same reports, and writes what the stopped one did not.
    expect(await release(svc.rt, '2025-07')).toMatchObject({ release: '2025-07-r1', created: false });
    expect(await ids()).toContain('2025-07-r1');
    for (const file of ['reports-2025-07.parquet', 'manifest.json', 'item.json', 'CITATION.cff']) {
      expect([file, (await get(`/releases/2025-07-r1/${file}`)).status]).toEqual([file, 200]);
    }
    const cited = await get('/releases/2025-07-r1/', {});
    expect(cited.url).toMatch(/\/releases\/2025-07-r1\/item\.json$/);
    // Gone again, so that the monthly job's months are those the tests below expect (a month released is its first).
    await svc.rt.store.delete(await keysUnder(svc.rt, 'releases/2025-07-r1/'));
  }, 120_000);

  it('makes a period\'s release one run at a time: a second is refused, and a run whose lock was taken over publishes nothing', async () => {
    const listed = async () => (await getJson(`${svc.url}/releases`)).body.result.releases.map((r: any) => r.release) as string[];
    const before = await listed();
    const del = await fetch(`${svc.url}/feeds/partner/107`, { method: 'DELETE', headers: { ...UA, 'X-Api-Key': API_KEY } });
    expect(del.status).toBe(200);
    await purgeRetracted(svc.rt);
    // Another run of 2025 at work (by hand on another host, say): this one is refused and writes
    // nothing; the monthly job leaves the period to it rather than failing.
    const elsewhere = JSON.stringify({ host: 'another-host', pid: 1, id: 'elsewhere', since: new Date().toISOString(), touched: new Date().toISOString() });
    await svc.rt.store.put(releaseLockKey('2025'), elsewhere);
    const refused = await release(svc.rt, '2025').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ReleaseRunningError);
    expect((refused as Error).message).toMatch(/another release of 2025 is running on this archive/);
    expect(await keysUnder(svc.rt, 'releases/2025-r5')).toEqual([]);
    // The job releases the month just closed, whenever the suite runs.
    const closed = lastMonth(Date.now());
    await svc.rt.store.put(releaseLockKey(closed), elsewhere);
    const ran = (await releaseJob.run(svc.rt)) as { running: string[] };
    expect(ran.running).toContain(closed);
    // Its first run noted the first month it set out to release: made up next month should it fail.
    expect(JSON.parse((await svc.rt.store.get(RELEASE_SINCE_KEY))!.body.toString('utf8'))).toEqual({ month: closed });
    expect(await keysUnder(svc.rt, `releases/${closed}-r`)).toEqual([]);
    await svc.rt.store.delete([releaseLockKey(closed)]);
    // A run whose lock is taken over while it writes its files (its touches had failed for five
    // minutes, say, and a later run took the period over) stops before its manifest: a revision
    // is never published after a later one.
    await svc.rt.store.delete([releaseLockKey('2025')]);
    let takenOver = false;
    let seen!: () => void;
    const seenTaken = new Promise<void>((resolve) => (seen = resolve));
    // The run's touches of its lock under way: fauxqs ignores If-Match, so a touch sent before the
    // takeover and landing after it would write over it, where S3 refuses a version read before.
    const touches = new Set<Promise<void>>();
    const store = Object.assign(Object.create(svc.rt.store) as typeof svc.rt.store, {
      putIfAbsent: async (key: string, body: string | Buffer) => {
        if (key.startsWith('releases/2025-r5/') && !takenOver) {
          takenOver = true;
          await Promise.all(touches);
          await svc.rt.store.put(releaseLockKey('2025'), elsewhere);
          await seenTaken;
        }
        return svc.rt.store.putIfAbsent(key, body);
      },
      putIfMatch: async (key: string, body: string | Buffer, etag: string) => {
        if (key !== releaseLockKey('2025')) return svc.rt.store.putIfMatch(key, body, etag);
        // Read before the takeover (one read after it finds the lock another's and writes nothing): S3 refuses it.
        if (takenOver) return false;
        const written = svc.rt.store.putIfMatch(key, body, etag);
        const settled = written.then(() => undefined, () => undefined);
        touches.add(settled);
        void settled.then(() => touches.delete(settled));
        return written;
      },
      get: async (key: string) => {
        const got = await svc.rt.store.get(key);
        // The run's touch reads the lock and finds it another's (a read begun before the takeover
        // landed finds it still the run's, and does not count).
        if (takenOver && key === releaseLockKey('2025') && got && JSON.parse(got.body.toString('utf8')).id === 'elsewhere') setTimeout(seen, 0);
        return got;
      },
    });
    const lost = await release({ ...svc.rt, store }, '2025', { lockTouchMs: 20 }).catch((e: unknown) => e);
    expect(lost).toBeInstanceOf(ReleaseLockLostError);
    expect((lost as Error).message).toMatch(/this release of 2025 lost the archive's lock/);
    expect(await svc.rt.store.get('releases/2025-r5/manifest.json')).toBeUndefined();
    expect(await listed()).toEqual(before);
    // Left to its new holder.
    expect(JSON.parse((await svc.rt.store.get(releaseLockKey('2025')))!.body.toString('utf8')).id).toBe('elsewhere');
    await svc.rt.store.delete([releaseLockKey('2025')]);
    // The next run makes the revision after the folder the stopped run left.
    expect(await release(svc.rt, '2025')).toMatchObject({ release: '2025-r5', created: true, reports: 28 });
  }, 120_000);

  it('a run that stalled past its lock, whose touch has not yet seen the takeover, stops at its successor\'s files or before its manifest: never a revision beside its successor\'s', async () => {
    const listed = async () => (await getJson(`${svc.url}/releases`)).body.result.releases.map((r: any) => r.release) as string[];
    const before = await listed();
    const latest = await manifestOf(before.at(-1)!);
    const [next, after] = [1, 2].map((n) => `2025-r${latest.revision + n}`) as [string, string];
    const successor = JSON.stringify({ host: 'another-host', pid: 1, id: 'successor', since: new Date().toISOString(), touched: new Date().toISOString() });
    expect((await fetch(`${svc.url}/feeds/partner/109`, { method: 'DELETE', headers: { ...UA, 'X-Api-Key': API_KEY } })).status).toBe(200);
    await purgeRetracted(svc.rt);
    // The successor took the lock over and is writing the next revision's files as this run
    // comes to write its own there (the minute's touch, which would have told it, not yet due).
    let tookOver = false;
    const atFiles = Object.assign(Object.create(svc.rt.store) as typeof svc.rt.store, {
      putIfAbsent: async (key: string, body: string | Buffer) => {
        if (key.startsWith(`releases/${next}/`) && !tookOver) {
          tookOver = true;
          await svc.rt.store.put(releaseLockKey('2025'), successor);
          await svc.rt.store.put(key, Buffer.from("the successor's bytes"));
        }
        return svc.rt.store.putIfAbsent(key, body);
      },
    });
    const stopped = await release({ ...svc.rt, store: atFiles }, '2025').catch((e: unknown) => e);
    expect(tookOver).toBe(true);
    expect(stopped).toBeInstanceOf(ReleaseLockLostError);
    expect(await keysUnder(svc.rt, `releases/${after}/`)).toEqual([]);
    expect(await listed()).toEqual(before);
    expect(JSON.parse((await svc.rt.store.get(releaseLockKey('2025')))!.body.toString('utf8')).id).toBe('successor');
    await svc.rt.store.delete([releaseLockKey('2025'), ...(await keysUnder(svc.rt, `releases/${next}/`))]);
    // Taken over once this run's files are written, just before its manifest: no manifest.
    let writing = false;
    let beforeManifest = false;
    const atManifest = Object.assign(Object.create(svc.rt.store) as typeof svc.rt.store, {
      putIfAbsent: async (key: string, body: string | Buffer) => {
        writing ||= key.startsWith(`releases/${next}/`);
        return svc.rt.store.putIfAbsent(key, body);
      },
      // Its files written, the run lists the releases for a later one: then the takeover.
      list: (options: Parameters<typeof svc.rt.store.list>[0]) => {
        if (writing && !beforeManifest) {
          beforeManifest = true;
          return (async function* () {
            await svc.rt.store.put(releaseLockKey('2025'), successor);
            yield* svc.rt.store.list(options);
          })();
        }
        return svc.rt.store.list(options);
      },
    });
    const late = await release({ ...svc.rt, store: atManifest }, '2025').catch((e: unknown) => e);
    expect(beforeManifest).toBe(true);
    expect(late).toBeInstanceOf(ReleaseLockLostError);
    expect(await svc.rt.store.get(`releases/${next}/manifest.json`)).toBeUndefined();
    expect(await listed()).toEqual(before);
    await svc.rt.store.delete([releaseLockKey('2025')]);
    // The run that holds the lock finishes that revision (its files are this run's very bytes).
    expect(await release(svc.rt, '2025')).toMatchObject({ release: next, created: true });
  }, 120_000);

  it('writes a month again when a purge comes between its two reads: the CSV holds what the Parquet file holds', async () => {
    const latest = (await getJson(`${svc.url}/releases`)).body.result.releases.at(-1).release as string;
    // The purge of a report retracted just after the month's Parquet file was written, before its CSV is read.
    const racing = betweenReads(Date.UTC(2025, 6, 1), async () => {
      expect((await fetch(`${svc.url}/feeds/partner/205`, { method: 'DELETE', headers: { ...UA, 'X-Api-Key': API_KEY } })).status).toBe(200);
      await purgeRetracted(svc.rt);
    });
    /** July's reports in a release: the same in both files, and as many as its manifest says. */
    const july = async (id: string) => {
      const files = (await manifestOf(id)).files.filter((f) => f.month === '2025-07');
      expect(files[0]!.reports).toBe(files[1]!.reports);
      const csv = (await svc.rt.store.get(`releases/${id}/reports-2025-07.csv.gz`))!.body;
      expect(gunzipSync(csv).toString('utf8').split('\n').filter((l) => l !== '')).toHaveLength(1 + files[1]!.reports);
      return files[1]!.reports;
    };
    const made = await release(racing.rt, '2025');
    expect(racing.ran()).toBe(true);
    // Both files from the month with the report (the copies read before the purge, on S3) or without it.
    expect([10, 9]).toContain(await july(made.release));
    const next = await release(svc.rt, '2025');
    expect(next.release).not.toBe(latest);
    expect(await july(next.release)).toBe(9);
  });

  it('publishes nothing when a revision after the one it read as the latest appeared meanwhile: its changelog would skip that one', async () => {
    const listed = async () => (await getJson(`${svc.url}/releases`)).body.result.releases.map((r: any) => r.release) as string[];
    const before = await listed();
    const latest = await manifestOf(before.at(-1)!);
    const next = `2025-r${latest.revision + 1}`;
    const after = `2025-r${latest.revision + 2}`;
    expect((await fetch(`${svc.url}/feeds/partner/108`, { method: 'DELETE', headers: { ...UA, 'X-Api-Key': API_KEY } })).status).toBe(200);
    await purgeRetracted(svc.rt);
    // Another run at work on the next revision (this run took its lock over: that run had
    // stalled, or its host's clock is ahead): its file differs, so this run passes to the one
    // after; while this run writes, that run publishes its manifest.
    await svc.rt.store.put(`releases/${next}/reports-2025-06.parquet`, Buffer.from('another run'));
    let published = false;
    const store = Object.assign(Object.create(svc.rt.store) as typeof svc.rt.store, {
      putIfAbsent: async (key: string, body: string | Buffer) => {
        if (key.startsWith(`releases/${after}/`) && !published) {
          published = true;
          await svc.rt.store.put(`releases/${next}/manifest.json`, `${JSON.stringify({ ...latest, release: next, revision: latest.revision + 1 }, null, 2)}\n`);
        }
        return svc.rt.store.putIfAbsent(key, body);
      },
    });
    const refused = await release({ ...svc.rt, store }, '2025').catch((e: unknown) => e);
    expect(published).toBe(true);
    expect(refused).toBeInstanceOf(ReleaseRunningError);
    expect((refused as Error).message).toMatch(new RegExp(`${next} was made by another run meanwhile`));
    expect(await svc.rt.store.get(`releases/${after}/manifest.json`)).toBeUndefined();
    // That run's revision stands in for the test's: gone, the next run publishes after its folder, naming every revision before.
    await svc.rt.store.delete(await keysUnder(svc.rt, `releases/${next}/`));
    const made = await release(svc.rt, '2025');
    expect(made).toMatchObject({ created: true });
    expect((await manifestOf(made.release)).changes.map((c) => c.revision)).toEqual([...latest.changes.map((c) => c.revision), (await manifestOf(made.release)).revision]);
    expect(await listed()).toEqual([...before, made.release]);
  });

  it('makes no new revision for the same reports written as other bytes (as a new DuckDB or zlib writes them)', async () => {
    const { release: id } = await release(svc.rt, '2025');
    const manifestKey = `releases/${id}/manifest.json`;
    const m = JSON.parse((await svc.rt.store.get(manifestKey))!.body.toString('utf8')) as Manifest;
    // As an earlier release wrote them: June's Parquet file with other compression, its CSV at
    // another gzip level; the same rows and the same text.
    const dir = await tempDir();
    const [parquetKey, csvKey] = ['reports-2025-06.parquet', 'reports-2025-06.csv.gz'].map((f) => `releases/${id}/${f}`) as [string, string];
    const was = path.join(dir, 'was.parquet');
    const other = path.join(dir, 'other.parquet');
    await fs.writeFile(was, (await svc.rt.store.get(parquetKey))!.body);
    await svc.rt.db.withConnection((conn) => conn.run(`COPY (SELECT * FROM read_parquet(${sqlString(was)})) TO ${sqlString(other)} (FORMAT parquet, COMPRESSION snappy)`));
    const bodies = new Map([
      [parquetKey, await fs.readFile(other)],
      [csvKey, gzipSync(gunzipSync((await svc.rt.store.get(csvKey))!.body), { level: 1 })],
    ]);
    for (const [key, body] of bodies) {
      await svc.rt.store.put(key, body);
      const f = m.files.find((x) => key.endsWith(x.path))!;
      expect(sha256(body)).not.toBe(f.sha256);
      Object.assign(f, { sha256: sha256(body), bytes: body.length });
    }
    await svc.rt.store.put(manifestKey, `${JSON.stringify(m, null, 2)}\n`);
    expect(await release(svc.rt, '2025')).toMatchObject({ release: id, created: false });
  });

  it('refuses a period that is not over, or not a year or month', async () => {
    // This year and this month (UTC) are not over, whenever the suite runs.
    const now = new Date().toISOString();
    for (const period of [now.slice(0, 4), now.slice(0, 7), '2025-13', '25', 'last-year']) {
      const err = await release(svc.rt, period).catch((e: unknown) => e);
      expect([period, err instanceof ReleaseError && err.usage]).toEqual([period, true]);
    }
    if (kind === 'embedded') {
      const run = await runCli(['release', '--period', '2099'], { DATA_DIR: svc.rt.config.dataDir, API_KEYS: API_KEY });
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(/--period 2099 is not over until 2100-01-01T00:00:00.000Z/);
    }
  });

  it('makes no first release of a period without reports (a mistyped period), and the monthly job passes such months by', async () => {
    const err = await release(svc.rt, '2019-03').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NothingToReleaseError);
    expect((err as ReleaseError).usage).toBe(true);
    expect(await keysUnder(svc.rt, 'releases/2019-03')).toEqual([]);
    if (kind === 'embedded') {
      const run = await runCli(['release', '--period', '2019'], { DATA_DIR: svc.rt.config.dataDir, API_KEYS: API_KEY });
      expect([run.code, run.stderr]).toEqual([2, expect.stringMatching(/^2019 holds no report: nothing to release$/m)]);
    }
    // The last twelve closed months: those without reports are passed by, the job does not fail.
    const ran = (await releaseJob.run(svc.rt)) as { releases: { release: string; reports: number }[]; empty: string[] };
    expect(ran.empty.length).toBeGreaterThan(0);
    expect(ran.releases.every((r) => r.reports > 0)).toBe(true);
    for (const period of ran.empty) expect(await keysUnder(svc.rt, `releases/${period}-r`)).toEqual([]);
  }, 120_000);

  it('writes a month again when its parts are re-tagged between its two reads (as many reports, other tags): its two files hold the same tags', async () => {
    // The whole country published, then July re-tagged just after its Parquet file was written.
    const twoCities = (await svc.rt.boundaries.latest()).version;
    await svc.rt.boundaries.publish(await loadNationalBoundaries());
    const JULY = { fromMs: Date.UTC(2025, 6, 1), toMs: Date.UTC(2025, 7, 1) - 1 };
    const racing = betweenReads(JULY.fromMs, async () => {
      expect((await reprocess(svc.rt, { ...JULY, dryRun: false })).hoursRewritten).toBeGreaterThan(0);
    });
    const made = await release(racing.rt, '2025');
    expect(racing.ran()).toBe(true);
    // July's Parquet file and CSV: the same reports with the same tags (the old ones where the CSV
    // was read from copies taken before, the new ones where it read the new parts), never a mix.
    const parquet = path.join(svc.rt.config.dataDir, 'july.parquet');
    await fs.writeFile(parquet, (await svc.rt.store.get(`releases/${made.release}/reports-2025-07.parquet`))!.body);
    const inParquet = await svc.rt.db.withConnection(async (conn) => (await conn.runAndReadAll(`SELECT pkey, coalesce(region_code, '') FROM read_parquet(${sqlString(parquet)}) ORDER BY pkey`)).getRowsJS());
    const rows = parseCsv(gunzipSync((await svc.rt.store.get(`releases/${made.release}/reports-2025-07.csv.gz`))!.body), { columns: true }) as { pkey: string; region_code: string }[];
    const inCsv = rows.map((r) => [r.pkey, r.region_code]).sort((a, b) => (a[0]! < b[0]! ? -1 : 1));
    expect(inParquet.length).toBeGreaterThan(0);
    expect(inCsv).toEqual(inParquet);

    // June's and December's reports still carry the version they were tagged with; July's carry
    // the national one where its files were written from the re-tagged parts (its region codes):
    // the manifest counts the reports by the version each carries.
    const m = await manifestOf(made.release);
    const national = (await svc.rt.boundaries.latest()).version;
    const retagged = inParquet.filter(([, region]) => region !== '').length;
    expect([0, inParquet.length]).toContain(retagged);
    expect(m.tagged_with).toEqual([
      { id: twoCities, reports: m.reports - retagged },
      { id: national, reports: retagged },
    ].filter((v) => v.reports > 0));
  }, 120_000);
});

describe('a release, read by researchers\' tools', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService(await testRuntime(await testConfig('embedded')));
    for (const p of POSTS) expect((await postReport(svc.url, report(p.id, { created_at: p.at }))).status).toBe(201);
    await allArchived(svc.rt);
    await release(svc.rt, '2025');
  }, 60_000);
  afterAll(async () => {
    await svc?.stop();
  });

  it.skipIf(!HAS_GEOPANDAS)('pyarrow.dataset and geopandas read every file with the manifest\'s counts', async () => {
    const dir = path.join(svc.rt.config.dataDir, 'release');
    await fs.mkdir(dir, { recursive: true });
    const m = (await (await fetch(`${svc.url}/releases/2025-r1/manifest.json`, { headers: UA })).json()) as Manifest;
    for (const f of m.files) if (f.path.endsWith('.parquet')) await fs.writeFile(path.join(dir, f.path), Buffer.from(await (await fetch(`${svc.url}/releases/2025-r1/${f.path}`, { headers: UA })).arrayBuffer()));
    const out = await python(
      `
import json, sys, glob
import pyarrow.dataset as ds, geopandas as gpd
root = sys.argv[1]
total = ds.dataset(root, format='parquet').count_rows()
frames = {p.split('/')[-1]: gpd.read_parquet(p) for p in sorted(glob.glob(root + '/*.parquet'))}
june = frames['reports-2025-06.parquet']
print(json.dumps({'total': total, 'each': {k: len(v) for k, v in frames.items()}, 'crs': june.crs.to_epsg(), 'inside': bool(june.geometry.x.equals(june['lng']))}))
`,
      dir,
    );
    expect(out).toEqual({ total: m.reports, each: Object.fromEntries(m.files.filter((f) => f.path.endsWith('.parquet')).map((f) => [f.path, f.reports])), crs: 4326, inside: true });
  });
});

if (!HAS_GEOPANDAS) console.warn(GEOPANDAS_MISSING);
