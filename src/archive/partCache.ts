// Local cache of archive parts and their sidecars fetched from a remote store, keyed by (key,
// ETag). Parts are immutable, so an entry never goes stale. A part or stats sidecar is copied
// whole; ready texts are ranged copies holding the sections answers read (an answer reads one
// format of a few hours). One byte bound, least recently used out first (a copy an answer is
// reading stays until the answer lets go of it: holds.ts). A store on a local
// directory is read in place (its LocalFiles), never copied; a part or ready text an answer
// holds there is pinned, so one retired meanwhile stays readable to it as a held copy does.
import { createHash, randomUUID } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { finished } from 'node:stream/promises';
import type { Metrics } from '../shared/metrics.js';
import { pipeToFile } from '../shared/files.js';
import { isRunning } from '../shared/processes.js';
import { whileCut } from '../store/cutBodies.js';
import type { LocalFiles, ObjectInfo, ObjectStore } from '../store/objectStore.js';
import pLimit from 'p-limit';
import { CacheFiles, type CachedFile } from './cacheFiles.js';
import { Holds } from './holds.js';
import { checkSealOf, DamagedPartsError } from './partSeal.js';
import { RangedCopy, type RangedFile } from './rangedCopy.js';
import { JOURNAL, JournalWriter, readJournal, type JournaledCopy } from './rangedJournal.js';

class VanishedError extends Error {}

const SUFFIX = '.parquet';
/**
 * Requests to the store in flight at most. The SDK's connection timeout runs from the moment a
 * request is made, also while it waits for one of the agent's 50 sockets: a window that asked
 * for a year of sidecars at once saw requests time out in that queue (and its answer fail).
 */
const STORE_REQUESTS = 32;

/** Marks a ranged copy's name (and, before they had a directory of their own, its file). */
const RANGED = '.ranged';
/**
 * Ranged copies live in `ranged/<pid>/` under the cache's directory with their journal (the
 * ranges each holds, rangedJournal.ts): one process writes a copy. A process adopts, when it
 * starts, its own directory (a container's process is pid 1 each run) and those of processes no
 * longer running, never another running process's (a CLI command beside the server may share
 * the directory). By pid, not by thread: two part caches of one process on one directory would
 * take each other's (today the worker thread of `all` reads no part through its cache).
 */
const RANGED_DIR = 'ranged';
const CLAIMED = 'claimed-';

interface Entry extends CachedFile {
  copy?: RangedCopy;
}

export class PartCache {
  private readonly files: CacheFiles<Entry>;
  private readonly inflight = new Map<string, Promise<string>>();
  private readonly inflightCopies = new Map<string, Promise<RangedCopy | undefined>>();
  /** Optional companions known to be absent. Bounded: the oldest absence is forgotten first (it is only asked again). */
  private readonly absent = new Set<string>();
  private ready: Promise<void> | undefined;
  private readonly requests = pLimit(STORE_REQUESTS);
  /** Seal checks (withFiles) in flight at most. */
  private readonly sealChecks = pLimit(4);
  /** The store's ranged reads, within the bound: each holds its place until its body has been read (or dropped). */
  private readonly ranges: Pick<ObjectStore, 'getRangeStream'> = {
    getRangeStream: (...args) =>
      new Promise((resolve, reject) => {
        this.requests(async () => {
          const got = await this.store.getRangeStream(...args);
          resolve(got);
          if (got) await finished(got.body).catch(() => undefined);
        }).catch(reject);
      }),
  };
  private readonly journal: JournalWriter;

  constructor(
    private readonly store: Pick<ObjectStore, 'getStream' | 'getRangeStream'>,
    dir: string,
    maxBytes: number,
    private readonly metrics?: Pick<Metrics, 'cacheRequests' | 'cacheBytes'>,
    /** The store's own files, when it is a local directory: read where they are. */
    private readonly local?: LocalFiles,
  ) {
    this.files = new CacheFiles(dir, SUFFIX, maxBytes, (name) => !name.endsWith(RANGED));
    this.journal = new JournalWriter(this.rangedDir, () => this.journaled());
  }

