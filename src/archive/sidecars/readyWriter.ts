// Ready texts: when a part is written (by the worker, compaction, reprocessing or a purge), its
// reports are also serialised once into a sidecar object beside it under `ready/v3/` (same
// path, outside the Parquet layout that Athena and pyarrow read): the GeoJSON Features, the
// TopoJSON geometries and the CSV lines of every report, in answer order. A cold read of whole
// hours is then a plain byte read of the sidecar streamed to the client: no DuckDB, no per-row
// work. The sidecar is written before its part and deleted after it; a part without one
// (written before sidecars existed) is rendered by DuckDB as before.
//
// Layout: one line of JSON (the index, below), then three sections, each the part's items
// newest first: GeoJSON Features joined by '\n' (NDJSON as it is; a FeatureCollection once the
// newlines are turned into commas, which JSON text never holds raw), TopoJSON geometries joined
// by ',', CSV lines joined by '\n'. Within a section an hour's items are contiguous, and the
// hours follow each other (newest first) with one separator between them, so consecutive hours
// are one byte range.
import { closeSync, fstatSync, openSync, readSync, statSync } from 'node:fs';
import fs, { type FileHandle } from 'node:fs/promises';
import { sqlString, type DuckDb } from '../duckdb.js';
import { REPORTS_PREFIX } from '../reports/layout.js';
import type { ObjectInfo, ObjectStore } from '../store/objectStore.js';
import { HOUR_MS } from './plan.js';
import { batchMessages } from './arrow.js';
import { arrowDayOf } from './exports.js';
import { copyAnswerParquet } from './parquetAnswer.js';
import { CHUNK_BYTES, takeChunk } from './readBuffers.js';
import { ITEM_SQL, type FeatureShape } from './sql.js';
import { statsKeyOf, writeStatsSidecar } from './statsSidecar.js';

const READY_PREFIX = 'ready/v3/';
/**
 * Where sidecars were kept before, by part key: v1 (zstd Parquet read back by DuckDB), v2 (CSV
 * cells not yet guarded against formulas). Never read: a part whose sidecar is only there is
 * answered by DuckDB until compaction writes its v3 one; they are deleted with their parts.
 */
function oldReadyKeysOf(partKey: string): string[] {
  const rest = partKey.slice(REPORTS_PREFIX.length);
  return [`ready/v1/${rest}`, `ready/v2/${rest.replace(/\.parquet$/, '')}.ready`];
}

/** The texts kept ready: a shape and the separator its items are joined by. */
export const READY_TEXTS = [
  { shape: 'geojson', separator: '\n' },
  { shape: 'topojson', separator: ',' },
  { shape: 'csv', separator: '\n' },
] as const satisfies readonly { shape: FeatureShape; separator: string }[];

/** Byte range [start, end) of an hour's items within the sidecar. */
export type ByteRange = [number, number];

/** One hour of a part that holds reports. */
export interface ReadyHour {
  hourMs: number;
  count: number;
  /** Its first report's position in the per-report index. */
  first: number;
  bbox: [number, number, number, number];
  /** created_at of its oldest and newest report (epoch ms). */
  minMs: number;
  maxMs: number;
  /** Its items in each shape. */
  geojson: ByteRange;
  topojson: ByteRange;
  csv: ByteRange;
  /** Its reports as one Arrow IPC record batch message (the Arrow answer's schema). */
  arrow: ByteRange;
}

/** The sidecar's first line. */
export interface ReadyIndex {
  version: 3;
  /** Hours with reports, newest first. Byte offsets count from the end of this line. */
  hours: ReadyHour[];
  /** Where the per-report index starts, how many reports it has, and the city codes it names. */
  items: { at: number; count: number; codes: string[] };
  /**
   * The part's reports as a Parquet file in the answer's form (export columns and WKB geometry,
   * newest first): a window's Parquet answer splices its row groups. Absent from sidecars
   * written before it existed.
   */
  parquet?: ByteRange;
}

