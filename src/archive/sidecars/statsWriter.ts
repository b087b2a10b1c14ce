// Counts ready at write time: when a part is written (flush, compaction, reprocessing, purge),
// the few columns `stats` filters and groups by are also written into a small sidecar beside it,
// at the same path under `stats/v1/` (outside the Parquet layout, like the ready texts). A
// stats answer then counts a year of reports in JavaScript from about 10 bytes each, with no
// Parquet decoding and no DuckDB; DuckDB counts only what the sidecars cannot answer (see
// `countStats` in stats.ts). The sidecar is written before its part and deleted with it.
//
// The reports are kept one by one rather than pre-counted: at the archive's density (a few
// reports per barangay and hour) counts per hour × barangay are nearly as many as the reports,
// and single reports answer any window edge, bbox and UTC offset exactly.
//
// Layout: one line of JSON (the header), zero padding to a multiple of 8 bytes, then five
// columns of `count` values, reports oldest first: created_at (epoch µs, float64), lng and lat
// (float64), the barangay (uint16 index into `areas`; 65535: none) and the city (uint8 index
// into `cities`; 255: none). Retracted tombstones (purged reports) are left out, as answers
// leave them out.
import { closeSync, openSync, readSync } from 'node:fs';
import { sqlString, type DuckDb } from '../duckdb.js';
import { REPORTS_PREFIX } from '../reports/layout.js';
import type { ObjectInfo, ObjectStore } from '../store/objectStore.js';

const STATS_PREFIX = 'stats/v1/';
const NO_AREA = 65_535;
const NO_CITY = 255;
/** Bytes per report: created_at, lng, lat (8 each), barangay (2), city (1). */
const REPORT_BYTES = 27;

interface Header {
  version: 1;
  count: number;
  cities: string[];
  areas: string[];
}

/** Where a part's stats sidecar lives. */
export function statsKeyOf(partKey: string): string {
  if (!partKey.startsWith(REPORTS_PREFIX)) throw new Error(`not a part key: ${partKey}`);
  return `${STATS_PREFIX}${partKey.slice(REPORTS_PREFIX.length).replace(/\.parquet$/, '')}.stats`;
}

/** The sidecar of a listed part, as an object of its own (same ETag: it is derived from that part). */
export function statsInfoOf(part: ObjectInfo): ObjectInfo {
  return { ...part, key: statsKeyOf(part.key) };
}

const align8 = (n: number) => Math.ceil(n / 8) * 8;

/** The sidecar of one part file; undefined when its codes do not fit the columns (it is then counted by DuckDB). */
export async function statsSidecarOf(db: DuckDb, partFile: string): Promise<Buffer | undefined> {
  const rows = await db.withConnection(async (conn) => {
    const reader = await conn.runAndReadAll(
      `SELECT epoch_us(created_at)::DOUBLE, lng, lat, local_area_id, instance_region_code
        FROM read_parquet(${sqlString(partFile)}) WHERE status <> 'retracted' ORDER BY created_at`,
    );
    return reader.getRowsJS() as [number, number, number, string | null, string | null][];
  });
  const n = rows.length;
  const cities: string[] = [];
  const areas: string[] = [];
  const cityIndex = new Map<string, number>();
  const areaIndex = new Map<string, number>();
  const indexOf = (code: string, list: string[], index: Map<string, number>) => {
    let i = index.get(code);
    if (i === undefined) index.set(code, (i = list.push(code) - 1));
    return i;
  };
  const block = new ArrayBuffer(n * REPORT_BYTES);
  const { createdUs, lng, lat, area, city } = columnsOf(block, 0, n);
  rows.forEach((r, i) => {
    createdUs[i] = r[0];
    lng[i] = r[1];
    lat[i] = r[2];
    area[i] = r[3] === null ? NO_AREA : indexOf(r[3], areas, areaIndex);
    city[i] = r[4] === null ? NO_CITY : indexOf(r[4], cities, cityIndex);
  });
  if (areas.length >= NO_AREA || cities.length >= NO_CITY) return undefined;
  const header: Header = { version: 1, count: n, cities, areas };
  const line = Buffer.from(`${JSON.stringify(header)}\n`);
  return Buffer.concat([line, Buffer.alloc(align8(line.length) - line.length), new Uint8Array(block)]);
}

