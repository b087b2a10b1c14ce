// Reads a ready text's sections: whole hours (each a gzip member, inflated as it is sent) and
// the reports a selection keeps. Should a purge have rewritten the sidecar since its index was
// read, the ranges are taken from the file as it now is.
import { closeSync, openSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { itemColumns, ITEM_BYTES, plainStartOf, READY_TEXTS, sectionOf, type ReadyHour, type ReadyItems, type ReadyShape } from './readyFormat.js';
import { current, type ReadyFile } from './readyIndex.js';
import { readExactly } from './readExactly.js';
import { selectItems, type ItemFilter, type Selection } from './itemFilter.js';

/** Turns the newlines between GeoJSON Features into the commas of a FeatureCollection (JSON text never holds a raw newline). */
function toCommas(out: Buffer): void {
  for (let at = out.indexOf(10); at >= 0; at = out.indexOf(10, at + 1)) out[at] = 44;
}

/** An hour's section as stored: its gzip member. */
function memberOf(fd: number, ready: ReadyFile, hour: ReadyHour, section: ReadyShape | 'arrow'): Buffer {
  const [start, end] = hour[section];
  const member = Buffer.allocUnsafe(end - start);
  readExactly(fd, member, ready.base + start, ready.file);
  return member;
}

/**
 * An hour's section, plain: inflated synchronously into one buffer of its size (the member's
 * last four bytes), about 1.5 GB/s here. zlib's thread-pool calls were slower (their hand-offs,
 * and 16 KB output chunks joined afterwards), and so was a thread of its own on two cores, both
 * busy with the answer and its client.
 */
function inflate(member: Buffer, file: string): Buffer {
  try {
    return gunzipSync(member, { chunkSize: Math.max(64, member.readUInt32LE(member.length - 4)) });
  } catch (err) {
    throw new Error(`ready texts damaged (${(err as Error).message}): ${file}`, { cause: err });
  }
}

/**
 * The items of consecutive `hours` of a sidecar in one shape, the shape's separator between
 * hours (their Arrow record batches, back to back, for 'arrow'), an hour at a time, each read
 * and inflated when the one before it has been taken. `commas`: a FeatureCollection's separators.
 */
export function streamHours(ready: ReadyFile, hours: readonly number[], shape: ReadyShape | 'arrow', commas: boolean): () => Iterable<Uint8Array> {
  return function* () {
    const fd = openSync(ready.file, 'r');
    try {
      const now = current(fd, ready);
      const separator = shape === 'arrow' ? undefined : Buffer.from(commas ? ',' : READY_TEXTS[sectionOf(shape)]!.separator);
      let first = true;
      for (const hour of now.index.hours) {
        if (!hours.includes(hour.hourMs)) continue;
        const plain = inflate(memberOf(fd, now, hour, shape), now.file);
        if (commas) toCommas(plain);
        if (!first && separator) yield separator;
        first = false;
        yield plain;
      }
    } finally {
      closeSync(fd);
    }
  };
}

/** The per-report index of a sidecar: sort key, place, city, and where each report's items end. */
export function readItems(ready: ReadyFile, fd?: number): ReadyItems {
  const own = fd === undefined;
  const handle = fd ?? openSync(ready.file, 'r');
  try {
    const n = ready.index.items.count;
    const block = new ArrayBuffer(n * ITEM_BYTES);
    readExactly(handle, new Uint8Array(block), ready.base + ready.index.items.at, ready.file);
    const items = itemColumns(block, n);
    // Each hour's newest and oldest report where the index line says: bytes that are not this
    // sidecar's (zeros of a range never fetched, a damaged file) fail here, not as an empty selection.
    const msAt = (i: number) => Math.floor(items.createdUs[i]! / 1000);
    for (const h of ready.index.hours) {
      if (msAt(h.first) !== h.maxMs || msAt(h.first + h.count - 1) !== h.minMs) throw new Error(`ready texts' per-report index out of step with their index: ${ready.file}`);
    }
    return items;
  } finally {
    if (own) closeSync(handle);
  }
}

/**
 * Reads the selected reports of one hour when called, joined by the shape's separator: the
 * hour is inflated and its items cut out where the per-report index says they end. Should a
 * purge have rewritten the sidecar meanwhile, the selection is made again from the file as it
 * now is.
 */
export function readSelection(ready: ReadyFile, hourMs: number, selection: Selection, filter: ItemFilter, shape: ReadyShape, commas: boolean): () => Uint8Array {
  return () => {
    const fd = openSync(ready.file, 'r');
    let member: Buffer;
    let now: ReadyFile;
    let hour: ReadyHour | undefined;
    let items: ReadyItems;
    let runs: Selection['runs'];
    try {
      now = current(fd, ready);
      hour = now.index.hours.find((h) => h.hourMs === hourMs);
      if (!hour) return new Uint8Array(0);
      items = readItems(now, fd);
      runs = now === ready ? selection.runs : selectItems(now, items, hour, filter).runs;
      if (runs.length === 0) return new Uint8Array(0);
      member = memberOf(fd, now, hour, shape);
    } finally {
      closeSync(fd);
    }
    const text = inflate(member, now.file);
    const ends = items.ends[shape];
    const base = plainStartOf(hour, ends);
    const startOf = (i: number) => (i === hour.first ? 0 : ends[i - 1]! + 1 - base);
    const endOf = (i: number) => ends[i]! - base;
    if (endOf(hour.first + hour.count - 1) !== text.byteLength) throw new Error(`ready texts out of step with their index: ${now.file}`);
    const separator = READY_TEXTS[sectionOf(shape)]!.separator.charCodeAt(0);
    const out = Buffer.allocUnsafe(runs.reduce((n, [a, b]) => n + endOf(b - 1) - startOf(a), runs.length - 1));
    let at = 0;
    runs.forEach(([a, b], r) => {
      if (r > 0) out[at++] = separator;
      at += text.copy(out, at, startOf(a), endOf(b - 1));
    });
    if (commas) toCommas(out);
    return out;
  };
}
