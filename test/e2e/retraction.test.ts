// Retraction end to end on both backends: a retracted report leaves every archive answer
// (every format, count, stats, OGC items, pages) at once, also where a cache or a closed
// window's ETag would have served it; include_retracted=true shows it as a tombstone; and
// after compaction its personal fields are gone from the parts themselves.
import { randomUUID } from 'node:crypto';
import Database from 'better-sqlite3';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Archive } from '../../src/archive/window.js';
import { archiveStates, PURGE_SETTLE_MS } from '../../src/archive/changes.js';
import { purgeRetracted, PurgeRunningError, type PurgeDeps } from '../../src/ops/purge.js';
import { compaction } from '../../jobs/compaction.js';
import type { IngestRecord } from '../../src/ledger/ledger.js';
import { parsePartnerReport } from '../../src/partners/partnerReport.js';
import { compact } from '../../src/ops/compact.js';
import { reprocess } from '../../src/ops/reprocess.js';
import { listWindowParts } from '../../src/archive/partListing.js';
import { storePartPublisher } from '../../src/archive/partPublisher.js';
import { readyKeyOf, statsKeyOf } from '../../src/archive/sidecars/index.js';
import { newPartKey } from '../../src/store/layout.js';
import type { StoredEvent } from '../../src/events/events.js';
import { ObjectWebhooks } from '../../src/events/objectWebhooks.js';
import type { ListOptions, ObjectStore } from '../../src/store/objectStore.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { storeProxy } from '../support/storeProxy.js';
import { allArchived, API_KEY, API_KEY_NAME, BACKENDS, eventually, getJson, keysUnder, postReport, report, startTestService, tempDir, testConfig, testRuntime, type TestService, pkeyOf } from '../support/env.js';

let emulator: Emulator;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(async () => {
  await emulator.stop();
});

const SECRET = 'Juan dela Cruz 0917-123-4567';
const W = 'start=2026-11-21T00:00:00Z&end=2026-11-21T23:59:59Z';
const UA = { 'User-Agent': 'flood-tests/1.0' };

async function fetchText(url: string, headers: Record<string, string> = {}): Promise<{ status: number; text: string; etag: string | null; bytes: Buffer }> {
  const res = await fetch(url, { headers: { ...UA, ...headers } });
  const bytes = Buffer.from(await res.arrayBuffer());
  return { status: res.status, text: bytes.toString('utf8'), etag: res.headers.get('etag'), bytes };
}

