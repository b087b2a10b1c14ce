// Ready texts: when a part is written (by the worker, compaction, reprocessing or a purge), its
// reports are also serialised once into a sidecar object beside it under `ready/v2/` (same
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
import fs from 'node:fs/promises';
import { sqlString, type DuckDb } from '../duckdb.js';
import { REPORTS_PREFIX } from '../reports/layout.js';
import type { ObjectInfo, ObjectStore } from '../store/objectStore.js';
import { HOUR_MS } from './plan.js';
import { ITEM_SQL, type FeatureShape } from './sql.js';

const READY_PREFIX = 'ready/v2/';
/** Where sidecars were kept before v2 (zstd Parquet read back by DuckDB): deleted with their parts. */
const OLD_READY_PREFIX = 'ready/v1/';

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
  bbox: [number, number, number, number];
  /** created_at of its oldest and newest report (epoch ms). */
  minMs: number;
  maxMs: number;
  /** Its items in each shape. */
  geojson: ByteRange;
  topojson: ByteRange;
  csv: ByteRange;
}

/** The sidecar's first line. */
export interface ReadyIndex {
  version: 2;
  /** Hours with reports, newest first. */
  hours: ReadyHour[];
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
  const texts = READY_TEXTS.map(({ shape, separator }) => `encode(string_agg(${ITEM_SQL[shape]}, ${sqlString(separator)} ORDER BY created_at DESC, pkey DESC)) AS ${shape}`);
  const rows = await db.withConnection(async (conn) => {
    const reader = await conn.runAndReadAll(
      `SELECT epoch_ms(created_at) // ${HOUR_MS} * ${HOUR_MS} AS hour_ms, count(*)::INTEGER AS n,
          min(lng) AS min_lng, min(lat) AS min_lat, max(lng) AS max_lng, max(lat) AS max_lat,
          min(epoch_ms(created_at)) AS min_ms, max(epoch_ms(created_at)) AS max_ms, ${texts.join(', ')}
        FROM read_parquet(${sqlString(partFile)}) WHERE status <> 'retracted' GROUP BY 1 ORDER BY 1 DESC`,
    );
    return reader.getRowsJS() as [bigint, number, number, number, number, number, bigint, bigint, Uint8Array, Uint8Array, Uint8Array][];
  });
  // Offsets are relative to the end of the index line until its length is known.
  const sections: Uint8Array[] = [];
  const hours: ReadyHour[] = rows.map((r) => ({ hourMs: Number(r[0]), count: r[1], bbox: [r[2], r[3], r[4], r[5]], minMs: Number(r[6]), maxMs: Number(r[7]), geojson: [0, 0], topojson: [0, 0], csv: [0, 0] }));
  let at = 0;
  READY_TEXTS.forEach(({ shape, separator }, s) => {
    rows.forEach((r, i) => {
      if (i > 0) {
        sections.push(Buffer.from(separator));
        at += 1;
      }
      const text = r[8 + s] as Uint8Array;
      hours[i]![shape] = [at, at + text.byteLength];
      sections.push(text);
      at += text.byteLength;
    });
  });
  // The index's length depends on the offsets it holds: grown until it is stable.
  let base = 0;
  let line: string;
  for (;;) {
    const shifted = hours.map((h) => ({ ...h, ...Object.fromEntries(READY_TEXTS.map(({ shape }) => [shape, [h[shape][0] + base, h[shape][1] + base]])) }));
    line = `${JSON.stringify({ version: 2, hours: shifted } satisfies ReadyIndex)}\n`;
    if (Buffer.byteLength(line) === base) break;
    base = Buffer.byteLength(line);
  }
  await fs.writeFile(out, [Buffer.from(line), ...sections]);
}

/** Stores a part written to `file` under `key`, its ready texts first. */
export async function publishPart(deps: { store: ObjectStore; db: DuckDb }, key: string, file: string): Promise<Buffer> {
  const ready = `${file}.ready`;
  try {
    await writeReadyTexts(deps.db, file, ready);
    await deps.store.put(readyKeyOf(key), await fs.readFile(ready));
  } finally {
    await fs.rm(ready, { force: true });
  }
  const body = await fs.readFile(file);
  await deps.store.put(key, body);
  return body;
}