/** The columns of `n` reports laid out from `at` in `block` (float64 first, so each stays aligned). */
function columnsOf(block: ArrayBuffer, at: number, n: number) {
  return {
    createdUs: new Float64Array(block, at, n),
    lng: new Float64Array(block, at + 8 * n, n),
    lat: new Float64Array(block, at + 16 * n, n),
    area: new Uint16Array(block, at + 24 * n, n),
    city: new Uint8Array(block, at + 26 * n, n),
  };
}

/**
 * Writes the stats sidecar of a part stored (or about to be stored) under `key` from its local
 * file. A part whose codes do not fit loses any older sidecar: it is counted by DuckDB.
 */
export async function writeStatsSidecar(deps: { store: ObjectStore; db: DuckDb }, key: string, partFile: string): Promise<void> {
  const body = await statsSidecarOf(deps.db, partFile);
  if (body) await deps.store.put(statsKeyOf(key), body);
  else await deps.store.delete([statsKeyOf(key)]);
}

/** Writes the sidecar of a part stored without one (written before sidecars existed). True if written. */
export async function backfillStatsSidecar(deps: { store: ObjectStore; db: DuckDb }, part: ObjectInfo, partFile: string): Promise<boolean> {
  if (await deps.store.head(statsKeyOf(part.key))) return false;
  await writeStatsSidecar(deps, part.key, partFile);
  return true;
}

/** A sidecar's reports: the columns a stats answer asked for (the others empty), oldest first. */
export interface StatsReports {
  count: number;
  cities: readonly string[];
  areas: readonly string[];
  createdUs: Float64Array;
  lng: Float64Array;
  lat: Float64Array;
  area: Uint16Array;
  city: Uint8Array;
}

/** Which columns beside created_at to read. */
export interface StatsColumns {
  place: boolean;
  area: boolean;
  city: boolean;
}

/**
 * Reads a sidecar file (synchronously: a year reads a few hundred small files, and a
 * thread-pool round trip each would mostly wait). Only the columns asked for are read.
 */
export function readStatsSidecar(file: string, need: StatsColumns): StatsReports {
  const fd = openSync(file, 'r');
  try {
    let head = Buffer.allocUnsafe(16 * 1024);
    let got = readSync(fd, head, 0, head.length, 0);
    let eol = head.subarray(0, got).indexOf(10);
    while (eol < 0) {
      if (got < head.length) throw new Error(`stats sidecar without a header: ${file}`);
      head = Buffer.concat([head, Buffer.allocUnsafe(head.length)]);
      got += readSync(fd, head, got, head.length - got, got);
      eol = head.subarray(0, got).indexOf(10);
    }
    const header = JSON.parse(head.subarray(0, eol).toString('utf8')) as Header;
    if (header.version !== 1) throw new Error(`unknown stats sidecar version in ${file}`);
    const n = header.count;
    const base = align8(eol + 1);
    // Each column into its own array: the columns not asked for are never allocated.
    const read = <T extends ArrayBufferView>(column: T, at: number): T => {
      const bytes = new Uint8Array(column.buffer, column.byteOffset, column.byteLength);
      for (let off = 0; off < bytes.byteLength; ) {
        const r = readSync(fd, bytes, off, bytes.byteLength - off, base + at + off);
        if (r === 0) throw new Error(`stats sidecar truncated: ${file}`);
        off += r;
      }
      return column;
    };
    return {
      count: n,
      cities: header.cities,
      areas: header.areas,
      createdUs: read(new Float64Array(n), 0),
      lng: need.place ? read(new Float64Array(n), 8 * n) : new Float64Array(0),
      lat: need.place ? read(new Float64Array(n), 16 * n) : new Float64Array(0),
      area: need.area ? read(new Uint16Array(n), 24 * n) : new Uint16Array(0),
      city: need.city ? read(new Uint8Array(n), 26 * n) : new Uint8Array(0),
    };
  } finally {
    closeSync(fd);
  }
}

/** The first position whose created_at is at least `us` (the reports are oldest first). */
export function firstAtOrAfter(createdUs: Float64Array, us: number): number {
  let lo = 0;
  let hi = createdUs.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (createdUs[mid]! < us) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export { NO_AREA, NO_CITY };