describe.each(BACKENDS)('retraction through the archive (%s)', (kind) => {
  let svc: TestService;
  let dir: string;
  const formats = ['json', 'geojson', 'topojson', 'csv', 'ndjson', 'parquet', 'arrow'];
  const url = (q: string) => `${svc.url}/reports/archive?${W}&${q}`;
  const etags = new Map<string, string>();

  /** The rows a Parquet answer or part holds, read by DuckDB. */
  async function parquetRows(bytes: Buffer): Promise<{ pkey: string; status: string; title: string; text: string; image_url: string | null }[]> {
    const file = path.join(dir, `${Math.random().toString(36).slice(2)}.parquet`);
    await fs.writeFile(file, bytes);
    return svc.rt.db.withConnection(async (conn) => {
      const reader = await conn.runAndReadAll(`SELECT pkey, status, title, text, image_url FROM read_parquet('${file}') ORDER BY pkey`);
      return reader.getRowObjectsJS() as any;
    });
  }

  beforeAll(async () => {
    dir = await tempDir();
    const config = await testConfig(kind, kind === 'aws' ? emulator : undefined);
    svc = await startTestService(await testRuntime(config, kind === 'aws' ? emulator : undefined));
    const hours = ['2026-11-21T05:05:00Z', '2026-11-21T05:30:00Z', '2026-11-21T09:00:00Z'];
    // A text longer than a database page: SQLite keeps it on pages of its own, freed whole when it goes.
    const text = `call ${SECRET}; ${'tubig hanggang baywang. '.repeat(400)}`;
    expect((await postReport(svc.url, report(1, { created_at: hours[0], title: SECRET, text, image_url: 'https://img.example.org/juan.jpg' }))).status).toBe(201);
    expect((await postReport(svc.url, report(2, { created_at: hours[1], title: 'Baha sa QMC' }))).status).toBe(201);
    expect((await postReport(svc.url, report(3, { created_at: hours[2], title: 'Hanggang tuhod' }))).status).toBe(201);
    await allArchived(svc.rt);
  });
  afterAll(async () => {
    await svc?.stop();
  });

  it('before: every format holds the report, and closed windows carry an ETag', async () => {
    for (const format of formats) {
      const res = await fetchText(url(`format=${format}`));
      expect(res.status, format).toBe(200);
      etags.set(format, res.etag!);
      if (format === 'parquet') expect((await parquetRows(res.bytes)).map((r) => r.title)).toContain(SECRET);
      else expect(res.bytes.includes(SECRET), format).toBe(true);
    }
    expect((await getJson(`${svc.url}/reports/archive/count?${W}`)).body.result.count).toBe(3);
    // Whatever may hold its personal fields is stored by caches only to be revalidated (its ETag
    // changes with a retraction), never served from them as it was.
    const items = await getJson(`${svc.url}/ogc/collections/reports/items?datetime=2026-11-21T00:00:00Z/2026-11-21T23:59:59Z`);
    const itemId = items.body.features.find((f: any) => f.properties.pkey === pkeyOf(1)).id;
    for (const one of [`/reports/${pkeyOf(1)}`, `/reports/${pkeyOf(1)}.cap`, `/ogc/collections/reports/items/${encodeURIComponent(itemId)}`, `/reports/archive?${W}&geoformat=geojson`]) {
      const res = await fetch(`${svc.url}${one}`, { headers: UA });
      expect([one, res.status, res.headers.get('cache-control'), Boolean(res.headers.get('etag'))]).toEqual([one, 200, 'public, no-cache', true]);
    }
    // An OGC walk begun now: its next page comes after the retraction.
    const first = await getJson(`${svc.url}/ogc/collections/reports/items?datetime=2026-11-21T00:00:00Z/2026-11-21T23:59:59Z&limit=1`);
    expect(first.body.numberMatched).toBe(3);
    ogcNext = first.body.links.find((l: any) => l.rel === 'next').href;
  });
  let ogcNext = '';

  async function expectGone(): Promise<void> {
    for (const format of formats) {
      // The old validator no longer matches: a mirror that asks gets the new answer, not a 304.
      const res = await fetchText(url(`format=${format}`), { 'If-None-Match': etags.get(format)! });
      expect(res.status, format).toBe(200);
      expect(res.etag, format).not.toBe(etags.get(format));
      if (format === 'parquet') expect((await parquetRows(res.bytes)).map((r) => r.pkey)).toEqual([pkeyOf(2), pkeyOf(3)]);
      else {
        expect(res.bytes.includes(SECRET), format).toBe(false);
        expect(res.bytes.includes(pkeyOf(1)), format).toBe(false);
        expect(res.bytes.includes(pkeyOf(2)), format).toBe(true);
      }
    }
    const page = await getJson(url('geoformat=geojson&limit=1'));
    expect(page.body.result.features.map((f: any) => f.properties.pkey)).toEqual([pkeyOf(3)]);
    const next = page.headers.get('link')!.match(/<([^>]+)>/)![1]!;
    expect((await getJson(next)).body.result.features.map((f: any) => f.properties.pkey)).toEqual([pkeyOf(2)]);
    expect((await getJson(`${svc.url}/reports/archive/count?${W}`)).body.result.count).toBe(2);
    expect((await getJson(`${svc.url}/reports/archive/stats?${W}&interval=hour`)).body.result.total).toBe(2);
    const ogc = await getJson(`${svc.url}/ogc/collections/reports/items?datetime=2026-11-21T00:00:00Z/2026-11-21T23:59:59Z`);
    expect(ogc.body.features.map((f: any) => f.properties.pkey).sort()).toEqual([pkeyOf(2), pkeyOf(3)]);
    expect((await getJson(`${svc.url}/reports/${pkeyOf(1)}`)).status).toBe(410);

    // Tombstones on request: place and time kept, the personal fields empty, counted.
    const all = await getJson(url('geoformat=geojson&include_retracted=true'));
    const tomb = all.body.result.features.find((f: any) => f.properties.pkey === pkeyOf(1));
    expect(tomb).toMatchObject({
      geometry: { coordinates: [121.0497, 14.6516] },
      properties: { status: 'retracted', title: '', text: '', image_url: null, url: null, created_at: '2026-11-21T05:05:00.000Z', tags: { instance_region_code: 'PH-QC' } },
    });
    expect(JSON.stringify(all.body)).not.toContain(SECRET);
    expect(all.body.result.features.filter((f: any) => f.properties.status === 'confirmed')).toHaveLength(2);
    const tombParquet = await fetchText(url('format=parquet&include_retracted=true'));
    expect((await parquetRows(tombParquet.bytes)).find((r) => r.pkey === pkeyOf(1))).toEqual({ pkey: pkeyOf(1), status: 'retracted', title: '', text: '', image_url: null });
    expect((await fetchText(url('format=csv&include_retracted=true'))).text).not.toContain(SECRET);
    expect((await getJson(`${svc.url}/reports/archive/count?${W}&include_retracted=true`)).body.result.count).toBe(3);
    expect((await getJson(`${svc.url}/reports/archive/count?${W}&include_retracted=maybe`)).status).toBe(400);
  }

  it('after DELETE: gone from every format, count, stats, pages and OGC items, also where caches and ETags would have served it', async () => {
    const del = await fetch(`${svc.url}/feeds/partner/1`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } });
    expect(del.status).toBe(200);
    await expectGone();
    // The walk's later pages count what they can still give.
    expect((await getJson(ogcNext)).body.numberMatched).toBe(2);
  });

  async function partRows() {
    const parts = (await keysUnder(svc.rt, 'reports/v1/')).filter((k) => k.endsWith('.parquet'));
    expect(parts.length).toBeGreaterThan(0);
    const rows = [];
    for (const key of parts) rows.push(...(await parquetRows((await svc.rt.store.get(key))!.body)));
    return rows;
  }

  it('the purge (run with compaction) rewrites the parts without the personal fields; answers stay the same', async () => {
    expect(JSON.stringify(await partRows())).toContain('Juan');
    // A job's local copy of the part, taken before the purge (an import's or a compaction's, about to write its sidecars).
    const [held] = (await listWindowParts(svc.rt.store, Date.parse('2026-11-21T05:00:00Z'), Date.parse('2026-11-21T05:59:59.999Z'))).flatMap((h) => h.parts);
    const copy = path.join(dir, 'before-purge.parquet');
    await fs.writeFile(copy, (await svc.rt.store.get(held!.key))!.body);
    const purge = await purgeRetracted(svc.rt);
    expect(purge).toEqual({ retractions: 1, partsRewritten: 1, purged: 1, waiting: 0, setAsideRewritten: 0 });
    expect(JSON.stringify(await partRows())).not.toContain('Juan');
    // Its sidecars, written from that copy after the purge, never replace the purge's own...
    const purged = (await svc.rt.store.get(readyKeyOf(held!.key)))!.body;
    const late = () => storePartPublisher(svc.rt).upgrade([{ part: held!, file: copy }], path.join(dir, 'late.ready'));
    expect(await late()).toEqual([false]);
    expect((await svc.rt.store.get(readyKeyOf(held!.key)))!.body.equals(purged)).toBe(true);
    // ...nor stand beside the part it rewrote, where the purge's were not there to refuse them.
    await svc.rt.store.delete([readyKeyOf(held!.key), statsKeyOf(held!.key)]);
    expect(await late()).toEqual([false]);
    expect([await svc.rt.store.head(readyKeyOf(held!.key)), await svc.rt.store.head(statsKeyOf(held!.key))]).toEqual([undefined, undefined]);
    for (const format of formats) expect((await fetchText(url(`format=${format}&include_retracted=true`))).bytes.includes(SECRET), format).toBe(false);
    // Compaction merges the day and keeps the tombstone.
    expect((await compact(svc.rt, { fromMs: Date.UTC(2026, 10, 21), toMs: Date.UTC(2026, 10, 21, 23), closedBeforeMs: Date.now() })).daysCompacted).toBe(1);
    const unpurged = [];
    for await (const r of svc.rt.ledger.retractions({ unpurgedOnly: true })) unpurged.push(r);
    expect(unpurged).toEqual([]);
    const rows = await partRows();
    expect(rows.find((r) => r.pkey === pkeyOf(1))).toEqual({ pkey: pkeyOf(1), status: 'retracted', title: '', text: '', image_url: null });
    expect(JSON.stringify(rows)).not.toContain('Juan');
    // Once purged the reader knows it by its status: the same answers as before.
    await expectGone();
    // Nothing left to do.
    expect(await purgeRetracted(svc.rt)).toMatchObject({ retractions: 0, partsRewritten: 0 });
  });

  // The embedded backend's databases (on AWS the ledger and the event log are objects in the bucket).
  if (kind === 'embedded') it("once purged, the personal fields' bytes are gone from the databases' files too (secure_delete), not only from their rows", async () => {
    for (const file of ['ledger.sqlite', 'events.sqlite']) {
      const at = path.join(svc.rt.config.dataDir, file);
      // The write-ahead log's pages written back into the file, as SQLite does on its own from time to time.
      const db = new Database(at);
      db.pragma('wal_checkpoint(TRUNCATE)');
      db.close();
      for (const suffix of ['', '-wal']) {
        const bytes = await fs.readFile(`${at}${suffix}`).catch(() => Buffer.alloc(0));
        expect(bytes.includes('Juan dela Cruz'), `${file}${suffix}`).toBe(false);
        expect(bytes.includes('tubig hanggang baywang'), `${file}${suffix}`).toBe(false);
      }
    }
  });

  it('a late copy of a purged report (a duplicate message) is archived as a tombstone, never with its personal fields', async () => {
    // The queue delivers the report's message again after its retraction was purged, as a
    // duplicate SQS message or a flush repeated after a crash would.
    const record: IngestRecord = {
      v: 1,
      pkey: pkeyOf(1),
      source: 'partner',
      post_id: 1,
      partner: API_KEY_NAME,
      received_at: '2026-11-21T05:06:00.000Z',
      report: parsePartnerReport(report(1, { created_at: '2026-11-21T05:05:00Z', title: SECRET, text: `call ${SECRET}`, image_url: 'https://img.example.org/juan.jpg' })),
    };
    await svc.rt.queue.send([JSON.stringify(record)]);
    await eventually(async () => ((await partRows()).filter((r) => r.pkey === pkeyOf(1)).length >= 2 ? true : undefined), 20_000, 'the late copy archived');
    expect(JSON.stringify(await partRows())).not.toContain('Juan');
    expect((await fetchText(url('format=csv&include_retracted=true'))).text).not.toContain(SECRET);
    await expectGone();
  });
});