/** Where a part's ready texts live. */
export function readyKeyOf(partKey: string): string {
  if (!partKey.startsWith(REPORTS_PREFIX)) throw new Error(`not a part key: ${partKey}`);
  return `${READY_PREFIX}${partKey.slice(REPORTS_PREFIX.length).replace(/\.parquet$/, '')}.ready`;
}

/** The sidecar of a listed part, as an object of its own (same ETag: it is derived from that part). */
export function readyInfoOf(part: ObjectInfo): ObjectInfo {
  return { ...part, key: readyKeyOf(part.key) };
}

/**
 * Writes the ready texts of one part file. Purged retractions (tombstones in the part) are left
 * out, as answers leave them out. The texts come from the same SQL as DuckDB's answers, so an
 * answer read from them is byte for byte the one DuckDB would build.
 */
export async function writeReadyTexts(db: DuckDb, partFile: string, out: string): Promise<void> {
  const from = `FROM read_parquet(${sqlString(partFile)}) WHERE status <> 'retracted'`;
  const answerParquet = `${out}.parquet`;
  try {
    await writeReady(db, from, answerParquet, out);
  } finally {
    await fs.rm(answerParquet, { force: true });
  }
}

async function writeReady(db: DuckDb, from: string, answerParquet: string, out: string): Promise<void> {
  const texts = READY_TEXTS.map(({ shape, separator }) => `encode(string_agg(${ITEM_SQL[shape]}, ${sqlString(separator)} ORDER BY created_at DESC, pkey DESC)) AS ${shape}`);
  const [rows, items, arrow] = await db.withConnection(async (conn) => {
    await copyAnswerParquet(conn, `(SELECT * ${from})`, answerParquet);
    const hours = await conn.runAndReadAll(
      `SELECT epoch_ms(created_at) // ${HOUR_MS} * ${HOUR_MS} AS hour_ms, count(*)::INTEGER AS n,
          min(lng) AS min_lng, min(lat) AS min_lat, max(lng) AS max_lng, max(lat) AS max_lat,
          min(epoch_ms(created_at)) AS min_ms, max(epoch_ms(created_at)) AS max_ms, ${texts.join(', ')}
        ${from} GROUP BY 1 ORDER BY 1 DESC`,
    );
    // Each report's sort key, place, city and byte lengths, in answer order (strlen: bytes).
    const each = await conn.runAndReadAll(
      `SELECT epoch_us(created_at)::DOUBLE, lng, lat, instance_region_code, ${READY_TEXTS.map(({ shape }) => `strlen(${ITEM_SQL[shape]})::INTEGER`).join(', ')}
        ${from} ORDER BY created_at DESC, pkey DESC`,
    );
    return [
      hours.getRowsJS() as [bigint, number, number, number, number, number, bigint, bigint, Uint8Array, Uint8Array, Uint8Array][],
      each.getRowsJS() as [number, number, number, string | null, number, number, number][],
      await arrowDayOf(conn, { sql: `(SELECT * ${from})`, values: {}, types: {} }),
    ] as const;
  });
  // Offsets count from the end of the index line.
  const body: Uint8Array[] = [];
  let first = 0;
  const hours: ReadyHour[] = rows.map((r) => {
    const hour: ReadyHour = { hourMs: Number(r[0]), count: r[1], first, bbox: [r[2], r[3], r[4], r[5]], minMs: Number(r[6]), maxMs: Number(r[7]), geojson: [0, 0], topojson: [0, 0], csv: [0, 0], arrow: [0, 0] };
    first += r[1];
    return hour;
  });
  let at = 0;
  const starts = READY_TEXTS.map(({ shape, separator }, s) => {
    // Sections start 8-byte aligned (the Arrow messages must be).
    const pad = (8 - (at % 8)) % 8;
    body.push(new Uint8Array(pad));
    at += pad;
    const start = at;
    rows.forEach((r, i) => {
      if (i > 0) {
        body.push(Buffer.from(separator));
        at += 1;
      }
      const text = r[8 + s] as Uint8Array;
      hours[i]![shape] = [at, at + text.byteLength];
      body.push(text);
      at += text.byteLength;
    });
    return start;
  });
  // Each hour's Arrow record batch, hours back to back (8-byte aligned, as IPC messages are).
  const messages = batchMessages(arrow, hours.map((h) => [h.first, h.first + h.count] as const));
  for (const [i, hour] of hours.entries()) {
    const message = messages[i]!;
    hour.arrow = [at, at + message.byteLength];
    body.push(message);
    at += message.byteLength;
  }
  // The per-report index, 8-byte aligned: created_at (µs), lng, lat, each item's end in each
  // shape, its city (an index into `codes`; 255: none).
  const n = items.length;
  const pad = (8 - (at % 8)) % 8;
  body.push(new Uint8Array(pad));
  const itemsAt = at + pad;
  const block = new ArrayBuffer(n * ITEM_BYTES);
  const created = new Float64Array(block, 0, n);
  const lng = new Float64Array(block, 8 * n, n);
  const lat = new Float64Array(block, 16 * n, n);
  const ends = READY_TEXTS.map((_, s) => new Uint32Array(block, 24 * n + 4 * s * n, n));
  const city = new Uint8Array(block, 36 * n, n);
  const codes: string[] = [];
  const pos = starts.map((start) => start - 1);
  items.forEach((r, i) => {
    created[i] = r[0];
    lng[i] = r[1];
    lat[i] = r[2];
    if (r[3] === null) city[i] = 255;
    else {
      if (!codes.includes(r[3])) codes.push(r[3]);
      city[i] = codes.indexOf(r[3]);
    }
    ends.forEach((e, s) => {
      // One separator before every item but the first (also between hours).
      pos[s] = pos[s]! + 1 + (r[4 + s] as number);
      e[i] = pos[s]!;
    });
  });
  if (codes.length > 254) throw new Error('a part holds more than 254 cities');
  body.push(new Uint8Array(block));
  const parquetAt = itemsAt + block.byteLength;
  const parquet = await fs.readFile(answerParquet);
  body.push(parquet);
  const index: ReadyIndex = { version: 3, hours, items: { at: itemsAt, count: n, codes }, parquet: [parquetAt, parquetAt + parquet.byteLength] };
  // One write: given the pieces, writeFile awaits a write per piece (thousands for a busy part).
  await fs.writeFile(out, Buffer.concat([Buffer.from(`${JSON.stringify(index)}\n`), ...body]));
}

