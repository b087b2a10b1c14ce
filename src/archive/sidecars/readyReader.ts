// Reads a ready text's sections: whole hours (each a gzip member, inflated as it is sent, or
// sent as it is in a gzip answer) and the reports a selection keeps. Should a purge have
// rewritten the sidecar since its index was read, the ranges are taken from the file as it now is.
import { closeSync, openSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { itemColumns, ITEM_BYTES, plainStartOf, separatorOf, type ReadyHour, type ReadyItems, type ReadyShape } from './readyFormat.js';
import { current, type ReadyFile } from './readyIndex.js';
import { readExactly } from './readExactly.js';
import { selectItems, type ItemFilter, type Selection } from './itemFilter.js';
import { deflatedOf, type Deflated } from './readyMember.js';

/**
 * NDJSON from a FeatureCollection's items: the comma before each newline taken out, in place
 * (JSON text never holds a raw newline, so every newline is a separator).
 */
function toLines(text: Buffer): Buffer {
  let kept = 0;
  let from = 0;
  for (let at = text.indexOf(10); at >= 0; at = text.indexOf(10, at + 1)) {
    kept += text.copy(text, kept, from, at - 1);
    from = at;
  }
  kept += text.copy(text, kept, from);
  return text.subarray(0, kept);
}

/**
 * An hour's section as stored, read when it is about to be sent: inflated for an answer sent
 * plain (or in another encoding), its deflate data joined as it is into a gzip answer.
 */
export class StoredSection {
  constructor(
    private readonly member: Buffer,
    private readonly file: string,
    /** NDJSON from the GeoJSON section: not the stored text, so never sent as it is. */
    private readonly lines: boolean,
  ) {}

  plain(): Buffer {
    const text = inflate(this.member, this.file);
    return this.lines ? toLines(text) : text;
  }

  /** Its deflate data, to be joined into a gzip answer; undefined when the answer's text is not the stored one. */
  deflated(): Deflated | undefined {
    return this.lines ? undefined : deflatedOf(this.member);
  }
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
 * busy with the answer and its client. One byte more than the text: a buffer filled to its end
 * makes zlib allocate another of the same size for output that never comes, and that doubled
 * churn of memory outside the heap set off a full collection every 150 ms or so of a long answer.
 */
function inflate(member: Buffer, file: string): Buffer {
  try {
    return gunzipSync(member, { chunkSize: Math.max(64, member.readUInt32LE(member.length - 4) + 1) });
  } catch (err) {
    throw new Error(`ready texts damaged (${(err as Error).message}): ${file}`, { cause: err });
  }
}

/**
 * The items of consecutive `hours` of a sidecar in one shape, the shape's separator between
 * hours (their Arrow record batches, back to back, for 'arrow'), an hour at a time, each read
 * when the one before it has been taken. `lines`: NDJSON from the GeoJSON section.
 */
export function streamHours(ready: ReadyFile, hours: readonly number[], shape: ReadyShape | 'arrow', lines: boolean): () => Iterable<Uint8Array | StoredSection> {
  return function* () {
    const fd = openSync(ready.file, 'r');
    try {
      const now = current(fd, ready);
      const separator = shape === 'arrow' ? undefined : Buffer.from(lines ? '\n' : separatorOf(shape));
      let first = true;
      for (const hour of now.index.hours) {
        if (!hours.includes(hour.hourMs)) continue;
        const section = new StoredSection(memberOf(fd, now, hour, shape), now.file, lines);
        if (!first && separator) yield separator;
        first = false;
        yield section;
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
export function readSelection(ready: ReadyFile, hourMs: number, selection: Selection, filter: ItemFilter, shape: ReadyShape, lines: boolean): () => Uint8Array {
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
    const base = plainStartOf(hour, ends, shape);
    const separator = Buffer.from(separatorOf(shape));
    const startOf = (i: number) => (i === hour.first ? 0 : ends[i - 1]! + separator.length - base);
    const endOf = (i: number) => ends[i]! - base;
    if (endOf(hour.first + hour.count - 1) !== text.byteLength) throw new Error(`ready texts out of step with their index: ${now.file}`);
    const out = Buffer.allocUnsafe(runs.reduce((n, [a, b]) => n + endOf(b - 1) - startOf(a), (runs.length - 1) * separator.length));
    let at = 0;
    runs.forEach(([a, b], r) => {
      if (r > 0) at += separator.copy(out, at);
      at += text.copy(out, at, startOf(a), endOf(b - 1));
    });
    return lines ? toLines(out) : out;
  };
}