describe.each(BACKENDS)('a reader whose retractions arrive after a purge (%s)', (kind) => {
  // A reader lists the parts and the retractions at once. Here the parts are listed before the
  // purge rewrites them and the retractions are read after it marked them purged: the pairing
  // that would serve the old part (its copy in the cache) with nothing left to hide the report.
  let svc: TestService;
  let dir: string;
  const DAY = Date.UTC(2026, 10, 22);
  const W2 = 'start=2026-11-22T00:00:00Z&end=2026-11-22T23:59:59Z';
  beforeAll(async () => {
    dir = await tempDir();
    const config = await testConfig(kind, kind === 'aws' ? emulator : undefined);
    svc = await startTestService(await testRuntime(config, kind === 'aws' ? emulator : undefined));
    expect((await postReport(svc.url, report(11, { created_at: '2026-11-22T03:10:00Z', title: SECRET }))).status).toBe(201);
    expect((await postReport(svc.url, report(12, { created_at: '2026-11-22T03:20:00Z', title: 'Baha sa España' }))).status).toBe(201);
    await allArchived(svc.rt);
  });
  afterAll(async () => {
    await svc?.stop();
  });

  it('lists the parts again, so the rewritten part is read', async () => {
    // Read once, so the old part and its texts are in the cache.
    for (const format of ['geojson', 'parquet']) expect((await fetchText(`${svc.url}/reports/archive?${W2}&format=${format}`)).status).toBe(200);
    expect((await fetch(`${svc.url}/feeds/partner/11`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } })).status).toBe(200);

    let partsListed!: () => void;
    const listed = new Promise<void>((resolve) => (partsListed = resolve));
    const store = afterEachListing(svc.rt.store, async () => partsListed());
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const states = archiveStates(svc.rt.ledger, svc.rt.changes);
    const archive = new Archive(store, svc.rt.cache, svc.rt.db, { ...states, retracted: async (from, to) => (await released, states.retracted(from, to)) });
    const opening = archive.open({ startMs: DAY, endMs: DAY + 86_400_000 - 1, admin: undefined });
    await listed;
    expect(await purgeRetracted(svc.rt)).toEqual({ retractions: 1, partsRewritten: 1, purged: 1, waiting: 0, setAsideRewritten: 0 });
    release();
    const window = await opening;
    expect(window.query.retracted).toEqual([]);
    const file = path.join(dir, 'window.parquet');
    await window.writeParquet(file);
    const rows = await svc.rt.db.withConnection(async (conn) => (await conn.runAndReadAll(`SELECT pkey, title FROM read_parquet('${file}')`)).getRowObjectsJS());
    expect(rows).toEqual([{ pkey: pkeyOf(12), title: 'Baha sa España' }]);
    for (const part of window.parts()) expect(part.etag).toBe((await svc.rt.store.head(part.key))!.etag);
  });

  it('marks a retraction purged no sooner than the settling time after the last part is rewritten', async () => {
    expect((await postReport(svc.url, report(13, { created_at: '2026-11-22T07:00:00Z', title: SECRET }))).status).toBe(201);
    await allArchived(svc.rt);
    expect((await fetch(`${svc.url}/feeds/partner/13`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } })).status).toBe(200);
    let partWrittenMs = 0;
    let markedMs = 0;
    const store = new Proxy(svc.rt.store, {
      get(target, name) {
        const value = Reflect.get(target, name, target) as unknown;
        if (name !== 'put') return typeof value === 'function' ? value.bind(target) : value;
        return async (key: string, body: Buffer | string) => {
          await target.put(key, body);
          if (key.startsWith('reports/')) partWrittenMs = performance.now();
        };
      },
    });
    const ledger = new Proxy(svc.rt.ledger, {
      get(target, name) {
        const value = Reflect.get(target, name, target) as unknown;
        if (name !== 'markPurged') return typeof value === 'function' ? value.bind(target) : value;
        return async (pkeys: readonly string[]) => {
          markedMs = performance.now();
          await target.markPurged(pkeys);
        };
      },
    });
    // Which parts it reads: the settling round's listing finds the part it rewrote as it left it.
    const read: string[] = [];
    const cache: PurgeDeps['cache'] = { withFiles: (parts, fn) => (read.push(...parts.map((p) => p.key)), svc.rt.cache.withFiles(parts, fn)) };
    expect(await purgeRetracted({ ...svc.rt, store, ledger, cache })).toEqual({ retractions: 1, partsRewritten: 1, purged: 1, waiting: 0, setAsideRewritten: 0 });
    expect(read.length).toBeGreaterThan(0);
    expect(read.filter((key, i) => read.indexOf(key) !== i)).toEqual([]);
    expect(partWrittenMs).toBeGreaterThan(0);
    // (Less a few milliseconds: a timer may fire that much before performance.now() says it is due.)
    expect(markedMs - partWrittenMs).toBeGreaterThanOrEqual(PURGE_SETTLE_MS - 5);
  });

  /**
   * Posts `postId` at `at` with the secret title, archives and retracts it; then a store whose
   * first listing of the archive is followed by `beside` (another process's write), given the
   * hour's part as it was (key and bytes) and the key of a new part of that hour.
   */
  async function retractedBeside(postId: number, at: string, beside: (old: string, before: Buffer, newKey: string) => Promise<void>) {
    expect((await postReport(svc.url, report(postId, { created_at: at, title: SECRET }))).status).toBe(201);
    await allArchived(svc.rt);
    expect((await fetch(`${svc.url}/feeds/partner/${postId}`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } })).status).toBe(200);
    const hour = `reports/v1/year=2026/month=11/day=22/hour=${at.slice(11, 13)}/`;
    const [old] = (await keysUnder(svc.rt, hour)).filter((k) => k.endsWith('.parquet'));
    const before = (await svc.rt.store.get(old!))!.body;
    let done = false;
    const store = afterEachListing(svc.rt.store, async (options) => {
      if (done || !options.prefix?.startsWith('reports/')) return;
      done = true;
      await beside(old!, before, newPartKey(Date.parse(at)));
    });
    return { hour, store, done: () => done };
  }

  it('rewrites a part published while it settles from what was read before the retraction (a compaction beside it), before marking it purged', async () => {
    // Once the purge has listed the parts, another process publishes a part made from the old one.
    const { hour, store } = await retractedBeside(18, '2026-11-22T12:00:00Z', (_old, before, key) => svc.rt.store.put(key, before));
    expect(await purgeRetracted({ ...svc.rt, store })).toEqual({ retractions: 1, partsRewritten: 2, purged: 1, waiting: 0, setAsideRewritten: 0 });
    expect(await storedRows(hour, pkeyOf(18))).toEqual([
      { pkey: pkeyOf(18), status: 'retracted', title: '' },
      { pkey: pkeyOf(18), status: 'retracted', title: '' },
    ]);
  });

  it('reads the replacement of a part retired after it was listed (a reprocess beside it, past its grace), rather than failing', async () => {
    // Once the purge has listed the parts, another process publishes the hour's part anew (from
    // what it read before the retraction) and retires the old one.
    const { hour, store, done } = await retractedBeside(19, '2026-11-22T13:00:00Z', async (old, before, key) => {
      await svc.rt.store.put(key, before);
      await svc.rt.store.delete([old]);
    });
    expect(await purgeRetracted({ ...svc.rt, store })).toEqual({ retractions: 1, partsRewritten: 1, purged: 1, waiting: 0, setAsideRewritten: 0 });
    expect(done()).toBe(true);
    expect(await storedRows(hour, pkeyOf(19))).toEqual([{ pkey: pkeyOf(19), status: 'retracted', title: '' }]);
  });

  it('never writes back a part retired while it read it: the replacement is rewritten, the retired key stays gone', async () => {
    const { hour, store } = await retractedBeside(25, '2026-11-22T15:00:00Z', async () => undefined);
    const [old] = (await keysUnder(svc.rt, hour)).filter((k) => k.endsWith('.parquet'));
    const before = (await svc.rt.store.get(old!))!.body;
    // Another process publishes the hour anew and retires the old part once the purge has read it.
    let retired = false;
    const cache: PurgeDeps['cache'] = {
      withFiles: (parts, fn) =>
        svc.rt.cache.withFiles(parts, async (files) => {
          const out = await fn(files);
          if (!retired && parts.some((p) => p.key === old)) {
            retired = true;
            await svc.rt.store.put(newPartKey(Date.parse('2026-11-22T15:00:00Z')), before);
            await svc.rt.store.delete([old!]);
          }
          return out;
        }),
    };
    expect(await purgeRetracted({ ...svc.rt, store, cache })).toMatchObject({ retractions: 1, purged: 1, waiting: 0 });
    expect(retired).toBe(true);
    expect(await svc.rt.store.head(old!)).toBeUndefined();
    expect(await storedRows(hour, pkeyOf(25))).toEqual([{ pkey: pkeyOf(25), status: 'retracted', title: '' }]);
  });

  /** The store's ledger, its first reading of retractions followed by the retraction of `postId` (as if made just after). */
  function retractingAfterFirstRead(postId: number): { ledger: typeof svc.rt.ledger; done: () => boolean } {
    let retracted = false;
    const ledger = new Proxy(svc.rt.ledger, {
      get(target, name) {
        const value = Reflect.get(target, name, target) as unknown;
        if (name !== 'retractions') return typeof value === 'function' ? value.bind(target) : value;
        return async function* (filter: Parameters<typeof target.retractions>[0]) {
          const before = [];
          for await (const r of target.retractions(filter)) before.push(r);
          if (!retracted) {
            retracted = true;
            expect((await fetch(`${svc.url}/feeds/partner/${postId}`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } })).status).toBe(200);
          }
          yield* before;
        };
      },
    });
    return { ledger, done: () => retracted };
  }

  /** The rows of `pkey` in the stored parts under `prefix`. */
  async function storedRows(prefix: string, pkey: string): Promise<unknown[]> {
    const rows: unknown[] = [];
    for (const key of (await keysUnder(svc.rt, prefix)).filter((k) => k.endsWith('.parquet'))) {
      const file = path.join(dir, `${randomUUID()}.parquet`);
      await fs.writeFile(file, (await svc.rt.store.get(key))!.body);
      rows.push(...(await svc.rt.db.withConnection(async (conn) => (await conn.runAndReadAll(`SELECT pkey, status, title FROM read_parquet('${file}') WHERE pkey = '${pkey}'`)).getRowObjectsJS())));
    }
    return rows;
  }

  it('reprocess writes a report retracted while it re-tags as a tombstone: its new part never holds the personal fields', async () => {
    // Two parts in one hour: reprocess writes them as one.
    for (const [id, title] of [[16, SECRET], [17, 'Baha']] as const) {
      expect((await postReport(svc.url, report(id, { created_at: '2026-11-22T10:00:00Z', title }))).status).toBe(201);
      await allArchived(svc.rt);
    }
    const hour = 'reports/v1/year=2026/month=11/day=22/hour=10/';
    expect((await keysUnder(svc.rt, hour)).filter((k) => k.endsWith('.parquet'))).toHaveLength(2);
    const { ledger, done } = retractingAfterFirstRead(16);
    expect((await reprocess({ ...svc.rt, ledger }, { fromMs: Date.parse('2026-11-22T10:00:00Z'), toMs: Date.parse('2026-11-22T10:59:59.999Z'), dryRun: false })).hoursRewritten).toBe(1);
    expect(done()).toBe(true);
    expect(await storedRows(hour, pkeyOf(16))).toEqual([{ pkey: pkeyOf(16), status: 'retracted', title: '' }]);
  });

  it('compaction writes a report retracted while it merges as a tombstone: its merged part never holds the personal fields', async () => {
    for (const [id, at] of [[14, '2026-11-22T08:00:00Z'], [15, '2026-11-22T09:00:00Z']] as const) {
      expect((await postReport(svc.url, report(id, { created_at: at, title: id === 14 ? SECRET : 'Baha' }))).status).toBe(201);
    }
    await allArchived(svc.rt);
    // Compaction reads the day's retractions; report 14 is retracted just after.
    const { ledger, done } = retractingAfterFirstRead(14);
    expect((await compact({ ...svc.rt, ledger }, { fromMs: DAY, toMs: DAY + 86_400_000 - 1, closedBeforeMs: Date.now() })).daysCompacted).toBe(1);
    expect(done()).toBe(true);
    const day = 'reports/v1/year=2026/month=11/day=22/';
    expect((await keysUnder(svc.rt, day)).filter((k) => k.endsWith('.parquet'))).toHaveLength(1);
    expect(await storedRows(day, pkeyOf(14))).toEqual([{ pkey: pkeyOf(14), status: 'retracted', title: '' }]);
  });

  it('one purge at a time: another (the scheduled one, or one after a compaction by hand) is refused while one rewrites, and the next purges what it missed', async () => {
    // Both in one part: two purges rewriting it at once, each from the version it read, would
    // have the later write bring back the report the earlier one tombstoned.
    for (const id of [20, 21]) expect((await postReport(svc.url, report(id, { created_at: '2026-11-22T14:00:00Z', title: SECRET }))).status).toBe(201);
    await allArchived(svc.rt);
    expect((await fetch(`${svc.url}/feeds/partner/20`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } })).status).toBe(200);
    // The first purge waits at its part's write until let go.
    let writing!: () => void;
    const atWrite = new Promise<void>((resolve) => (writing = resolve));
    let letGo!: () => void;
    const goOn = new Promise<void>((resolve) => (letGo = resolve));
    const store = new Proxy(svc.rt.store, {
      get(target, name) {
        const value = Reflect.get(target, name, target) as unknown;
        if (name !== 'put') return typeof value === 'function' ? value.bind(target) : value;
        return async (key: string, body: Buffer | string) => {
          if (key.startsWith('reports/') && key.endsWith('.parquet')) {
            writing();
            await goOn;
          }
          await target.put(key, body);
        };
      },
    });
    const first = purgeRetracted({ ...svc.rt, store });
    await atWrite;
    expect((await fetch(`${svc.url}/feeds/partner/21`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } })).status).toBe(200);
    const second = await purgeRetracted(svc.rt).catch((err: unknown) => err);
    expect(second).toBeInstanceOf(PurgeRunningError);
    expect(String(second)).toContain('another purge is running');
    // The scheduled job passes the purge by, as it does a compaction running elsewhere.
    expect(((await compaction.run(svc.rt)) as { purge: unknown }).purge).toEqual({ skipped: expect.stringContaining('another purge is running') });
    letGo();
    expect((await first).purged).toBeGreaterThanOrEqual(1);
    await purgeRetracted(svc.rt);
    const unpurged = [];
    for await (const r of svc.rt.ledger.retractions({ unpurgedOnly: true })) unpurged.push(r.pkey);
    expect(unpurged).toEqual([]);
    const day = 'reports/v1/year=2026/month=11/day=22/';
    for (const id of [20, 21]) expect(await storedRows(day, pkeyOf(id))).toEqual([{ pkey: pkeyOf(id), status: 'retracted', title: '' }]);
  });
});