/** Bytes per report of the per-report index. */
const ITEM_BYTES = 37;

/** Stores a part written to `file` under `key`, its ready texts first. */
export async function publishPart(deps: { store: ObjectStore; db: DuckDb }, key: string, file: string, options: { readyTexts?: boolean } = {}): Promise<Buffer> {
  if (options.readyTexts ?? true) {
    const ready = `${file}.ready`;
    try {
      await writeReadyTexts(deps.db, file, ready);
      await deps.store.put(readyKeyOf(key), await fs.readFile(ready));
    } finally {
      await fs.rm(ready, { force: true });
    }
  }
  await writeStatsSidecar(deps, key, file);
  const body = await fs.readFile(file);
  await deps.store.put(key, body);
  return body;
}

/**
 * Writes the ready texts of a part stored without them (written before they existed, or
 * before this version of them), or whose sidecar has no answer-form Parquet yet (written
 * before it existed): a compaction pass brings an older archive to cold reads at ready-text
 * speed, and its days to spliced Parquet answers. True if written.
 */
export async function backfillReadyTexts(deps: { store: ObjectStore; db: DuckDb }, part: ObjectInfo, partFile: string, out: string): Promise<boolean> {
  if ((await storedIndex(deps.store, readyKeyOf(part.key)))?.parquet) return false;
  try {
    await writeReadyTexts(deps.db, partFile, out);
    await deps.store.put(readyKeyOf(part.key), await fs.readFile(out));
  } finally {
    await fs.rm(out, { force: true });
  }
  await deps.store.delete(oldReadyKeysOf(part.key));
  return true;
}

