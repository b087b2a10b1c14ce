// The sidecars' writer and readers on real files and a real DuckDB: what a ready text holds is
// byte for byte what DuckDB builds from its part, in every shape, whole or cut; its index is
// read once and again after a rewrite; a text of an older version is read (or refused) as
// FORMAT.md says, and compaction's upgrade writes today's; the stats sidecar holds the part's
// reports; every section is a gzip member, and a damaged one fails the read.
import fs from 'node:fs/promises';
import { gunzipSync } from 'node:zlib';
import path from 'node:path';
import { tableFromIPC } from 'apache-arrow';
import { beforeAll, describe, expect, it } from 'vitest';
import { arrowStream, STRING_COLUMNS, stringSqlOf } from '../../src/archive/arrow.js';
import { writeParquet } from '../../src/archive/partWriter.js';
import { sealPart } from '../../src/archive/partSeal.js';
import { storePartPublisher } from '../../src/archive/partPublisher.js';
import type { ArchiveRow } from '../../src/archive/partColumns.js';
import {
  openStoredParquet,
  readReadyIndex,
  readStatsSidecar,
  readyKeyOf,
  readyReads,
  readyRunsOf,
  readyTextsOf,
  readyTextsOfParts,
  statsKeyOf,
  statsSidecarOf,
  storedIndex,
  StoredSection,
  writeReadyTexts,
} from '../../src/archive/sidecars/index.js';
import { ITEM_SQL, type FeatureShape } from '../../src/archive/sql.js';
import { sqlString } from '../../src/archive/duckdb.js';
import { newDayPartKey } from '../../src/store/layout.js';
import { FileObjectStore } from '../../src/store/fileStore.js';
import { random, randomReports } from '../support/randomReports.js';
import { scratch } from '../support/scratch.js';

const HOUR = 3_600_000;
const FROM = Date.UTC(2026, 10, 12, 5);
const SPAN = 6 * HOUR;
const SEPARATORS: Record<FeatureShape, string> = { geojson: ',\n', topojson: ',', csv: '\n' };

const work = scratch('sidecars-');
let rows: ArchiveRow[];
let part: string;
let ready: string;

beforeAll(async () => {
  rows = randomReports(random(7), 600, FROM, SPAN);
  part = path.join(work.dir, 'part.parquet');
  await writeParquet(work.db, rows, part);
  ready = path.join(work.dir, 'part.ready');
  await writeReadyTexts(work.db, part, ready);
}, 60_000);

/** Every chunk of the reads, joined, each chunk handed back as a consumer would once written. */
async function readAll(reads: (() => Iterable<Uint8Array | StoredSection>)[]): Promise<Buffer> {
  const out: Buffer[] = [];
  for (const read of reads) for await (const chunk of read()) out.push(Buffer.from(chunk instanceof StoredSection ? chunk.plain() : chunk));
  return Buffer.concat(out);
}

/** What DuckDB builds of the part's kept reports by hour (newest first): the items joined by `separator`, and the count. */
async function duckdbHours(shape: FeatureShape, separator: string, where = 'TRUE', of = part): Promise<{ hourMs: number; text: string; n: number }[]> {
  return work.db.withConnection(async (conn) => {
    const reader = await conn.runAndReadAll(
      `SELECT epoch_ms(created_at) // ${HOUR} * ${HOUR} AS h, encode(string_agg(${ITEM_SQL[shape]}, ${sqlString(separator)} ORDER BY created_at DESC, pkey DESC)) AS t, count(*)::INTEGER AS n
        FROM read_parquet(${sqlString(of)}) WHERE status <> 'retracted' AND ${where} GROUP BY 1 ORDER BY 1 DESC`,
    );
    return (reader.getRowsJS() as [bigint, Uint8Array, number][]).map(([h, t, n]) => ({ hourMs: Number(h), text: Buffer.from(t).toString('utf8'), n }));
  });
}

const WHOLE = { startMs: 0, endMs: 8.64e15, admin: undefined };