  /**
   * A local file with the part's content: the store's own file, or a cached copy. `holds`: the
   * copy is not evicted until they are released (its reader is done with it).
   */
  async localFile(info: ObjectInfo, holds?: Holds): Promise<string> {
    if (this.local) return this.inPlace(info.key, holds) ?? this.local.fileOf(info.key);
    await this.prepare();
    const name = cacheKeyOf(info);
    let hit = this.files.get(name);
    // A copy another process on the directory evicted: fetched again.
    if (hit && !existsSync(hit.file)) {
      this.files.forget(name, hit);
      hit = undefined;
    }
    if (hit) {
      this.files.touch(hit);
      this.metrics?.cacheRequests.inc({ result: 'hit' });
      if (holds) holds.add(this.files.hold(hit));
      return hit.file;
    }
    let pending = this.inflight.get(name);
    if (!pending) {
      this.metrics?.cacheRequests.inc({ result: 'miss' });
      pending = this.fetch(info, name).finally(() => this.inflight.delete(name));
      this.inflight.set(name, pending);
    }
    const file = await pending;
    if (!holds) return file;
    const entry = this.files.get(name);
    // Evicted before this reader could hold it (others' copies came in between): taken again.
    if (entry?.file !== file) return this.localFile(info, holds);
    holds.add(this.files.hold(entry));
    return file;
  }

  /**
   * On a local store, the object's own file, pinned for `holds` (a reader that reads it later,
   * as a day of an answer is sent, still reads it if the part is retired meanwhile); undefined
   * when it is absent, or with no holds.
   */
  private inPlace(key: string, holds: Holds | undefined): string | undefined {
    if (!holds || !this.local) return undefined;
    const pinned = this.local.pin(key);
    if (!pinned) return undefined;
    holds.add(pinned.release);
    return pinned.file;
  }

  /**
   * Runs `read` over local files of `parts` (as localFile), which stay in the cache until it is
   * done: a job's reads, whose rows it writes again. Each part's seal is checked first
   * (partSeal.ts): a damaged one throws DamagedPartsError, or with `damaged` is told to it and
   * left out of `files`.
   */
  withFiles<T>(parts: readonly ObjectInfo[], read: (files: string[]) => Promise<T>, damaged?: (parts: { key: string; reason: string }[]) => void): Promise<T> {
    return Holds.during(async (holds) => {
      const files = await Promise.all(parts.map((p) => this.localFile(p, holds)));
      // A few at a time, each streamed: a month's parts are not read into memory at once.
      const checks = await Promise.all(files.map((f) => this.sealChecks(() => checkSealOf(f))));
      // A copy of a remote part torn on this disk is no damage of the store's: fetched again, once.
      for (const [i, check] of checks.entries()) {
        if (this.local || check.state !== 'damaged') continue;
        this.dropCopy(parts[i]!);
        files[i] = await this.localFile(parts[i]!, holds);
        checks[i] = await checkSealOf(files[i]!);
      }
      const bad = checks.flatMap((c, i) => (c.state === 'damaged' ? [{ key: parts[i]!.key, reason: c.reason }] : []));
      if (bad.length === 0) return read(files);
      if (!damaged) throw new DamagedPartsError(bad);
      damaged(bad);
      return read(files.filter((_f, i) => checks[i]!.state !== 'damaged'));
    });
  }

  /** Forgets the cached copy of a remote part (its file is replaced by the next fetch). */
  private dropCopy(info: ObjectInfo): void {
    const name = cacheKeyOf(info);
    const hit = this.files.get(name);
    if (hit) this.files.forget(name, hit);
  }

  /**
   * A local file with the object's content, or undefined when the store has no such object
   * (an optional companion of a part, such as its ready texts). Absences are remembered: the
   * objects are immutable, and one written later comes with a new part (a new key).
   */
  async localFileIfPresent(info: ObjectInfo, holds?: Holds): Promise<string | undefined> {
    if (this.local) {
      // Not pinned: its reader (counts and stats) reads it at once, and a retired part's read is planned again (replan.ts).
      const direct = this.local.fileOf(info.key);
      // Synchronous: a year's window asks for hundreds, and each thread-pool round trip waits.
      return existsSync(direct) ? direct : undefined;
    }
    const id = `${info.key}\n${info.etag}`;
    if (this.absent.has(id)) return undefined;
    try {
      return await this.localFile(info, holds);
    } catch (err) {
      if (!(err instanceof VanishedError)) throw err;
      this.remember(id);
      return undefined;
    }
  }