/** The index of a stored sidecar, read from its first bytes alone; undefined when there is none (or none this version reads). */
export async function storedIndex(store: ObjectStore, key: string): Promise<ReadyIndex | undefined> {
  for (let length = 64 * 1024; ; length *= 4) {
    const head = await store.getRange(key, 0, length);
    if (!head) return undefined;
    const eol = head.indexOf(10);
    if (eol < 0 && head.length === length) continue;
    try {
      const index = JSON.parse(head.subarray(0, eol).toString('utf8')) as ReadyIndex;
      return index.version === 3 ? index : undefined;
    } catch {
      return undefined;
    }
  }
}

/** Deletes parts, then their ready texts (a sidecar without its part is never read). */
export async function deleteParts(store: ObjectStore, keys: readonly string[]): Promise<void> {
  await store.delete(keys);
  await store.delete([...keys.map(readyKeyOf), ...keys.map(statsKeyOf), ...keys.flatMap(oldReadyKeysOf)]);
}

/** A sidecar file's index, and which version of the file it was read from. */
export interface ReadyFile {
  file: string;
  /** inode, size and mtime: a purge rewrites a part and its sidecar under the same key. */
  version: string;
  /** Where the body starts (the index line's length). */
  base: number;
  index: ReadyIndex;
}

/** Indexes read lately, by sidecar file. */
const indexes = new Map<string, ReadyFile>();
const MAX_INDEXES = 20_000;

const versionOf = (st: { ino: number; size: number; mtimeMs: number }) => `${st.ino}:${st.size}:${st.mtimeMs}`;

/** A sidecar's index (its first line); cached, as a window over a year reads hundreds. */
export function readReadyIndex(file: string): ReadyFile {
  const version = versionOf(statSync(file));
  const known = indexes.get(file);
  if (known?.version === version) return known;
  const fd = openSync(file, 'r');
  try {
    const read = readyFileOf(fd, file);
    if (indexes.size >= MAX_INDEXES) indexes.delete(indexes.keys().next().value!);
    indexes.set(file, read);
    return read;
  } finally {
    closeSync(fd);
  }
}

function readyFileOf(fd: number, file: string): ReadyFile {
  const version = versionOf(fstatSync(fd));
  let buf = Buffer.allocUnsafe(16 * 1024);
  let n = 0;
  for (;;) {
    const got = readSync(fd, buf, n, buf.length - n, n);
    n += got;
    const eol = buf.subarray(0, n).indexOf(10);
    if (eol >= 0) {
      const index = JSON.parse(buf.subarray(0, eol).toString('utf8')) as ReadyIndex;
      if (index.version !== 3) throw new Error(`unknown ready-text version in ${file}`);
      return { file, version, base: eol + 1, index };
    }
    if (got === 0) throw new Error(`ready texts without an index: ${file}`);
    if (n === buf.length) buf = Buffer.concat([buf, Buffer.allocUnsafe(buf.length)]);
  }
}

/**
 * A sidecar opened for reading later: the handle keeps this version of it readable (a purge
 * replaces the file, never changes it in place), and the index is the one of that version.
 */
export async function openReady(file: string): Promise<{ handle: FileHandle; ready: ReadyFile }> {
  const handle = await fs.open(file, 'r');
  try {
    return { handle, ready: current(handle.fd, readReadyIndex(file)) };
  } catch (err) {
    await handle.close();
    throw err;
  }
}

/** The sidecar as it is now: `ready` if unchanged, else its new index (a purge rewrote it meanwhile). */
function current(fd: number, ready: ReadyFile): ReadyFile {
  return versionOf(fstatSync(fd)) === ready.version ? ready : readyFileOf(fd, ready.file);
}