describe('a ready text', () => {
  it('indexes the part\'s hours, newest first, with their counts, bboxes and instants', async () => {
    const { index } = readReadyIndex(ready);
    expect(index.version).toBe(7);
    const kept = rows.filter((r) => r.status !== 'retracted');
    expect(index.items.count).toBe(kept.length);
    const hours = [...new Set(kept.map((r) => Math.floor(r.created_at_ms / HOUR) * HOUR))].sort((a, b) => b - a);
    expect(index.hours.map((h) => h.hourMs)).toEqual(hours);
    for (const hour of index.hours) {
      const own = kept.filter((r) => Math.floor(r.created_at_ms / HOUR) * HOUR === hour.hourMs);
      expect(hour.count).toBe(own.length);
      expect(hour.minMs).toBe(Math.min(...own.map((r) => r.created_at_ms)));
      expect(hour.maxMs).toBe(Math.max(...own.map((r) => r.created_at_ms)));
      expect(hour.bbox).toEqual([Math.min(...own.map((r) => r.lng)), Math.min(...own.map((r) => r.lat)), Math.max(...own.map((r) => r.lng)), Math.max(...own.map((r) => r.lat))]);
    }
  });

  it('holds, hour by hour and all hours as one range, the bytes DuckDB builds in every shape', async () => {
    const hours = readReadyIndex(ready).index.hours.map((h) => h.hourMs);
    for (const shape of ['geojson', 'topojson', 'csv'] as const) {
      // NDJSON's newlines are the FeatureCollection's with the commas taken out as the text is read.
      for (const separator of shape === 'geojson' ? ['\n', ',\n'] : [SEPARATORS[shape]]) {
        const built = await duckdbHours(shape, separator);
        const runs = readyRunsOf(ready, hours, WHOLE);
        for (const b of built) expect((await readAll(readyReads([runs.get(b.hourMs)!], shape, separator))).toString('utf8')).toBe(b.text);
        const reads = readyReads(hours.map((h) => runs.get(h)!), shape, separator);
        expect(reads).toHaveLength(1);
        expect((await readAll(reads)).toString('utf8')).toBe(built.map((b) => b.text).join(separator));
      }
    }
  });

  it('holds each hour\'s reports as an Arrow record batch, in answer order', async () => {
    const { index } = readReadyIndex(ready);
    const runs = readyRunsOf(ready, index.hours.map((h) => h.hourMs), WHOLE);
    const pieces: Uint8Array[] = [];
    for await (const piece of arrowStream((async function* () { for (const read of readyReads([...runs.values()], 'arrow')) yield* read(); })(), (b): b is StoredSection => b instanceof StoredSection)) pieces.push(piece instanceof StoredSection ? piece.plain() : piece);
    const table = tableFromIPC(Buffer.concat(pieces));
    const order = rows.filter((r) => r.status !== 'retracted').sort((a, b) => b.created_at_ms - a.created_at_ms || (a.pkey < b.pkey ? 1 : -1));
    expect(table.getChild('pkey')!.toArray()).toEqual(order.map((r) => r.pkey));
    expect(table.batches.map((b) => b.numRows)).toEqual(index.hours.map((h) => h.count));
    // Every string column's values (nulls, quotes, newlines, ñ) as DuckDB reads them from the part.
    const want = await work.db.withConnection(async (conn) =>
      (await conn.runAndReadAll(`SELECT ${STRING_COLUMNS.map((c) => stringSqlOf(c)).join(', ')} FROM read_parquet(${sqlString(part)}) WHERE status <> 'retracted' ORDER BY created_at DESC, pkey DESC`)).getRowsJS(),
    );
    STRING_COLUMNS.forEach((c, i) => expect([...table.getChild(c)!], c).toEqual(want.map((r) => r[i])));
  });

  it('holds the part\'s reports as a Parquet file in the answer\'s form, opened only for a window that holds them all', async () => {
    const { index } = readReadyIndex(ready);
    const minMs = Math.min(...index.hours.map((h) => h.minMs));
    const maxMs = Math.max(...index.hours.map((h) => h.maxMs));
    expect(await openStoredParquet(ready, minMs + 1, maxMs)).toBeUndefined();
    expect(await openStoredParquet(ready, minMs, maxMs - 1)).toBeUndefined();
    const stored = (await openStoredParquet(ready, minMs, maxMs))!;
    const bytes = Buffer.alloc(stored.length);
    await stored.handle.read(bytes, 0, stored.length, stored.offset);
    await stored.handle.close();
    const file = path.join(work.dir, 'section.parquet');
    await fs.writeFile(file, bytes);
    const got = await work.db.withConnection(async (conn) => (await conn.runAndReadAll(`SELECT pkey FROM read_parquet(${sqlString(file)})`)).getRowsJS().map((r) => r[0]));
    const want = await work.db.withConnection(async (conn) => (await conn.runAndReadAll(`SELECT pkey FROM read_parquet(${sqlString(part)}) WHERE status <> 'retracted' ORDER BY created_at DESC, pkey DESC`)).getRowsJS().map((r) => r[0]));
    expect(got).toEqual(want);
  });

  it('is read from its index once, and again once rewritten (a purge): reads made before take the file as it now is', async () => {
    const copy = path.join(work.dir, 'rewritten.ready');
    await fs.copyFile(ready, copy);
    const first = readReadyIndex(copy);
    expect(readReadyIndex(copy)).toBe(first);
    const hours = first.index.hours.map((h) => h.hourMs);
    const reads = readyReads(hours.map((h) => readyRunsOf(copy, hours, WHOLE).get(h)!), 'csv', '\n');
    // The part rewritten with fewer reports: a new file under the same name.
    const fewer = rows.filter((r) => r.post_id % 3 !== 0);
    const smaller = path.join(work.dir, 'smaller.parquet');
    await writeParquet(work.db, fewer, smaller);
    await writeReadyTexts(work.db, smaller, `${copy}.new`);
    await fs.rename(`${copy}.new`, copy);
    const second = readReadyIndex(copy);
    expect(second).not.toBe(first);
    expect(second.index.items.count).toBe(fewer.filter((r) => r.status !== 'retracted').length);
    const want = await work.db.withConnection(async (conn) =>
      Buffer.from((await conn.runAndReadAll(`SELECT encode(string_agg(${ITEM_SQL.csv}, chr(10) ORDER BY created_at DESC, pkey DESC)) FROM read_parquet(${sqlString(smaller)}) WHERE status <> 'retracted'`)).getRowsJS()[0]![0] as Uint8Array).toString('utf8'),
    );
    expect((await readAll(reads)).toString('utf8')).toBe(want);
  });

  it('stores each hour\'s sections as gzip members, 8 to 10 times smaller than their text here, and fails a read of a damaged one', async () => {
    const bytes = await fs.readFile(ready);
    const { base, index } = readReadyIndex(ready);
    let plain = 0;
    let stored = 0;
    for (const hour of index.hours) {
      for (const shape of ['geojson', 'topojson', 'csv'] as const) {
        const member = bytes.subarray(base + hour[shape][0], base + hour[shape][1]);
        expect([member[0], member[1]]).toEqual([0x1f, 0x8b]);
        plain += gunzipSync(member).byteLength;
        stored += member.byteLength;
      }
    }
    expect(plain / stored).toBeGreaterThan(3);
    // A byte flipped inside the newest hour's CSV member: the read fails, nothing is sent as if whole.
    const damaged = path.join(work.dir, 'damaged.ready');
    const copy = Buffer.from(bytes);
    const [start, end] = index.hours[0]!.csv;
    const at = base + Math.floor((start + end) / 2);
    copy[at] = copy[at]! ^ 0xff;
    await fs.writeFile(damaged, copy);
    const hours = index.hours.map((h) => h.hourMs);
    const runs = readyRunsOf(damaged, hours, WHOLE);
    await expect(readAll(readyReads(hours.map((h) => runs.get(h)!), 'csv', '\n'))).rejects.toThrow(/ready texts damaged/);
  });
});

