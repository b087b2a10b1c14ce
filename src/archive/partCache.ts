// Local cache of archive parts fetched from a remote store, keyed by
// (key, ETag). Parts are immutable, so an entry never goes stale; the cache
// is bounded in bytes and evicts the least recently used files.
import { createHash, randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Metrics } from '../metrics.js';
import type { ObjectInfo, ObjectStore } from '../store/objectStore.js';

class VanishedError extends Error {}

interface Entry {
  file: string;
  size: number;
  usedAt: number;
}

export class PartCache {
  private readonly entries = new Map<string, Entry>();
  private readonly inflight = new Map<string, Promise<string>>();
  private bytes = 0;
  private ready: Promise<void> | undefined;

  constructor(
    private readonly store: ObjectStore,
    private readonly dir: string,
    private readonly maxBytes: number,
    private readonly metrics?: Metrics,
  ) {}

  /** A local file with the part's content: the store's own file, or a cached copy. */
  async localFile(info: ObjectInfo): Promise<string> {
    const direct = this.store.localPath(info.key);
    if (direct) return direct;
    await (this.ready ??= this.scan());
    // Keep the part's own name as the suffix: de-duplication prefers the newest part by it.
    const hash = createHash('sha256').update(`${info.key}\n${info.etag}`).digest('hex').slice(0, 24);
    const name = `${hash}-${info.key.slice(info.key.lastIndexOf('/') + 1)}`;
    const hit = this.entries.get(name);
    if (hit) {
      hit.usedAt = Date.now();
      this.metrics?.cacheRequests.inc({ result: 'hit' });
      return hit.file;
    }
    let pending = this.inflight.get(name);
    if (!pending) {
      this.metrics?.cacheRequests.inc({ result: 'miss' });
      pending = this.fetch(info, name).finally(() => this.inflight.delete(name));
      this.inflight.set(name, pending);
    }
    return pending;
  }

  /**
   * A local file with the object's content, or undefined when the store has no such object
   * (an optional companion of a part, such as its ready texts). Absences are remembered: the
   * objects are immutable, and one written later comes with a new part (a new key).
   */
  async localFileIfPresent(info: ObjectInfo): Promise<string | undefined> {
    const direct = this.store.localPath(info.key);
    if (direct) return fs.access(direct).then(() => direct, () => undefined);
    const id = `${info.key}\n${info.etag}`;
    if (this.absent.has(id)) return undefined;
    try {
      return await this.localFile(info);
    } catch (err) {
      if (!(err instanceof VanishedError)) throw err;
      this.absent.add(id);
      // Bounded: the oldest absence is forgotten first (it is only asked again).
      if (this.absent.size > 100_000) this.absent.delete(this.absent.values().next().value!);
      return undefined;
    }
  }

  private readonly absent = new Set<string>();

  private async fetch(info: ObjectInfo, name: string): Promise<string> {
    const file = path.join(this.dir, name);
    const tmp = `${file}.${randomUUID()}.tmp`;
    try {
      const got = await this.store.download(info.key, tmp);
      if (!got) throw new VanishedError(`archive part vanished: ${info.key}`);
      await fs.rename(tmp, file);
    } catch (err) {
      await fs.rm(tmp, { force: true });
      throw err;
    }
    const size = (await fs.stat(file)).size;
    this.entries.set(name, { file, size, usedAt: Date.now() });
    this.bytes += size;
    await this.evict(file);
    this.metrics?.cacheBytes.set(this.bytes);
    return file;
  }

  private async evict(keep: string): Promise<void> {
    if (this.bytes <= this.maxBytes) return;
    const oldest = [...this.entries.entries()].sort((a, b) => a[1].usedAt - b[1].usedAt);
    for (const [name, entry] of oldest) {
      if (this.bytes <= this.maxBytes) break;
      if (entry.file === keep) continue;
      this.entries.delete(name);
      this.bytes -= entry.size;
      // A query may still be reading it: unlink keeps the open file readable on POSIX.
      await fs.rm(entry.file, { force: true });
    }
  }

  /** Adopts files left by an earlier run, so a restart does not refetch the archive. */
  private async scan(): Promise<void> {
    await fs.mkdir(this.dir, { recursive: true });
    for (const name of await fs.readdir(this.dir)) {
      const file = path.join(this.dir, name);
      if (name.endsWith('.tmp')) {
        await fs.rm(file, { force: true });
        continue;
      }
      if (!name.endsWith('.parquet')) continue;
      const stat = await fs.stat(file);
      this.entries.set(name, { file, size: stat.size, usedAt: stat.mtimeMs });
      this.bytes += stat.size;
    }
  }

  get sizeBytes(): number {
    return this.bytes;
  }
}