function readExactly(fd: number, out: Uint8Array, position: number, file: string): void {
  for (let off = 0; off < out.byteLength; ) {
    const n = readSync(fd, out, off, out.byteLength - off, position + off);
    if (n === 0) throw new Error(`ready texts truncated: ${file}`);
    off += n;
  }
}

/** Turns the newlines between GeoJSON Features into the commas of a FeatureCollection. */
function toCommas(out: Buffer): void {
  for (let at = out.indexOf(10); at >= 0; at = out.indexOf(10, at + 1)) out[at] = 44;
}

export type ReadyShape = (typeof READY_TEXTS)[number]['shape'];

/**
 * The items of consecutive `hours` of a sidecar in one shape (their Arrow record batches for
 * 'arrow'), as chunks read when the previous one has been taken (synchronously: a page-cached
 * read takes well under a millisecond, and a thread-pool round trip per chunk would mostly
 * wait), each into a reused buffer (readBuffers.ts), so an answer's memory stays a few chunks
 * however many hours it reads. `commas`: a FeatureCollection's separators, put where the
 * per-report index says the items end (no scan of the text). Should a purge have rewritten the
 * sidecar since its index was read, the range is taken from the file as it now is.
 */
export function streamHours(ready: ReadyFile, hours: readonly number[], shape: ReadyShape | 'arrow', commas: boolean): () => Iterable<Uint8Array> {
  return function* () {
    const fd = openSync(ready.file, 'r');
    try {
      const now = current(fd, ready);
      const held = now.index.hours.filter((h) => hours.includes(h.hourMs));
      if (held.length === 0) return;
      const last = held[held.length - 1]!;
      const [from, to] = [held[0]![shape][0], last[shape][1]];
      // Every item's end but the last one's is the separator after it.
      const separators = commas && shape !== 'arrow' ? itemEnds(fd, now, shape, held[0]!.first, last.first + last.count - 1) : undefined;
      let next = 0;
      for (let at = from; at < to; ) {
        const piece = takeChunk().subarray(0, Math.min(CHUNK_BYTES, to - at));
        readExactly(fd, piece, now.base + at, ready.file);
        if (separators) {
          for (; next < separators.length && separators[next]! < at + piece.byteLength; next++) {
            const i = separators[next]! - at;
            if (piece[i] !== 10) throw new Error(`ready texts out of step with their index: ${ready.file}`);
            piece[i] = 44;
          }
        }
        at += piece.byteLength;
        yield piece;
      }
    } finally {
      closeSync(fd);
    }
  };
}

/** Where items [from, to) of a sidecar end in one shape (positions in its body), from its per-report index. */
function itemEnds(fd: number, ready: ReadyFile, shape: ReadyShape, from: number, to: number): Uint32Array {
  const n = ready.index.items.count;
  const s = READY_TEXTS.findIndex((t) => t.shape === shape);
  const out = new Uint32Array(Math.max(0, to - from));
  readExactly(fd, new Uint8Array(out.buffer), ready.base + ready.index.items.at + 24 * n + 4 * s * n + 4 * from, ready.file);
  return out;
}

/** The per-report index of a sidecar: sort key, place, city, and where each report's items end. */
export interface ReadyItems {
  createdUs: Float64Array;
  lng: Float64Array;
  lat: Float64Array;
  ends: Record<ReadyShape, Uint32Array>;
  city: Uint8Array;
}

export function readItems(ready: ReadyFile, fd?: number): ReadyItems {
  const own = fd === undefined;
  const handle = fd ?? openSync(ready.file, 'r');
  try {
    const n = ready.index.items.count;
    const block = new ArrayBuffer(n * ITEM_BYTES);
    readExactly(handle, new Uint8Array(block), ready.base + ready.index.items.at, ready.file);
    const ends = Object.fromEntries(READY_TEXTS.map(({ shape }, s) => [shape, new Uint32Array(block, 24 * n + 4 * s * n, n)])) as Record<ReadyShape, Uint32Array>;
    return { createdUs: new Float64Array(block, 0, n), lng: new Float64Array(block, 8 * n, n), lat: new Float64Array(block, 16 * n, n), ends, city: new Uint8Array(block, 36 * n, n) };
  } finally {
    if (own) closeSync(handle);
  }
}