describe('a ready text of a storm\'s day', () => {
  it('holds every hour\'s bytes as DuckDB builds them, each cut out of the lines of the whole day', async () => {
    // 24,000 reports over 30 hours, written one item a line (readyWriter.ts): each hour's text is
    // the slice of its reports' lines, wherever a CSV cell holds a newline.
    const storm = path.join(work.dir, 'storm.parquet');
    await writeParquet(work.db, randomReports(random(5), 24_000, FROM, 30 * HOUR), storm);
    const stormReady = path.join(work.dir, 'storm.ready');
    await writeReadyTexts(work.db, storm, stormReady);
    const hours = readReadyIndex(stormReady).index.hours;
    expect(hours).toHaveLength(30);
    const runs = readyRunsOf(stormReady, hours.map((h) => h.hourMs), WHOLE);
    for (const shape of ['geojson', 'topojson', 'csv'] as const) {
      const built = await duckdbHours(shape, SEPARATORS[shape], 'TRUE', storm);
      expect(built.map((b) => b.n)).toEqual(hours.map((h) => h.count));
      for (const b of built) expect((await readAll(readyReads([runs.get(b.hourMs)!], shape, SEPARATORS[shape]))).toString('utf8'), `${shape} ${b.hourMs}`).toBe(b.text);
    }
  }, 60_000);
});