/**
 * Writes the ready texts of a part stored without them (written before they existed, or
 * before this version of them): a compaction pass brings an older archive to cold reads at
 * ready-text speed. True if written.
 */
export async function backfillReadyTexts(deps: { store: ObjectStore; db: DuckDb }, part: ObjectInfo, partFile: string, out: string): Promise<boolean> {
  if (await deps.store.head(readyKeyOf(part.key))) return false;
  try {
    await writeReadyTexts(deps.db, partFile, out);
    await deps.store.put(readyKeyOf(part.key), await fs.readFile(out));
  } finally {
    await fs.rm(out, { force: true });
  }
  await deps.store.delete([OLD_READY_PREFIX + part.key.slice(REPORTS_PREFIX.length)]);
  return true;
}

/** Deletes parts, then their ready texts (a sidecar without its part is never read). */
export async function deleteParts(store: ObjectStore, keys: readonly string[]): Promise<void> {
  await store.delete(keys);
  await store.delete([...keys.map(readyKeyOf), ...keys.map((k) => OLD_READY_PREFIX + k.slice(REPORTS_PREFIX.length))]);
}

/** A sidecar file's index, and which version of the file it was read from. */
export interface ReadyFile {
  file: string;
  /** inode, size and mtime: a purge rewrites a part and its sidecar under the same key. */
  version: string;
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
    const read = { file, version: versionOf(fstatSync(fd)), index: indexOf(fd, file) };
    if (indexes.size >= MAX_INDEXES) indexes.delete(indexes.keys().next().value!);
    indexes.set(file, read);
    return read;
  } finally {
    closeSync(fd);
  }
}

function indexOf(fd: number, file: string): ReadyIndex {
  let buf = Buffer.allocUnsafe(16 * 1024);
  let n = 0;
  for (;;) {
    const got = readSync(fd, buf, n, buf.length - n, n);
    n += got;
    const eol = buf.subarray(0, n).indexOf(10);
    if (eol >= 0) {
      const index = JSON.parse(buf.subarray(0, eol).toString('utf8')) as ReadyIndex;
      if (index.version !== 2) throw new Error(`unknown ready-text version in ${file}`);
      return index;
    }
    if (got === 0) throw new Error(`ready texts without an index: ${file}`);
    if (n === buf.length) buf = Buffer.concat([buf, Buffer.allocUnsafe(buf.length)]);
  }
}

/** The byte range of consecutive hours (newest first) of a sidecar in one shape; undefined when they hold no reports. */
export function rangeOf(index: ReadyIndex, hours: readonly number[], shape: ReadyShape): ByteRange | undefined {
  const held = index.hours.filter((h) => hours.includes(h.hourMs));
  return held.length === 0 ? undefined : [held[0]![shape][0], held[held.length - 1]![shape][1]];
}

export type ReadyShape = (typeof READY_TEXTS)[number]['shape'];

/**
 * Reads the items of consecutive `hours` of a sidecar when called (synchronously: a
 * page-cached read of a few MB takes well under a millisecond, and a thread-pool round trip
 * per range would mostly wait). `commas`: turns the newlines between GeoJSON Features into the
 * commas of a FeatureCollection. Should a purge have rewritten the sidecar since its index was
 * read, the range is taken from the file as it now is, so the bytes always match their index.
 */
export function readHours(ready: ReadyFile, hours: readonly number[], shape: ReadyShape, commas: boolean): () => Uint8Array {
  return () => {
    const fd = openSync(ready.file, 'r');
    try {
      const range = rangeOf(versionOf(fstatSync(fd)) === ready.version ? ready.index : indexOf(fd, ready.file), hours, shape);
      if (!range) return new Uint8Array(0);
      const out = Buffer.allocUnsafe(range[1] - range[0]);
      for (let off = 0; off < out.length; ) {
        const n = readSync(fd, out, off, out.length - off, range[0] + off);
        if (n === 0) throw new Error(`ready texts truncated: ${ready.file}`);
        off += n;
      }
      if (commas) for (let at = out.indexOf(10); at >= 0; at = out.indexOf(10, at + 1)) out[at] = 44;
      return out;
    } finally {
      closeSync(fd);
    }
  };
}