  /**
   * A ranged copy of the object: its first `headBytes` fetched now, the rest as the reader asks
   * (`ensure`); undefined when the store has no such object. On a local store, the object's own
   * file, whole. `holds`: the copy is not evicted until they are released (its reader is done).
   */
  async rangedFileIfPresent(info: ObjectInfo, headBytes: number, holds?: Holds): Promise<RangedFile | undefined> {
    if (this.local) {
      const file = holds ? this.inPlace(info.key, holds) : this.local.fileOf(info.key);
      // Synchronous: a year's window asks for hundreds, and each thread-pool round trip waits.
      if (file === undefined || !existsSync(file)) return undefined;
      return { file, size: statSync(file).size, ensure: async () => undefined };
    }
    const id = `${info.key}\n${info.etag}`;
    if (this.absent.has(id)) return undefined;
    await this.prepare();
    const name = `${cacheKeyOf(info)}${RANGED}`;
    let hit = this.files.get(name);
    // Its file deleted under this process (the directory emptied by hand): fetched again.
    if (hit?.copy && !existsSync(hit.copy.file)) {
      this.files.forget(name, hit);
      this.journal.changed();
      hit = undefined;
    }
    if (hit?.copy) {
      this.files.touch(hit);
      this.metrics?.cacheRequests.inc({ result: 'hit' });
      if (holds) holds.add(this.files.hold(hit));
      return hit.copy;
    }
    let pending = this.inflightCopies.get(name);
    if (!pending) {
      this.metrics?.cacheRequests.inc({ result: 'miss' });
      pending = this.createCopy(info, name, headBytes).finally(() => this.inflightCopies.delete(name));
      this.inflightCopies.set(name, pending);
    }
    const copy = await pending;
    if (!copy) {
      this.remember(id);
      return undefined;
    }
    if (!holds) return copy;
    const entry = this.files.get(name);
    // Evicted before this reader could hold it (others' copies came in between): taken again.
    if (entry?.copy !== copy) return this.rangedFileIfPresent(info, headBytes, holds);
    holds.add(this.files.hold(entry));
    return copy;
  }

  private async createCopy(info: ObjectInfo, name: string, headBytes: number): Promise<RangedCopy | undefined> {
    // A file of its own: a journal entry outlived by its copy never names a later one. Its
    // directory made again if it was deleted meanwhile.
    await fs.mkdir(this.rangedDir, { recursive: true });
    const file = path.join(this.rangedDir, `${name}.${randomUUID().slice(0, 8)}${SUFFIX}`);
    const copy = await RangedCopy.create(this.ranges, info.key, file, headBytes, this.counted(name, () => copy));
    if (copy) await this.keepCopy(name, copy);
    return copy;
  }

  /** Counts a copy's fetched bytes while the cache keeps it (an evicted copy's file is gone). */
  private counted(name: string, copyOf: () => RangedCopy | undefined): (bytes: number) => Promise<void> {
    return async (bytes) => {
      const entry = this.files.get(name);
      if (entry && entry.copy === copyOf()) await this.files.grow(name, entry, bytes);
      this.metrics?.cacheBytes.set(this.files.sizeBytes);
      this.journal.changed();
    };
  }

  private async keepCopy(name: string, copy: RangedCopy): Promise<void> {
    await this.files.add(name, { file: copy.file, size: copy.bytes, copy });
    this.metrics?.cacheBytes.set(this.files.sizeBytes);
    this.journal.changed();
  }

  /** The ranged copies kept, as the journal names them. */
  private journaled(): Map<string, JournaledCopy> {
    const out = new Map<string, JournaledCopy>();
    for (const [name, entry] of this.files.all()) if (entry.copy) out.set(name, { file: path.basename(entry.copy.file), state: entry.copy.state });
    return out;
  }