describe('a ready text of a part of purged retractions only', () => {
  it('holds no hour and no report', async () => {
    const purged = path.join(work.dir, 'purged.parquet');
    await writeParquet(work.db, randomReports(random(9), 50, FROM, SPAN).map((r) => ({ ...r, status: 'retracted' })), purged);
    const file = path.join(work.dir, 'purged.ready');
    await writeReadyTexts(work.db, purged, file);
    const { index } = readReadyIndex(file);
    expect(index.hours).toEqual([]);
    expect(index.items.count).toBe(0);
  });
});

describe('ready texts of several parts built together', () => {
  it('are each, byte for byte, the part\'s ready text built alone, whatever hours and keys the parts share', async () => {
    // Parts over the same hours with the same pkeys (each part numbers its reports from 0), one
    // of purged retractions only between them, and one of a single report.
    const files = [part, path.join(work.dir, 'together-purged.parquet'), path.join(work.dir, 'together-busy.parquet'), path.join(work.dir, 'together-one.parquet')];
    await writeParquet(work.db, randomReports(random(11), 40, FROM, SPAN).map((r) => ({ ...r, status: 'retracted' })), files[1]!);
    await writeParquet(work.db, randomReports(random(12), 3_000, FROM - 2 * HOUR, SPAN + 4 * HOUR), files[2]!);
    await writeParquet(work.db, randomReports(random(13), 1, FROM + HOUR, HOUR), files[3]!);
    const alone: Buffer[] = [];
    for (const [k, file] of files.entries()) alone.push(await readyTextsOf(work.db, file, path.join(work.dir, `alone-${k}`)));
    const together = await readyTextsOfParts(work.db, files, path.join(work.dir, 'together'));
    expect(together).toHaveLength(files.length);
    together.forEach((text, k) => expect(text.equals(alone[k]!), files[k]).toBe(true));
  }, 60_000);

  it('are built alone when they cannot be built together: a part that cannot be built costs only its own', async () => {
    const store = new FileObjectStore(path.join(work.dir, 'together-store'));
    const damaged = path.join(work.dir, 'together-damaged.parquet');
    await fs.writeFile(damaged, 'not a Parquet file');
    const keys = [0, 1, 2].map((d) => newDayPartKey(Date.UTC(2026, 10, 20 + d)));
    const files = [part, damaged, part];
    for (const [k, key] of keys.entries()) await store.put(key, await fs.readFile(files[k]!));
    const warnings: { obj: unknown; msg?: string }[] = [];
    const publisher = storePartPublisher({ store, db: work.db, log: { warn: (obj: unknown, msg?: string) => void warnings.push({ obj, msg }) } });

    await publisher.upgrade(await Promise.all(keys.map(async (key, k) => ({ part: (await store.head(key))!, file: files[k]! }))), path.join(work.dir, 'together-scratch'));

    for (const k of [0, 2]) expect((await store.get(readyKeyOf(keys[k]!)))!.body.equals(await fs.readFile(ready))).toBe(true);
    expect(await store.head(readyKeyOf(keys[1]!))).toBeUndefined();
    expect(warnings.map((w) => w.obj)).toEqual(expect.arrayContaining([expect.objectContaining({ parts: keys }), expect.objectContaining({ part: keys[1], sidecar: 'ready texts' })]));
  }, 60_000);
});

