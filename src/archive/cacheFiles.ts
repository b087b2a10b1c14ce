// The files of one local cache directory (the part cache): their sizes
// against a byte bound, least recently used first out, and adoption of what an earlier
// run left, so a restart keeps its warm cache.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

/** A download written to within this long may be another process's, under way. */
const TMP_IDLE_MS = 15 * 60_000;

export interface CachedFile {
  file: string;
  size: number;
  /** Recency: a counter, so that order holds within one millisecond. */
  usedAt: number;
  /** Readers that keep it from eviction (holds.ts); none when absent. */
  holders?: number;
}

export class CacheFiles<E extends CachedFile> {
  private readonly entries = new Map<string, E>();
  private bytes = 0;
  private clock = 0;

  constructor(
    readonly dir: string,
    private readonly suffix: string,
    readonly maxBytes: number,
    /** Whether a file an earlier run left is kept (the others are removed when the directory is scanned). */
    private readonly adoptable: (key: string) => boolean = () => true,
  ) {}

  get sizeBytes(): number {
    return this.bytes;
  }

  fileOf(key: string): string {
    return path.join(this.dir, `${key}${this.suffix}`);
  }

  get(key: string): E | undefined {
    return this.entries.get(key);
  }

  /** Every entry, by key. */
  all(): IterableIterator<[string, E]> {
    return this.entries.entries();
  }

  /** Marks an entry as just used. */
  touch(entry: E): void {
    entry.usedAt = ++this.clock;
  }

  /**
   * Keeps an entry from eviction until the returned function is called (once; later calls do
   * nothing). Held entries may take the cache past its bound: their release restores it.
   */
  hold(entry: E): () => void {
    entry.holders = (entry.holders ?? 0) + 1;
    return this.releaser(entry);
  }

  /** Lets go of one hold of `entry` (once; later calls do nothing). */
  private releaser(entry: E): () => void {
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      entry.holders! -= 1;
      // Its file removed now, not when the next copy comes: the bound is on the disk.
      if (entry.holders === 0 && this.bytes > this.maxBytes) this.evict().catch(() => undefined);
    };
  }

  /** Counts a file now in the cache (once, if two answers stored the same key at once), then keeps the bound. */
  async add(key: string, entry: Omit<E, 'usedAt'>): Promise<void> {
    const previous = this.entries.get(key);
    if (previous) this.forget(key, previous);
    this.entries.set(key, { ...entry, usedAt: ++this.clock } as E);
    this.bytes += entry.size;
    await this.evict(key);
  }

  /**
   * Counts a file now in the cache, held from the start (no eviction can come between its add
   * and its first reader), then keeps the bound; the entry and the function that lets it go.
   */
  async addHeld(key: string, entry: Omit<E, 'usedAt' | 'holders'>): Promise<{ entry: E; release: () => void }> {
    const previous = this.entries.get(key);
    if (previous) this.forget(key, previous);
    const added = { ...entry, usedAt: ++this.clock, holders: 1 } as E;
    this.entries.set(key, added);
    this.bytes += entry.size;
    await this.evict(key);
    return { entry: added, release: this.releaser(added) };
  }

  /** Counts `bytes` more of an entry's file (a ranged copy that fetched more), then keeps the bound. */
  async grow(key: string, entry: E, bytes: number): Promise<void> {
    if (this.entries.get(key) !== entry) return;
    entry.size += bytes;
    this.bytes += bytes;
    await this.evict(key);
  }

  /**
   * Counts `bytes` of a file still being written (a download the size of which is known), then
   * keeps the bound: others make room before it lands, not after. The function returned gives
   * them back (once; later calls do nothing), just before the file is added or dropped.
   */
  async reserve(bytes: number): Promise<() => void> {
    this.bytes += bytes;
    let reserved = true;
    const giveBack = () => {
      if (!reserved) return;
      reserved = false;
      this.bytes -= bytes;
    };
    try {
      await this.evict();
    } catch (err) {
      giveBack();
      throw err;
    }
    return giveBack;
  }

  forget(key: string, entry: E): void {
    if (this.entries.get(key) !== entry) return;
    this.entries.delete(key);
    this.bytes -= entry.size;
  }

  private async evict(keep?: string): Promise<void> {
    if (this.bytes <= this.maxBytes) return;
    const oldest = [...this.entries.entries()].sort((a, b) => a[1].usedAt - b[1].usedAt);
    for (const [key, entry] of oldest) {
      if (this.bytes <= this.maxBytes) break;
      // Passes run at once: one that listed an entry another has since evicted (and perhaps
      // fetched again to the same file) leaves it.
      if (key === keep || (entry.holders ?? 0) > 0 || this.entries.get(key) !== entry) continue;
      this.forget(key, entry);
      await fs.rm(entry.file, { force: true });
    }
  }

  /** Adopts the files an earlier run left (oldest written first out); removes its unfinished ones. */
  async scan(): Promise<void> {
    await fs.mkdir(this.dir, { recursive: true });
    const found: { key: string; file: string; size: number; mtimeMs: number }[] = [];
    for (const name of await fs.readdir(this.dir)) {
      const file = path.join(this.dir, name);
      if (name.endsWith('.tmp')) {
        // A download under way in another process on the directory (written to within the
        // quarter hour: pids tell nothing across containers, each of them pid 1) stays.
        const stat = await fs.stat(file).catch(() => undefined);
        if (stat && stat.mtimeMs > Date.now() - TMP_IDLE_MS) continue;
        await fs.rm(file, { force: true });
        continue;
      }
      if (!name.endsWith(this.suffix)) continue;
      if (!this.adoptable(name.slice(0, name.length - this.suffix.length))) {
        await fs.rm(file, { force: true });
        continue;
      }
      const stat = await fs.stat(file);
      // Written before the machine last booted: renamed into place perhaps before its bytes
      // reached the disk (a power cut), so not trusted.
      if (stat.mtimeMs < Date.now() - os.uptime() * 1000) {
        await fs.rm(file, { force: true });
        continue;
      }
      found.push({ key: name.slice(0, name.length - this.suffix.length), file, size: stat.size, mtimeMs: stat.mtimeMs });
    }
    for (const f of found.sort((a, b) => a.mtimeMs - b.mtimeMs)) {
      // A scan tried again after a failure: what the first one counted is counted once.
      if (this.entries.has(f.key)) continue;
      this.entries.set(f.key, { file: f.file, size: f.size, usedAt: ++this.clock } as E);
      this.bytes += f.size;
    }
    await this.evict();
  }
}