/** The store, `then` run after each of its listings has been read to its end. */
function afterEachListing(store: ObjectStore, then: (options: ListOptions) => Promise<void>): ObjectStore {
  return new Proxy(store, {
    get(target, name) {
      const value = Reflect.get(target, name, target) as unknown;
      if (name !== 'list') return typeof value === 'function' ? value.bind(target) : value;
      return async function* (options: ListOptions) {
        yield* target.list(options);
        await then(options);
      };
    },
  });
}

describe('a retraction beside another process writing (embedded)', () => {
  let svc: TestService;
  beforeAll(async () => {
    // The API alone, as `serve` runs it (a worker in the same thread would sleep it in its own writes).
    svc = await startTestService(await testRuntime(await testConfig('embedded')), { worker: false, reconcile: false });
  });
  afterAll(async () => {
    await svc?.stop();
  });

  it("waits out another connection's write lock on the ledger and on the event log with the service answering meanwhile", async () => {
    for (const [postId, file] of [[21, 'ledger.sqlite'], [22, 'events.sqlite']] as const) {
      expect((await postReport(svc.url, report(postId, { created_at: '2026-11-23T07:00:00Z' }))).status).toBe(201);
      // Another connection (a worker's flush, a purge) holds the write lock for half a second.
      const other = new Database(path.join(svc.rt.config.dataDir, file));
      other.exec('BEGIN IMMEDIATE');
      const release = setTimeout(() => other.exec('COMMIT'), 500);
      try {
        const answered: string[] = [];
        const retraction = fetch(`${svc.url}/feeds/partner/${postId}`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } }).then((res) => (answered.push('DELETE'), res.status));
        const health = fetch(`${svc.url}/health`).then((res) => (answered.push('health'), res.status));
        // Before: SQLite's busy handler slept the event loop up to 2 s, the lock's holder could not
        // let go, and the DELETE failed (503) with every other request waiting behind it.
        expect([file, await health, await retraction]).toEqual([file, 200, 200]);
        expect(answered).toEqual(['health', 'DELETE']);
      } finally {
        clearTimeout(release);
        if (other.inTransaction) other.exec('COMMIT');
        other.close();
      }
      expect((await svc.rt.ledger.lookup(pkeyOf(postId)))?.state).toBe('retracted');
    }
    // A lock held past the 2 s the service waits: a 503 that names the ledger, not the object store.
    expect((await postReport(svc.url, report(23, { created_at: '2026-11-23T07:00:00Z' }))).status).toBe(201);
    const other = new Database(path.join(svc.rt.config.dataDir, 'ledger.sqlite'));
    other.exec('BEGIN IMMEDIATE');
    try {
      const res = await fetch(`${svc.url}/feeds/partner/23`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } });
      expect([res.status, res.headers.get('retry-after'), ((await res.json()) as { message: string }).message]).toEqual([503, '5', 'The ledger is unavailable; retry after 5 seconds.']);
    } finally {
      other.exec('COMMIT');
      other.close();
    }
    expect((await fetch(`${svc.url}/feeds/partner/23`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } })).status).toBe(200);
    // The event log's file locked as long: a 503 that names the event log; asked again, the
    // retraction stands once and its event is recorded.
    expect((await postReport(svc.url, report(24, { created_at: '2026-11-23T07:00:00Z' }))).status).toBe(201);
    const log = new Database(path.join(svc.rt.config.dataDir, 'events.sqlite'));
    log.exec('BEGIN IMMEDIATE');
    try {
      const res = await fetch(`${svc.url}/feeds/partner/24`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } });
      expect([res.status, ((await res.json()) as { message: string }).message]).toEqual([503, 'The event log is unavailable; retry after 5 seconds.']);
    } finally {
      log.exec('COMMIT');
      log.close();
    }
    expect((await fetch(`${svc.url}/feeds/partner/24`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } })).status).toBe(200);
    expect(svc.rt.events!.wasRetracted(pkeyOf(24))).toBe(true);
  });
});

