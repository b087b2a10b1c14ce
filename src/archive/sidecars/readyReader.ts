// Reads a ready text's byte ranges: whole hours streamed in reused read buffers, and the
// reports a selection keeps. Should a purge have rewritten the sidecar since its index was
// read, the ranges are taken from the file as it now is.
import { closeSync, openSync } from 'node:fs';
import { itemColumns, ITEM_BYTES, endsAt, READY_TEXTS, sectionOf, type ReadyItems, type ReadyShape } from './readyFormat.js';
import { current, type ReadyFile } from './readyIndex.js';
import { readExactly } from './readExactly.js';
import { selectItems, type ItemFilter, type Selection } from './itemFilter.js';
import { CHUNK_BYTES, takeChunk } from './readBuffers.js';

/** Turns the newlines between GeoJSON Features into the commas of a FeatureCollection. */
function toCommas(out: Buffer): void {
  for (let at = out.indexOf(10); at >= 0; at = out.indexOf(10, at + 1)) out[at] = 44;
}

/**
 * The items of consecutive `hours` of a sidecar in one shape (their Arrow record batches for
 * 'arrow'), as chunks read when the previous one has been taken (synchronously: a page-cached
 * read takes well under a millisecond, and a thread-pool round trip per chunk would mostly
 * wait), each into a lent buffer (readBuffers.ts) that comes back once written, so an answer's
 * memory stays a few chunks however many hours it reads. `commas`: a FeatureCollection's
 * separators, put where the per-report index says the items end (no scan of the text).
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
  const out = new Uint32Array(Math.max(0, to - from));
  readExactly(fd, new Uint8Array(out.buffer), ready.base + ready.index.items.at + endsAt(n, sectionOf(shape)) + 4 * from, ready.file);
  return out;
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
      const separator = READY_TEXTS[sectionOf(shape)]!.separator.charCodeAt(0);
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
