// Local cache of rendered archive hours: the serialized reports of one hour
// (GeoJSON features, TopoJSON geometries, CSV lines, joined), keyed by the
// format and the hour's set of parts (key, ETag). Parts are immutable, so an
// entry never goes stale: a new part in the hour is a new key. Serving a
// cached hour is a file read instead of a DuckDB query, which is what makes
// repeated pulls of a week or a year fast. Bounded in bytes, least recently
// used first out.
import { createHash, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Metrics } from '../metrics.js';
import type { ObjectInfo } from '../store/objectStore.js';

export interface RenderedHour {
  /** The hour's items joined by the separator, newest first. */
  text: Uint8Array;
  /** [minLng, minLat, maxLng, maxLat] of its points; undefined for an hour without reports. */
  bbox: [number, number, number, number] | undefined;
  /** created_at of its oldest and newest report (epoch ms): whether it fits a window that cuts the hour. */
  minMs: number;
  maxMs: number;
}

interface Entry {
  file: string;
  size: number;
  /** Recency: a counter, so that order holds within one millisecond. */
  usedAt: number;
}

interface Header {
  bbox: RenderedHour['bbox'] | null;
  minMs: number;
  maxMs: number;
}

const SUFFIX = '.hour';

export class RenderCache {
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;
  private clock = 0;
  private ready: Promise<void> | undefined;

  constructor(
    private readonly dir: string,
    private readonly maxBytes: number,
    private readonly metrics?: Metrics,
  ) {}

  /** The cache name of an hour rendered as `format` (shape and separator) from these parts. */
  static keyOf(format: string, parts: readonly ObjectInfo[]): string {
    const hash = createHash('sha256').update(format);
    for (const p of [...parts].sort((a, b) => (a.key < b.key ? -1 : 1))) hash.update(`\n${p.key}\n${p.etag}`);
    return hash.digest('base64url').slice(0, 32);
  }

  async get(key: string): Promise<RenderedHour | undefined> {
    if (this.maxBytes <= 0) return undefined;
    await (this.ready ??= this.scan());
    const entry = this.entries.get(key);
    if (!entry) {
      this.metrics?.renderCacheRequests.inc({ result: 'miss' });
      return undefined;
    }
    let raw: Buffer;
    try {
      // Synchronous: a page-cached read of a few hundred kB takes microseconds, and a long
      // window reads thousands of these; as thread-pool round trips they mostly wait.
      raw = readFileSync(entry.file);
    } catch {
      // Removed behind our back (a cleaned cache directory): render it again.
      this.forget(key, entry);
      this.metrics?.renderCacheRequests.inc({ result: 'miss' });
      return undefined;
    }
    entry.usedAt = ++this.clock;
    this.metrics?.renderCacheRequests.inc({ result: 'hit' });
    // The first line is the header; the rest is the text.
    const eol = raw.indexOf(10);
    const header = JSON.parse(raw.subarray(0, eol).toString('utf8')) as Header;
    return { bbox: header.bbox ?? undefined, minMs: header.minMs, maxMs: header.maxMs, text: raw.subarray(eol + 1) };
  }

  /** Stores a rendering; a failure only costs a later re-render, so it is not an error for the caller. */
  async put(key: string, hour: RenderedHour): Promise<void> {
    if (this.maxBytes <= 0 || this.entries.has(key)) return;
    await (this.ready ??= this.scan());
    const file = path.join(this.dir, `${key}${SUFFIX}`);
    const tmp = `${file}.${randomUUID()}.tmp`;
    const header: Header = { bbox: hour.bbox ?? null, minMs: hour.minMs, maxMs: hour.maxMs };
    const head = Buffer.from(`${JSON.stringify(header)}\n`);
    try {
      await fs.writeFile(tmp, [head, hour.text]);
      await fs.rename(tmp, file);
    } catch {
      await fs.rm(tmp, { force: true });
      return;
    }
    const size = head.byteLength + hour.text.byteLength;
    // Two answers may have rendered the same hour at once: count it once.
    const previous = this.entries.get(key);
    if (previous) this.bytes -= previous.size;
    this.entries.set(key, { file, size, usedAt: ++this.clock });
    this.bytes += size;
    await this.evict(key);
    this.metrics?.renderCacheBytes.set(this.bytes);
  }

  get sizeBytes(): number {
    return this.bytes;
  }

  private forget(key: string, entry: Entry): void {
    this.entries.delete(key);
    this.bytes -= entry.size;
  }

  private async evict(keep: string): Promise<void> {
    if (this.bytes <= this.maxBytes) return;
    const oldest = [...this.entries.entries()].sort((a, b) => a[1].usedAt - b[1].usedAt);
    for (const [key, entry] of oldest) {
      if (this.bytes <= this.maxBytes) break;
      if (key === keep) continue;
      this.forget(key, entry);
      await fs.rm(entry.file, { force: true });
    }
  }

  /** Adopts entries left by an earlier run: a restart keeps its warm cache. */
  private async scan(): Promise<void> {
    await fs.mkdir(this.dir, { recursive: true });
    const found: { key: string; file: string; size: number; mtimeMs: number }[] = [];
    for (const name of await fs.readdir(this.dir)) {
      const file = path.join(this.dir, name);
      if (name.endsWith('.tmp')) {
        await fs.rm(file, { force: true });
        continue;
      }
      if (!name.endsWith(SUFFIX)) continue;
      const stat = await fs.stat(file);
      found.push({ key: name.slice(0, -SUFFIX.length), file, size: stat.size, mtimeMs: stat.mtimeMs });
    }
    // Oldest written first out.
    for (const f of found.sort((a, b) => a.mtimeMs - b.mtimeMs)) {
      this.entries.set(f.key, { file: f.file, size: f.size, usedAt: ++this.clock });
      this.bytes += f.size;
    }
  }
}
