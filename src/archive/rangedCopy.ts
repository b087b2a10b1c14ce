// A local copy of some byte ranges of a stored object: a sparse file of the object's size, its
// fetched ranges at their own offsets, so a reader reads it as it would the whole object. Which
// ranges are present is its state, which the part cache journals (rangedJournal.ts) so that a
// restarted process adopts the copy.
import fs, { type FileHandle } from 'node:fs/promises';
import { OverloadedError, UnavailableError } from '../shared/errors.js';
import { whileCut } from '../store/cutBodies.js';
import type { ObjectStore } from '../store/objectStore.js';

/** A byte range [start, end). */
export type ByteRange = readonly [number, number];

/** What a reader of a ranged copy sees: the file, the object's size, and a way to have ranges fetched. */
export interface RangedFile {
  readonly file: string;
  /** The whole object's size (and the file's). */
  readonly size: number;
  /** Fetches the ranges not yet present; resolves once every byte of them can be read from `file`. */
  ensure(ranges: readonly ByteRange[]): Promise<void>;
}

/**
 * Ranges closer than this are fetched as one: another GET costs a round trip (20–50 ms on S3
 * before its first byte), the gap's bytes well under a millisecond.
 */
const GAP = 256 * 1024;

/** What a copy holds: the object and version its bytes are of, and which of them are present. */
export interface CopyState {
  key: string;
  etag: string;
  size: number;
  lastModifiedMs: number;
  present: [number, number][];
}

export class RangedCopy implements RangedFile {
  /** Ensures run one after another: each fetches what the ones before it left missing. */
  private queue: Promise<void> = Promise.resolve();

  private constructor(
    private readonly store: Pick<ObjectStore, 'getRangeStream'>,
    private readonly key: string,
    readonly file: string,
    readonly size: number,
    /** The object's version: every range comes from it, or the read fails. */
    private readonly etag: string,
    private readonly mtime: Date,
    /** Present ranges, sorted and disjoint. */
    private present: [number, number][],
    /** Bytes fetched since, as the cache counts them. */
    private readonly fetched: (bytes: number) => Promise<void>,
  ) {}

  /** The copy an earlier process left at `file` holding what `state` says; undefined when the file does not match it. */
  static async adopt(store: Pick<ObjectStore, 'getRangeStream'>, file: string, state: CopyState, fetched: (bytes: number) => Promise<void>): Promise<RangedCopy | undefined> {
    const stat = await fs.stat(file).catch(() => undefined);
    if (stat?.size !== state.size) return undefined;
    return new RangedCopy(store, state.key, file, state.size, state.etag, new Date(state.lastModifiedMs), merge(state.present), fetched);
  }

  /**
   * Fetches the object's first `headBytes` into a new sparse file of its size at `file`;
   * undefined when the object is absent.
   */
  static async create(store: Pick<ObjectStore, 'getRangeStream'>, key: string, file: string, headBytes: number, fetched: (bytes: number) => Promise<void>): Promise<RangedCopy | undefined> {
    let etag: string | undefined;
    return whileCut(async (answered) => {
      // A second attempt keeps to the first one's version.
      const head = await store.getRangeStream(key, 0, headBytes, etag === undefined ? {} : { ifMatch: etag });
      if (!head) {
        if (etag === undefined) return undefined;
        throw new OverloadedError(`the archive changed while it was read: ${key}`);
      }
      etag = head.etag;
      answered();
      try {
        const handle = await fs.open(file, 'w');
        try {
          await handle.truncate(head.size);
          const length = await writeAt(handle, head.body, 0, Math.min(headBytes, head.size), key);
          // Fixed: readers know a file's version by its inode, size and mtime, and later ranges must not change it.
          await handle.utimes(head.lastModified, head.lastModified);
          return new RangedCopy(store, key, file, head.size, head.etag, head.lastModified, length > 0 ? [[0, length]] : [], fetched);
        } catch (err) {
          // No copy: the file the cache neither counts nor journals goes with it.
          await fs.rm(file, { force: true });
          throw err;
        } finally {
          await handle.close();
        }
      } finally {
        head.body.destroy();
      }
    });
  }

  /** What it holds now (only ranges whose bytes are written). */
  get state(): CopyState {
    return { key: this.key, etag: this.etag, size: this.size, lastModifiedMs: this.mtime.getTime(), present: this.present.map(([a, b]) => [a, b]) };
  }

  /** Bytes present in the file. */
  get bytes(): number {
    return this.present.reduce((n, [a, b]) => n + b - a, 0);
  }