/** What a window keeps of an hour: created_at within [startMs, endMs], and its city and bbox filters. */
export interface ItemFilter {
  startMs: number;
  endMs: number;
  admin: string | undefined;
  bbox?: [number, number, number, number] | undefined;
}

/** The reports of an hour a filter keeps: runs of consecutive positions [from, to), and their bbox. */
export interface Selection {
  runs: [number, number][];
  count: number;
  bbox: [number, number, number, number] | undefined;
}

/** Selects an hour's reports as DuckDB's filters would (the same doubles compared; created_at to the microsecond). */
export function selectItems(ready: ReadyFile, items: ReadyItems, hour: ReadyHour, filter: ItemFilter): Selection {
  const startUs = filter.startMs * 1000;
  const endUs = filter.endMs * 1000;
  const code = filter.admin === undefined ? -1 : ready.index.items.codes.indexOf(filter.admin);
  const runs: [number, number][] = [];
  let count = 0;
  let minX = Infinity;
  let minY = Infinity;
  let maxX = -Infinity;
  let maxY = -Infinity;
  for (let i = hour.first; i < hour.first + hour.count; i++) {
    const t = items.createdUs[i]!;
    const x = items.lng[i]!;
    const y = items.lat[i]!;
    if (t < startUs || t > endUs) continue;
    if (filter.admin !== undefined && items.city[i] !== code) continue;
    if (filter.bbox && (x < filter.bbox[0] || x > filter.bbox[2] || y < filter.bbox[1] || y > filter.bbox[3])) continue;
    const last = runs[runs.length - 1];
    if (last && last[1] === i) last[1] = i + 1;
    else runs.push([i, i + 1]);
    count += 1;
    if (x < minX) minX = x;
    if (x > maxX) maxX = x;
    if (y < minY) minY = y;
    if (y > maxY) maxY = y;
  }
  return { runs, count, bbox: count > 0 ? [minX, minY, maxX, maxY] : undefined };
}

/**
 * Reads the selected reports of one hour when called, joined by the shape's separator. Should a
 * purge have rewritten the sidecar meanwhile, the selection is made again from the file as it
 * now is.
 */
export function readSelection(ready: ReadyFile, hourMs: number, selection: Selection, filter: ItemFilter, shape: ReadyShape, commas: boolean): () => Uint8Array {
  return () => {
    const fd = openSync(ready.file, 'r');
    try {
      const now = current(fd, ready);
      const hour = now.index.hours.find((h) => h.hourMs === hourMs);
      if (!hour) return new Uint8Array(0);
      const items = readItems(now, fd);
      const { runs } = now === ready ? selection : selectItems(now, items, hour, filter);
      if (runs.length === 0) return new Uint8Array(0);
      const ends = items.ends[shape];
      const startOf = (i: number) => (i === hour.first ? hour[shape][0] : ends[i - 1]! + 1);
      const [from, to] = [startOf(runs[0]![0]), ends[runs[runs.length - 1]![1] - 1]!];
      const text = Buffer.allocUnsafe(to - from);
      readExactly(fd, text, now.base + from, ready.file);
      const separator = READY_TEXTS.find((t) => t.shape === shape)!.separator.charCodeAt(0);
      const out = Buffer.allocUnsafe(runs.reduce((n, [a, b]) => n + ends[b - 1]! - startOf(a), runs.length - 1));
      let at = 0;
      runs.forEach(([a, b], r) => {
        if (r > 0) out[at++] = separator;
        at += text.copy(out, at, startOf(a) - from, ends[b - 1]! - from);
      });
      if (commas) toCommas(out);
      return out;
    } finally {
      closeSync(fd);
    }
  };
}
