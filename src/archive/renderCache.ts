// Local cache of rendered archive hours: the serialized reports of one hour
// (GeoJSON features, TopoJSON geometries, CSV lines, joined), keyed by the
// format and the hour's set of parts (key, ETag). Parts are immutable, so an
// entry never goes stale: a new part in the hour is a new key. Serving a
// cached hour is a file read instead of a DuckDB query, which is what makes
// repeated pulls of a week or a year fast. Bounded in bytes, least recently
// used first out.
import { createHash, randomUUID } from 'node:crypto';
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import fs from 'node:fs/promises';
import { releaseMemory } from '../memory.js';
import type { Metrics } from '../metrics.js';
import type { ObjectInfo } from '../store/objectStore.js';
import { SERVICE_VERSION } from '../version.js';
import { CacheFiles, type CachedFile } from './cacheFiles.js';

export interface RenderedHour {
  /**
   * The hour's items joined by the separator, newest first; from the cache, a function that
   * reads them when they are about to be sent, so a long answer holds one hour at a time.
   */
  text: Uint8Array | (() => Uint8Array);
  /** [minLng, minLat, maxLng, maxLat] of its points; undefined for an hour without reports. */
  bbox: [number, number, number, number] | undefined;
  /** created_at of its oldest and newest report (epoch ms): whether it fits a window that cuts the hour. */
  minMs: number;
  maxMs: number;
}

interface Entry extends CachedFile {
  /** Read on first use for entries adopted from an earlier run. */
  header?: Header;
  headerBytes?: number;
}

interface Header {
  bbox: RenderedHour['bbox'] | null;
  minMs: number;
  maxMs: number;
}

const SUFFIX = '.hour';
const MAX_HEADER = 512;

// A hit holds no descriptor: its file is pinned (never evicted) until the text is read, then
// opened, read and closed at once. A hit never read (an empty hour, an hour a window cuts, a
// client gone) only has its pin dropped when it is collected, so descriptors stay bounded by
// the reads in progress whatever the window and the number of pulls.
const pinned = new FinalizationRegistry<() => void>((unpin) => unpin());

export class RenderCache {
  private readonly files: CacheFiles<Entry>;
  private ready: Promise<void> | undefined;

  constructor(
    dir: string,
    private readonly maxBytes: number,
    private readonly metrics?: Metrics,
  ) {
    this.files = new CacheFiles(dir, SUFFIX, maxBytes);
  }

  /** The cache name of an hour rendered as `format` (shape and separator) from these parts. */
  static keyOf(format: string, parts: readonly ObjectInfo[]): string {
    const hash = createHash('sha256').update(SERVICE_VERSION).update(format);
    for (const p of [...parts].sort((a, b) => (a.key < b.key ? -1 : 1))) hash.update(`\n${p.key}\n${p.etag}`);
    return hash.digest('base64url').slice(0, 32);
  }

  async get(key: string): Promise<RenderedHour | undefined> {
    if (this.maxBytes <= 0) return undefined;
    await (this.ready ??= this.files.scan());
    const entry = this.files.get(key);
    if (!entry) {
      this.metrics?.renderCacheRequests.inc({ result: 'miss' });
      return undefined;
    }
    const hit = this.open(key, entry);
    this.metrics?.renderCacheRequests.inc({ result: hit ? 'hit' : 'miss' });
    return hit;
  }

  /** The entry as a hit, its file pinned until read; undefined (and forgotten) when the file is gone. */
  private open(key: string, entry: Entry): RenderedHour | undefined {
    try {
      if (entry.header) statSync(entry.file);
      else this.readHeader(entry);
    } catch {
      // Removed behind our back (a cleaned cache directory), or not ours: render it again.
      this.files.forget(key, entry);
      return undefined;
    }
    this.files.touch(entry);
    const { bbox, minMs, maxMs } = entry.header!;
    // An hour without reports has nothing to read.
    if (!bbox) return { bbox: undefined, minMs, maxMs, text: new Uint8Array(0) };
    this.files.pin(entry);
    return { bbox, minMs, maxMs, text: textReader(entry.file, entry.headerBytes!, entry.size - entry.headerBytes!, () => this.files.unpin(entry)) };
  }

  /**
   * Stores a rendering and answers it as a hit (its text read back when sent), or as given
   * when it cannot be stored: a failure only costs a later re-render.
   */
  async put(key: string, hour: RenderedHour): Promise<RenderedHour> {
    if (this.maxBytes <= 0 || typeof hour.text === 'function') return hour;
    await (this.ready ??= this.files.scan());
    const text = hour.text;
    const file = this.files.fileOf(key);
    if (!this.files.get(key)) {
      const tmp = `${file}.${randomUUID()}.tmp`;
      const header: Header = { bbox: hour.bbox ?? null, minMs: hour.minMs, maxMs: hour.maxMs };
      const head = Buffer.from(`${JSON.stringify(header)}\n`);
      try {
        await fs.writeFile(tmp, [head, text]);
        await fs.rename(tmp, file);
      } catch {
        await fs.rm(tmp, { force: true });
        return hour;
      }
      await this.files.add(key, { file, size: head.byteLength + text.byteLength, header, headerBytes: head.byteLength });
      this.metrics?.renderCacheBytes.set(this.files.sizeBytes);
    }
    const entry = this.files.get(key);
    return (entry && this.open(key, entry)) ?? hour;
  }

  get sizeBytes(): number {
    return this.files.sizeBytes;
  }

  private readHeader(entry: Entry): void {
    const buf = Buffer.alloc(Math.min(MAX_HEADER, entry.size));
    const fd = openSync(entry.file, 'r');
    let n: number;
    try {
      n = readSync(fd, buf, 0, buf.length, 0);
    } finally {
      closeSync(fd);
    }
    const eol = buf.subarray(0, n).indexOf(10);
    if (eol < 0) throw new Error('render cache entry without a header');
    entry.header = JSON.parse(buf.subarray(0, eol).toString('utf8')) as Header;
    entry.headerBytes = eol + 1;
  }
}

/** Reads an entry's text once, opening and closing its file then; unpins it either way. */
function textReader(file: string, offset: number, length: number, unpin: () => void): () => Uint8Array {
  let done = false;
  const release = () => unpin();
  const read = (): Uint8Array => {
    if (done) throw new Error('rendered hour read twice');
    done = true;
    pinned.unregister(read);
    try {
      const fd = openSync(file, 'r');
      try {
        // Synchronous: a page-cached read of a few hundred kB takes microseconds, and a long
        // window reads thousands of these; as thread-pool round trips they mostly wait.
        const out = Buffer.allocUnsafe(length);
        for (let off = 0; off < length; ) {
          const n = readSync(fd, out, off, length - off, offset + off);
          if (n === 0) throw new Error('rendered hour truncated');
          off += n;
        }
        // A long pull reads gigabytes of these: see memory.ts.
        releaseMemory(false);
        return out;
      } finally {
        closeSync(fd);
      }
    } finally {
      release();
    }
  };
  pinned.register(read, release, read);
  return read;
}