  ensure(ranges: readonly ByteRange[]): Promise<void> {
    const run = this.queue.then(() => this.fetchMissing(ranges));
    // The next ensure waits for this one, whether it failed or not (its own failure is its caller's).
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async fetchMissing(ranges: readonly ByteRange[]): Promise<void> {
    const missing = coalesce(ranges.flatMap(([a, b]) => subtract([Math.max(0, a), Math.min(this.size, b)], this.present)));
    if (missing.length === 0) return;
    const handle = await fs.open(this.file, 'r+');
    try {
      // Every range settled before the handle closes; the first failure is the ensure's.
      const settled = await Promise.allSettled(missing.map(([a, b]) => this.fetch(handle, a, b)));
      const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
      if (failed) throw failed.reason;
    } finally {
      // The object's time, whatever the ranges did: a failed fetch wrote some bytes too.
      await handle.utimes(this.mtime, this.mtime).catch(() => undefined);
      await handle.close();
    }
    const before = this.bytes;
    this.present = merge([...this.present, ...missing.map(([a, b]) => [a, b] as [number, number])]);
    await this.fetched(this.bytes - before);
  }

  /** Bytes [start, end) of the object's version written into the copy as they arrive. */
  private fetch(handle: FileHandle, start: number, end: number): Promise<void> {
    return whileCut(async (answered) => {
      const got = await this.store.getRangeStream(this.key, start, end - start, { ifMatch: this.etag });
      // Replaced since its first bytes were read (a purge rewrote it): the answer's plan is stale; asked again, it is not.
      if (!got) throw new OverloadedError(`the archive changed while it was read: ${this.key}`);
      answered();
      try {
        const length = await writeAt(handle, got.body, start, end - start, this.key);
        if (length !== end - start) throw new UnavailableError('storage', `short ranged read of ${this.key}: ${length} of ${end - start} bytes at ${start}`);
      } finally {
        got.body.destroy();
      }
    });
  }
}

/**
 * Bytes of a range's chunks written at once: the socket's chunks (16–64 KB) each written alone
 * were a thousand file calls for a cold month (15.6 MB), some 40 ms of the main thread on S3.
 * A day's section (some 300–600 KB) is then one or two writes; what waits to be written is at
 * most this much a range, some 12 MB for the 24 days a cold answer fetches ahead (fetchAhead.ts).
 * 128 KB measured no better (docs/performance.md).
 */
const WRITE_BYTES = 512 * 1024;

/**
 * Writes a range's chunks into the copy at `at` as they arrive, some WRITE_BYTES at a time; its
 * length. The chunks are dropped once written: whole ranges gathered first (a year's hundreds
 * of them in flight) kept V8 collecting its whole heap every 150 ms or so of a cold answer. A body longer than the `most` bytes asked for (a store or proxy that ignored the range)
 * fails before a byte of it lands past them, over ranges the copy already holds.
 */
async function writeAt(handle: FileHandle, body: AsyncIterable<Uint8Array>, at: number, most: number, key: string): Promise<number> {
  let length = 0;
  let written = 0;
  let pending: Uint8Array[] = [];
  const flush = async () => {
    const chunks = pending;
    pending = [];
    const from = at + written;
    const done = (await handle.writev(chunks, from)).bytesWritten;
    // A short write (rare on a file) goes on from where it stopped.
    if (done < length - written) {
      const rest = Buffer.concat(chunks).subarray(done);
      for (let k = 0; k < rest.length; ) k += (await handle.write(rest, k, rest.length - k, from + done + k)).bytesWritten;
    }
    written = length;
  };
  for await (const chunk of body) {
    if (length + chunk.length > most) throw new Error(`ranged read of ${key} longer than asked: more than ${most} bytes at ${at}`);
    pending.push(chunk);
    length += chunk.length;
    if (length - written >= WRITE_BYTES) await flush();
  }
  if (length > written) await flush();
  return length;
}

/** [a, b) less the sorted disjoint `present` ranges. */
export function subtract([a, b]: ByteRange, present: readonly ByteRange[]): [number, number][] {
  const out: [number, number][] = [];
  let at = a;
  for (const [p, q] of present) {
    if (q <= at) continue;
    if (p >= b) break;
    if (p > at) out.push([at, p]);
    at = Math.max(at, q);
  }
  if (at < b) out.push([at, b]);
  return out;
}

/** Sorted, overlapping or touching ranges joined. */
function merge(ranges: [number, number][]): [number, number][] {
  const sorted = ranges.filter(([a, b]) => b > a).sort((x, y) => x[0] - y[0]);
  const out: [number, number][] = [];
  for (const [a, b] of sorted) {
    const last = out[out.length - 1];
    if (last && a <= last[1]) last[1] = Math.max(last[1], b);
    else out.push([a, b]);
  }
  return out;
}

/** Ranges to fetch: sorted, those less than GAP apart as one. */
export function coalesce(ranges: readonly ByteRange[]): [number, number][] {
  const out: [number, number][] = [];
  for (const [a, b] of merge(ranges.map(([x, y]) => [x, y]))) {
    const last = out[out.length - 1];
    if (last && a - last[1] < GAP) last[1] = b;
    else out.push([a, b]);
  }
  return out;
}