describe('an older ready text', () => {
  /** The index line and body of a text. */
  async function split(file: string): Promise<{ index: Record<string, unknown>; body: Buffer }> {
    const bytes = await fs.readFile(file);
    const eol = bytes.indexOf(10);
    return { index: JSON.parse(bytes.subarray(0, eol).toString('utf8')), body: bytes.subarray(eol + 1) };
  }

  it('of another version is never read', async () => {
    const { index, body } = await split(ready);
    const file = path.join(work.dir, 'v2.ready');
    await fs.writeFile(file, Buffer.concat([Buffer.from(`${JSON.stringify({ ...index, version: 2 })}\n`), body]));
    expect(() => readReadyIndex(file)).toThrow(/unknown ready-text version/);
  });

  it('is rewritten by the upgrade, and older versions\' objects deleted; a second upgrade writes nothing', async () => {
    const store = new FileObjectStore(path.join(work.dir, 'store'));
    const key = newDayPartKey(Date.UTC(2026, 10, 12));
    await store.put(key, await fs.readFile(part));
    const { index, body } = await split(ready);
    const v3 = readyKeyOf(key).replace(/^ready\/v7\//, 'ready/v3/');
    const v4 = readyKeyOf(key).replace(/^ready\/v7\//, 'ready/v4/');
    const v5 = readyKeyOf(key).replace(/^ready\/v7\//, 'ready/v5/');
    const v6 = readyKeyOf(key).replace(/^ready\/v7\//, 'ready/v6/');
    const statsV1 = statsKeyOf(key).replace(/^stats\/v2\//, 'stats/v1/');
    await store.put(v3, Buffer.from('{"version":3}\n'));
    await store.put(v4, Buffer.concat([Buffer.from(`${JSON.stringify({ ...index, version: 4 })}\n`), body]));
    await store.put(v5, Buffer.concat([Buffer.from(`${JSON.stringify({ ...index, version: 5 })}\n`), body]));
    await store.put(v6, Buffer.concat([Buffer.from(`${JSON.stringify({ ...index, version: 6 })}\n`), body]));
    await store.put(statsV1, Buffer.from('{"version":1}\n'));
    for (const old of [v3, v4, v5, v6]) expect(await storedIndex(store, old)).toBeUndefined();
    expect(await storedIndex(store, readyKeyOf(key))).toBeUndefined();

    const publisher = storePartPublisher({ store, db: work.db, log: { warn: () => undefined } });
    expect(await publisher.upgrade([{ part: (await store.head(key))!, file: part }], path.join(work.dir, 'scratch.ready'))).toEqual([true]);
    expect((await storedIndex(store, readyKeyOf(key)))?.version).toBe(7);
    expect((await store.get(readyKeyOf(key)))!.body.equals(await fs.readFile(ready))).toBe(true);
    for (const old of [v3, v4, v5, v6]) expect(await store.head(old)).toBeUndefined();
    expect(await store.head(statsV1)).toBeUndefined();
    expect(await store.head(statsKeyOf(key))).toBeDefined();
    expect(await publisher.upgrade([{ part: (await store.head(key))!, file: part }], path.join(work.dir, 'scratch.ready'))).toEqual([false]);

    // Retired with its part: every sidecar of any version goes, after the part.
    await store.put(v3, Buffer.from('{"version":3}\n'));
    await store.put(v5, Buffer.from('{"version":5}\n'));
    await store.put(statsV1, Buffer.from('{"version":1}\n'));
    await publisher.retire([key]);
    for (const k of [key, readyKeyOf(key), statsKeyOf(key), v3, v5, statsV1]) expect(await store.head(k)).toBeUndefined();
  });
});

describe('a part whose ready texts cannot be built', () => {
  it('is still stored, with its stats sidecar and without ready texts (older ones under its key deleted), and the failure is logged', async () => {
    const store = new FileObjectStore(path.join(work.dir, 'unbuilt-store'));
    const key = newDayPartKey(Date.UTC(2026, 10, 13));
    const file = path.join(work.dir, 'unbuilt.parquet');
    await fs.copyFile(part, file);
    // Ready texts of an earlier version of this part, which no longer match it.
    await store.put(readyKeyOf(key), await fs.readFile(ready));
    // The writer's scratch file for GeoJSON lines cannot be created: DuckDB's COPY fails.
    await fs.mkdir(`${file}.ready.geojson`);
    const warnings: { obj: unknown; msg?: string }[] = [];
    const publisher = storePartPublisher({ store, db: work.db, log: { warn: (obj: unknown, msg?: string) => void warnings.push({ obj, msg }) } });

    const { body, readyTexts } = await publisher.publish(key, file);

    expect(readyTexts).toBe('none');
    // The part as written, sealed (partSeal.ts).
    expect(body.equals(sealPart(await fs.readFile(part)))).toBe(true);
    expect((await store.get(key))!.body.equals(body)).toBe(true);
    expect(await store.head(readyKeyOf(key))).toBeUndefined();
    expect(await store.head(statsKeyOf(key))).toBeDefined();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.obj).toMatchObject({ part: key, sidecar: 'ready texts' });

    // Once the scratch path is free, the upgrade writes them: the same texts as a normal build.
    await fs.rm(`${file}.ready.geojson`, { recursive: true });
    expect(await publisher.upgrade([{ part: (await store.head(key))!, file }], path.join(work.dir, 'unbuilt.scratch'))).toEqual([true]);
    expect((await store.get(readyKeyOf(key)))!.body.equals(await fs.readFile(ready))).toBe(true);
  });
});

describe('a part stored with the ready texts of the part it replaces', () => {
  it('copies them while they stand, and builds its own once they are gone', async () => {
    const store = new FileObjectStore(path.join(work.dir, 'taken-store'));
    const publisher = storePartPublisher({ store, db: work.db, log: { warn: () => undefined } });
    const [old, next, later] = [1, 2, 3].map((d) => newDayPartKey(Date.UTC(2026, 10, d)));
    // The old part's texts, marked so a copy is told from a build.
    const marked = Buffer.concat([await fs.readFile(ready), Buffer.from('copied')]);
    await store.put(readyKeyOf(old!), marked);

    expect((await publisher.publish(next!, part, { readyTexts: { from: old! } })).readyTexts).toBe('copied');
    expect((await store.get(readyKeyOf(next!)))!.body.equals(marked)).toBe(true);

    await store.delete([readyKeyOf(old!)]);
    expect((await publisher.publish(later!, part, { readyTexts: { from: old! } })).readyTexts).toBe('built');
    expect((await store.get(readyKeyOf(later!)))!.body.equals(await fs.readFile(ready))).toBe(true);
    expect((await publisher.publish(later!, part)).readyTexts).toBe('built');
  });
});

describe('a stats sidecar', () => {
  it('holds the part\'s kept reports, oldest first, with their places and codes', async () => {
    const file = path.join(work.dir, 'part.stats');
    await fs.writeFile(file, (await statsSidecarOf(work.db, part))!);
    const got = readStatsSidecar(file, { place: true, area: true, city: true });
    const kept = rows.filter((r) => r.status !== 'retracted').sort((a, b) => a.created_at_ms - b.created_at_ms);
    expect(got.count).toBe(kept.length);
    expect([...got.createdUs]).toEqual(kept.map((r) => r.created_at_ms * 1000));
    const byTime = (list: { t: number; v: string }[]) => list.sort((a, b) => a.t - b.t || (a.v < b.v ? -1 : 1)).map((x) => x.v);
    // Ties in created_at come in no set order: compared as sorted (instant, value) pairs.
    const place = (i: number) => `${got.lng[i]},${got.lat[i]},${got.city[i] === 65_535 ? null : got.cities[got.city[i]!]},${got.area[i] === 65_535 ? null : got.areas[got.area[i]!]}`;
    expect(byTime(kept.map((_, i) => ({ t: got.createdUs[i]!, v: place(i) })))).toEqual(byTime(kept.map((r) => ({ t: r.created_at_ms * 1000, v: `${r.lng},${r.lat},${r.instance_region_code},${r.local_area_id}` }))));
    // Only the columns asked for are read.
    const lean = readStatsSidecar(file, { place: false, area: false, city: false });
    expect([lean.lng.length, lean.area.length, lean.city.length]).toEqual([0, 0, 0]);
  });
});

describe('sidecars of a part from all over the country', () => {
  it('are written for a part naming more cities than one byte counts, and select and count by any of them', async () => {
    // 1,642 cities nationally: an hour's part can hold hundreds.
    const many = randomReports(random(41), 900, FROM, SPAN).map((r, i) => ({ ...r, status: 'confirmed', instance_region_code: i % 9 === 0 ? null : `PH-${String(1_000_000 + (i % 700)).padStart(10, '0')}` }));
    const file = path.join(work.dir, 'many.parquet');
    await writeParquet(work.db, many, file);
    const text = path.join(work.dir, 'many.ready');
    await writeReadyTexts(work.db, file, text);
    const ready = readReadyIndex(text);
    expect(ready.index.items.codes.length).toBeGreaterThan(600);
    const hours = ready.index.hours.map((h) => h.hourMs);
    for (const code of [ready.index.items.codes[0]!, ready.index.items.codes.at(-1)!]) {
      const filter = { startMs: FROM - 1, endMs: FROM + SPAN, admin: [code] };
      const runs = readyRunsOf(text, hours, filter);
      const count = hours.reduce((n, h) => n + (runs.get(h)?.selection?.count ?? 0), 0);
      expect(count).toBe(many.filter((r) => r.instance_region_code === code).length);
    }
    const stats = path.join(work.dir, 'many.stats');
    await fs.writeFile(stats, (await statsSidecarOf(work.db, file))!);
    const got = readStatsSidecar(stats, { place: false, area: false, city: true });
    const last = got.cities.length - 1;
    expect(got.cities.length).toBe(ready.index.items.codes.length);
    expect([...got.city].filter((c) => c === last).length).toBe(many.filter((r) => r.instance_region_code === got.cities[last]).length);
    expect([...got.city].filter((c) => c === 65_535).length).toBe(many.filter((r) => r.instance_region_code === null).length);
  });
});