  /**
   * Takes the ranged copies `dir`'s journal names (this process's directory from an earlier run,
   * or one claimed from a process gone) into this process's directory; what it does not name,
   * or names otherwise than it is, is removed.
   */
  private async adoptCopies(dir: string): Promise<void> {
    for (const [name, { file: base, state }] of await readJournal(dir)) {
      if (this.files.get(name)?.copy) continue;
      const file = path.join(this.rangedDir, base);
      if (dir !== this.rangedDir) {
        // One of this process's own files already: kept, the other goes with its directory.
        if (existsSync(file)) continue;
        if (!(await fs.rename(path.join(dir, base), file).then(() => true, () => false))) continue;
      }
      const copy: RangedCopy | undefined = await RangedCopy.adopt(this.ranges, file, state, this.counted(name, () => copy));
      if (copy) await this.keepCopy(name, copy);
    }
    const kept = new Set([...this.journaled().values()].map((c) => c.file));
    for (const f of await fs.readdir(this.rangedDir)) {
      if (f !== JOURNAL && !kept.has(f)) await fs.rm(path.join(this.rangedDir, f), { force: true });
    }
  }

  /**
   * Adopts what an earlier run left (the copies and their journal), once: a service starts it
   * before its first answer, which would otherwise wait for it; every read waits for it. A failed
   * scan (a full disk, too many open files) is tried again by the next caller, not kept.
   */
  prepare(): Promise<void> {
    if (this.local) return Promise.resolve();
    return (this.ready ??= this.scan().catch((err: unknown) => {
      this.ready = undefined;
      throw err;
    }));
  }

  /** Writes the ranged copies' journal now, not a second after the last change. */
  async close(): Promise<void> {
    await this.journal.flush();
  }

  private get rangedDir(): string {
    return path.join(this.files.dir, RANGED_DIR, String(process.pid));
  }

  /** Adopts the whole copies an earlier run left, its ranged copies, and those of processes gone. */
  private async scan(): Promise<void> {
    await this.files.scan();
    const root = path.join(this.files.dir, RANGED_DIR);
    await fs.mkdir(this.rangedDir, { recursive: true });
    await this.adoptCopies(this.rangedDir);
    for (const name of await fs.readdir(root)) {
      // A process's directory, or one a process claimed to adopt from (claimed-<pid>-<uuid>; one
      // of this pid's is an earlier run's, cut short).
      const claim = name.startsWith(CLAIMED);
      const owner = Number(claim ? name.slice(CLAIMED.length).split('-')[0] : name);
      if (owner === process.pid ? !claim : isRunning(owner)) continue;
      // Claimed first, by a rename only one process wins: two starting at once never share a copy.
      const claimed = path.join(root, `${CLAIMED}${process.pid}-${randomUUID()}`);
      if (!(await fs.rename(path.join(root, name), claimed).then(() => true, () => false))) continue;
      await this.adoptCopies(claimed);
      await fs.rm(claimed, { recursive: true, force: true });
    }
  }

  private remember(id: string): void {
    this.absent.add(id);
    if (this.absent.size > 100_000) this.absent.delete(this.absent.values().next().value!);
  }

  private async fetch(info: ObjectInfo, name: string): Promise<string> {
    const file = this.files.fileOf(name);
    // Its directory made again if it was deleted meanwhile (emptied by hand).
    await fs.mkdir(this.files.dir, { recursive: true });
    // A download cut off in its body is made again whole, to a fresh temporary file.
    await whileCut(async (answered) => {
      const tmp = `${file}.${randomUUID()}.tmp`;
      try {
        // Within the bound until the whole body is written: the download holds its socket.
        await this.requests(async () => {
          const got = await this.store.getStream(info.key);
          if (!got) throw new VanishedError(`archive part vanished: ${info.key}`);
          answered();
          await pipeToFile(tmp, got.body);
        });
        await fs.rename(tmp, file);
      } catch (err) {
        await fs.rm(tmp, { force: true });
        throw err;
      }
    });
    // An evicted file may still be open in a query: unlink keeps it readable on POSIX.
    await this.files.add(name, { file, size: (await fs.stat(file)).size });
    this.metrics?.cacheBytes.set(this.files.sizeBytes);
    return file;
  }

  get sizeBytes(): number {
    return this.files.sizeBytes;
  }
}


/** The cached file's name without its suffix: a hash of key and ETag, then the part's own name (de-duplication prefers the newest part by it). */
function cacheKeyOf(info: ObjectInfo): string {
  const hash = createHash('sha256').update(`${info.key}\n${info.etag}`).digest('hex').slice(0, 24);
  const base = info.key.slice(info.key.lastIndexOf('/') + 1);
  return `${hash}-${base.endsWith(SUFFIX) ? base.slice(0, -SUFFIX.length) : base}`;
}
