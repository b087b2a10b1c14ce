// Reads a ready text's sections: whole hours (each a gzip member, inflated on the thread pool a
// few hours ahead of the one being sent) and the reports a selection keeps. Should a purge have
// rewritten the sidecar since its index was read, the ranges are taken from the file as it now is.
import { closeSync, openSync } from 'node:fs';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import { itemColumns, ITEM_BYTES, plainStartOf, READY_TEXTS, sectionOf, type ReadyHour, type ReadyItems, type ReadyShape } from './readyFormat.js';
import { current, type ReadyFile } from './readyIndex.js';
import { readExactly } from './readExactly.js';
import { selectItems, type ItemFilter, type Selection } from './itemFilter.js';

const gunzip = promisify(zlib.gunzip);

/**
 * Hours inflated ahead of the one being sent: the thread pool inflates them while the main
 * thread writes, so a long answer keeps both cores busy.
 */
const INFLATE_AHEAD = 4;

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

/** An hour's section, plain. */
async function inflate(member: Buffer, file: string): Promise<Buffer> {
  try {
    return await gunzip(member);
  } catch (err) {
    throw new Error(`ready texts damaged (${(err as Error).message}): ${file}`, { cause: err });
  }
}

/**
 * The items of consecutive `hours` of a sidecar in one shape, the shape's separator between
 * hours (their Arrow record batches, back to back, for 'arrow'), an hour at a time. `commas`: a
 * FeatureCollection's separators. Reading stops when the consumer does; inflations started
 * ahead are left to finish, their outcome handled.
 */
export function streamHours(ready: ReadyFile, hours: readonly number[], shape: ReadyShape | 'arrow', commas: boolean): () => AsyncIterable<Uint8Array> {
  return async function* () {
    const fd = openSync(ready.file, 'r');
    const inflating: Promise<Buffer>[] = [];
    try {
      const now = current(fd, ready);
      const held = now.index.hours.filter((h) => hours.includes(h.hourMs));
      const separator = shape === 'arrow' ? undefined : Buffer.from(commas ? ',' : READY_TEXTS[sectionOf(shape)]!.separator);
      let next = 0;
      const start = () => {
        const hour = held[next++]!;
        const plain = inflate(memberOf(fd, now, hour, shape), now.file);
        // Handled as it is created: a consumer that stops leaves the ones ahead unawaited.
        plain.catch(() => undefined);
        inflating.push(plain);
      };
      while (next < held.length && inflating.length < INFLATE_AHEAD) start();
      for (let i = 0; i < held.length; i++) {
        const plain = await inflating.shift()!;
        if (next < held.length) start();
        if (commas) toCommas(plain);
        if (i > 0 && separator) yield separator;
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
    return itemColumns(block, n);
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
export function readSelection(ready: ReadyFile, hourMs: number, selection: Selection, filter: ItemFilter, shape: ReadyShape, commas: boolean): () => Promise<Uint8Array> {
  return async () => {
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
    const text = await inflate(member, now.file);
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
