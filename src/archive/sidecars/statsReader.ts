// Reads a stats sidecar's columns from a local file (synchronously: a year reads a few hundred
// small files, and a thread-pool round trip each would mostly wait).
import { closeSync, openSync, readSync } from 'node:fs';
import { align8, columnOffsets, STATS_VERSION, type StatsHeader } from './statsFormat.js';

/** A sidecar's reports: the columns asked for (the others empty), oldest first. */
export interface StatsReports {
  count: number;
  cities: readonly string[];
  areas: readonly string[];
  createdUs: Float64Array;
  lng: Float64Array;
  lat: Float64Array;
  /** An index into `areas`; NO_AREA: none. */
  area: Uint16Array;
  /** An index into `cities`; NO_CITY: none. */
  city: Uint16Array;
}

/** Which columns beside created_at to read. */
export interface StatsColumns {
  place: boolean;
  area: boolean;
  city: boolean;
}

/** Reads a sidecar file; only the columns asked for are read. */
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
    const header = JSON.parse(head.subarray(0, eol).toString('utf8')) as StatsHeader;
    if (header.version !== STATS_VERSION) throw new Error(`unknown stats sidecar version in ${file}`);
    const n = header.count;
    const base = align8(eol + 1);
    const at = columnOffsets(n);
    // Each column into its own array: the columns not asked for are never allocated.
    const read = <T extends ArrayBufferView>(column: T, from: number): T => {
      const bytes = new Uint8Array(column.buffer, column.byteOffset, column.byteLength);
      for (let off = 0; off < bytes.byteLength; ) {
        const r = readSync(fd, bytes, off, bytes.byteLength - off, base + from + off);
        if (r === 0) throw new Error(`stats sidecar truncated: ${file}`);
        off += r;
      }
      return column;
    };
    return {
      count: n,
      cities: header.cities,
      areas: header.areas,
      createdUs: read(new Float64Array(n), at.createdUs),
      lng: need.place ? read(new Float64Array(n), at.lng) : new Float64Array(0),
      lat: need.place ? read(new Float64Array(n), at.lat) : new Float64Array(0),
      area: need.area ? read(new Uint16Array(n), at.area) : new Uint16Array(0),
      city: need.city ? read(new Uint16Array(n), at.city) : new Uint16Array(0),
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