describe('a retraction purged on AWS, with webhook batches set aside', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService(await testRuntime(await testConfig('aws', emulator), emulator));
  });
  afterAll(async () => {
    await svc?.stop();
  });

  it('takes the report out of the batches set aside that hold it, and drops one it alone was in', async () => {
    expect((await postReport(svc.url, report(31, { created_at: '2026-11-24T07:00:00Z', title: SECRET }))).status).toBe(201);
    expect((await postReport(svc.url, report(32, { created_at: '2026-11-24T07:05:00Z', title: 'Baha sa Maginhawa' }))).status).toBe(201);
    await allArchived(svc.rt);
    const [retracted, kept] = await Promise.all([pkeyOf(31), pkeyOf(32)].map(async (pkey) => (await svc.rt.feed.archivedReport(pkey))!));
    // A subscriber's receiver that failed for its whole retry period: two batches set aside.
    const hooks = new ObjectWebhooks(svc.rt.store, svc.rt.feed);
    const batch = (id: string, events: StoredEvent[]) => ({ id, kind: 'archived' as const, events, firstAttemptMs: Date.now(), attempts: 9 });
    await hooks.setAside('sub_gone', batch('b1', [retracted!, kept!]), 'connect ECONNREFUSED');
    await hooks.setAside('sub_gone', batch('b2', [retracted!]), 'connect ECONNREFUSED');

    expect((await fetch(`${svc.url}/feeds/partner/31`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } })).status).toBe(200);
    expect(await purgeRetracted(svc.rt)).toMatchObject({ purged: 1, setAsideRewritten: 2 });
    const left = await hooks.setAsideBatches();
    expect(left.map((b) => [b.id, b.count, b.features.map((f) => f.properties.pkey)])).toEqual([['b1', 1, [pkeyOf(32)]]]);
    for (const key of await keysUnder(svc.rt, 'events/v1/set-aside/')) expect((await svc.rt.store.get(key))!.body.toString('utf8')).not.toContain(SECRET);
    // Purged: a later run has nothing more to take out.
    expect(await purgeRetracted(svc.rt)).toMatchObject({ retractions: 0, setAsideRewritten: 0 });
  });
});

describe('a retraction whose record failed after its marker (on AWS)', () => {
  // The ledger writes the unpurged marker (the report hidden from then on), then the retraction.
  // The second write refused: the partner has a 503, and may never send the DELETE again.
  let svc: TestService;
  let refusing = false;
  let proxy: Awaited<ReturnType<typeof storeProxy>>;
  beforeAll(async () => {
    proxy = await storeProxy(
      () => emulator.endpoint,
      (req) => ({ headers: req.headers, ...(refusing && req.method === 'PUT' && (req.url ?? '').includes('/ingest/retractions/') && { refuse: 500 }) }),
    );
    svc = await startTestService(await testRuntime(await testConfig('aws', emulator), emulator, { s3: proxy.client }));
  });
  afterAll(async () => {
    await svc?.stop();
    await proxy?.close();
  });

  it("is completed by the purge with the partner's own words, announced, and answered 410, before its marker goes", async () => {
    expect((await postReport(svc.url, report(41, { created_at: '2026-11-25T07:00:00Z', title: SECRET }))).status).toBe(201);
    await allArchived(svc.rt);
    const pkey = pkeyOf(41);
    refusing = true;
    expect((await fetch(`${svc.url}/feeds/partner/41`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } })).status).toBe(503);
    refusing = false;
    expect((await fetchText(`${svc.url}/reports/archive?start=2026-11-25T00:00:00Z&end=2026-11-25T23:59:59Z&format=csv`, UA)).text).not.toContain(SECRET);

    expect(await purgeRetracted(svc.rt)).toMatchObject({ retractions: 1, purged: 1, waiting: 0 });
    const entry = await svc.rt.ledger.lookup(pkey);
    expect(entry?.retraction).toMatchObject({ pkey, by: API_KEY_NAME });
    expect((await getJson(`${svc.url}/reports/${pkey}`, UA)).status).toBe(410);
    expect(await svc.rt.feed.wasRetracted(pkey)).toBe(true);
    const cap = await fetchText(`${svc.url}/reports/${pkey}.cap`, UA);
    expect(cap.text).not.toContain(SECRET);
    expect(await keysUnder(svc.rt, 'ingest/unpurged/')).toEqual([]);
    // The partner's repeat finds it retracted as it first asked.
    const again = await fetch(`${svc.url}/feeds/partner/41`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } });
    expect(again.status).toBe(200);
  });
});
