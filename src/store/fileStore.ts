// Object store on a local directory: the embedded default (parts, boundaries,
// job runs). Every write is durable before it resolves: written to a temporary
// file, fsync'd, renamed (or linked, for create-if-absent) into place, and its
// directory fsync'd.
import { randomBytes } from 'node:crypto';
import { constants as fsc, existsSync, linkSync, mkdirSync, readdirSync, renameSync, rmdirSync, statSync, unlinkSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { UnavailableError } from '../shared/errors.js';
import { fsyncDir, isCode, unlinkQuietly, writeDurably } from '../shared/files.js';
import { pause } from '../shared/pause.js';
import { whileHeldAmongProcesses } from './fileMutex.js';
import { assertValidKey, InvalidKeyError, storeStream, type ListOptions, type LocalFiles, type ObjectInfo, type ObjectStore, type StoredObject, type StreamedObject } from './objectStore.js';

const TMP_MARK = '.tmp-';
/** The suffix of a key's mutex among processes (fileMutex.ts): a temporary name, never listed. */
const CAS_MARK = `${TMP_MARK}cas`;

/** Whether a file name is a pin's (localFiles' `pin`): its age is its inode's last change, as its content's time is its object's. */
export function isPinName(name: string): boolean {
  return name.includes(`${TMP_MARK}pin-`);
}

/** Whether a file name is one of this store's temporary files (never a stored object). */
export function isTemporaryName(name: string): boolean {
  return name.includes(TMP_MARK);
}

/**
 * Where pins are: hard links to objects' files, one per reader, which keep a file's bytes after
 * the object is deleted until the reader lets go. A temporary name: never listed, and swept with
 * the other temporary files should a process die holding some (leftovers.ts).
 */
const PINS_DIR = `${TMP_MARK}pins`;

/**
 * The temporary files this process is writing or has yet to move into place: removed as it exits
 * part-way (an ops command stopped by Ctrl-C exits at once), so none is left in a folder published
 * whole, as a release's is. Those of a process killed outright are swept (leftovers.ts).
 */
const inFlight = new Set<string>();
let removedOnExit = false;

function tracked(tmp: string): string {
  if (!removedOnExit) {
    removedOnExit = true;
    process.on('exit', () => inFlight.forEach(unlinkQuietly));
  }
  inFlight.add(tmp);
  return tmp;
}

/** Tries at making a write's folder while deletes elsewhere keep pruning it (each try needs one such delete). */
const FOLDER_ATTEMPTS = 20;

/** The files of a store on the directory `root`: the file store's own layout, for readers that open them in place. */
export function localFiles(root: string): LocalFiles {
  const fileOf = (key: string) => {
    assertValidKey(key);
    return path.join(root, ...key.split('/'));
  };
  const pins = path.join(root, PINS_DIR);
  return {
    fileOf,
    // Synchronous, as the readers' own opens are: a link is a few microseconds here, and a
    // year's answer pins some 365 files.
    pin(key) {
      const file = fileOf(key);
      const pinned = path.join(pins, `${path.basename(file)}${TMP_MARK}pin-${randomBytes(6).toString('hex')}`);
      for (let attempt = 0; ; attempt++) {
        try {
          linkSync(file, pinned);
          return { file: pinned, release: () => unlinkQuietly(pinned) };
        } catch (err) {
          if (isCode(err, 'ENOENT') && existsSync(file) && attempt === 0) {
            mkdirSync(pins, { recursive: true }); // the first pin of this directory
            continue;
          }
          if (isCode(err, 'ENOENT')) return undefined;
          // No hard links here (another file system's mount, a read-only store): read in place, as before pins.
          return { file, release: () => undefined };
        }
      }
    },
  };
}

/**
 * fsyncDir, done when the directory is gone: another process deleted every key in it after this
 * one's rename (and removed the empty folder), so no name of this write is left to make durable.
 */
async function fsyncDirIfThere(dir: string): Promise<void> {
  try {
    await fsyncDir(dir);
  } catch (err) {
    if (!isCode(err, 'ENOENT')) throw err;
  }
}

export class FileObjectStore implements ObjectStore {
  readonly description: string;
  /** Directories known to exist: saves a mkdir per write on the hot path. */
  private readonly dirs = new Set<string>();
  /** Directory fsyncs in flight, so concurrent writers share one (group commit). */
  private readonly dirSyncs = new Map<string, { running: Promise<void>; next?: Promise<void> }>();

  private readonly files: LocalFiles;

  constructor(private readonly root: string) {
    this.description = `file://${root}`;
    this.files = localFiles(root);
  }

  /** Runs an operation with disk errors turned into UnavailableError. */
  private run<T>(fn: () => Promise<T>): Promise<T> {
    return guard(fn);
  }

  private localPath(key: string): string {
    return this.files.fileOf(key);
  }

  async get(key: string): Promise<StoredObject | undefined> {
    const file = this.localPath(key);
    return this.run(async () => {
      // One open file for both: a body and an ETag of two versions would let a writer replace
      // the version it did not read (putIfMatch).
      const handle = await openIfPresent(file);
      if (!handle) return undefined;
      try {
        const [body, stat] = await Promise.all([handle.readFile(), handle.stat()]);
        return { key, body, size: stat.size, etag: etagOf(stat), lastModified: stat.mtime };
      } finally {
        await handle.close();
      }
    });
  }

  async getRange(key: string, start: number, length: number, options: { ifMatch?: string } = {}): Promise<StoredObject | undefined> {
    const file = this.localPath(key);
    return this.run(async () => {
      const handle = await openIfPresent(file);
      if (!handle) return undefined;
      try {
        const stat = await handle.stat();
        const etag = etagOf(stat);
        if (options.ifMatch !== undefined && etag !== options.ifMatch) return undefined;
        const out = Buffer.alloc(Math.max(0, Math.min(length, stat.size - start)));
        let n = 0;
        for (let got = -1; got !== 0 && n < out.length; n += got) got = (await handle.read(out, n, out.length - n, start + n)).bytesRead;
        return { key, body: out.subarray(0, n), size: stat.size, etag, lastModified: stat.mtime };
      } finally {
        await handle.close();
      }
    });
  }

  /** Read whole: a local range needs no stream (the part cache reads local files in place). */
  async getRangeStream(key: string, start: number, length: number, options: { ifMatch?: string } = {}): Promise<StreamedObject | undefined> {
    const got = await this.getRange(key, start, length, options);
    if (!got) return undefined;
    const { body, ...info } = got;
    return { ...info, body: Readable.from([body]) };
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    // Synchronous: a stat is answered from the inode cache in microseconds, less than a
    // thread-pool round trip (every report accepted starts with one).
    const file = this.localPath(key);
    return this.run(async () => this.statInfo(key, file));
  }

  async put(key: string, body: Buffer | string): Promise<void> {
    const file = this.localPath(key);
    await this.run(async () => {
      const tmp = await this.writeTemp(file, body);
      try {
        // Not between another process's compare and rename (putIfMatch): that would replace this
        // version on the strength of one read before it, which S3 refuses.
        await whileHeldAmongProcesses(file, CAS_MARK, () => renameSync(tmp, file));
      } finally {
        inFlight.delete(tmp);
      }
      await this.syncDir(path.dirname(file));
    });
  }

  /** A read and a durable write, as a put: a hard link would give the copy its source's modification time (lastModified). */
  async copy(from: string, to: string): Promise<boolean> {
    const source = await this.get(from);
    if (!source) return false;
    await this.put(to, source.body);
    return true;
  }

  async putIfAbsent(key: string, body: Buffer | string): Promise<boolean> {
    const file = this.localPath(key);
    return this.run(async () => {
      const tmp = await this.writeTemp(file, body);
      try {
        // link(2) fails with EEXIST atomically: the create-if-absent of a full, fsync'd file.
        linkSync(tmp, file);
      } catch (err) {
        if (isCode(err, 'EEXIST')) return false;
        throw err;
      } finally {
        unlinkSync(tmp);
        inFlight.delete(tmp);
      }
      await this.syncDir(path.dirname(file));
      return true;
    });
  }

  async putIfMatch(key: string, body: Buffer | string, etag: string): Promise<boolean> {
    const file = this.localPath(key);
    return this.run(async () => {
      if (this.statInfo(key, file)?.etag !== etag) return false;
      const tmp = await this.writeTemp(file, body);
      // Looked at again with the rename, while no other process does the same for this key (a
      // lock taken over from a dead holder by `all` and a CLI job at once), nor puts or deletes
      // it. A create needs no wait: it only succeeds where the compare found nothing.
      let replaced = false;
      try {
        replaced = await whileHeldAmongProcesses(file, CAS_MARK, () => {
          if (this.statInfo(key, file)?.etag !== etag) return false;
          renameSync(tmp, file);
          return true;
        });
      } catch (err) {
        if (!isCode(err, 'ENOENT')) throw err; // its folder is gone: the key was deleted
      } finally {
        if (!replaced) unlinkSync(tmp);
        inFlight.delete(tmp);
      }
      if (!replaced) return false;
      await this.syncDir(path.dirname(file));
      return true;
    });
  }

  async delete(keys: readonly string[]): Promise<void> {
    const files = keys.map((k) => this.localPath(k));
    await this.run(async () => {
      // Each under its key's mutex: a delete between a replace's compare and its rename would
      // be undone by the rename, the object back as if never deleted.
      await Promise.all(
        files.map((f) =>
          whileHeldAmongProcesses(f, CAS_MARK, () => unlinkSync(f)).catch((err: unknown) => {
            if (!isCode(err, 'ENOENT')) throw err; // the key, or its folder, is not there
          }),
        ),
      );
      for (const dir of new Set(files.map((f) => path.dirname(f)))) this.pruneEmpty(dir);
    });
  }

  /**
   * Removes `dir` and its parents while they are empty (never the root), as S3 keeps no empty
   * "folders": compaction empties 24 hour folders a day, and a listing of a year otherwise
   * walks thousands of them. A writer racing the removal recreates the folder (`writeTemp`).
   */
  private pruneEmpty(dir: string): void {
    for (let d = dir; d.startsWith(this.root + path.sep); d = path.dirname(d)) {
      try {
        rmdirSync(d);
      } catch {
        // Not empty, already gone, or not ours to remove (a read-only store): an empty folder
        // costs a listing a little time, never a wrong answer.
        return;
      }
      this.dirs.delete(d);
    }
  }

  async *list(options: ListOptions): AsyncIterable<ObjectInfo> {
    const { prefix, startAfter = '' } = options;
    // Start the walk at the deepest directory the prefix names.
    const dirPrefix = prefix.includes('/') ? prefix.slice(0, prefix.lastIndexOf('/') + 1) : '';
    yield* this.walk(dirPrefix, prefix, startAfter);
  }

  // Directory reads and stats are synchronous: on a local disk each takes microseconds, and
  // a listing of a year of partitions made of thousands of thread-pool round trips spent most
  // of its time waiting. The walk yields to the event loop between folders and every few
  // hundred entries.
  private async *walk(dirKey: string, prefix: string, startAfter: string): AsyncIterable<ObjectInfo> {
    const dir = dirKey === '' ? this.root : path.join(this.root, ...dirKey.split('/').filter(Boolean));
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch (err) {
      if (isCode(err, 'ENOENT') || isCode(err, 'ENOTDIR')) return;
      throw new UnavailableError('storage', 'object store directory unreadable', { cause: err });
    }
    // An empty folder (left by a release that did not prune, or by a crash between a delete
    // and its pruning) is removed when met, so the next listing need not walk it.
    if (entries.length === 0 && dirKey !== '') this.pruneEmpty(dir);
    // Sort as keys sort (a directory's keys continue with '/'), so the walk yields S3's order.
    const named = entries
      .filter((e) => !e.name.includes(TMP_MARK))
      .map((e) => ({ entry: e, key: dirKey + e.name + (e.isDirectory() ? '/' : '') }))
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    let stats = 0;
    for (const { entry, key } of named) {
      // Big folders must not hold the event loop for long.
      if (++stats % 256 === 0) await new Promise<void>((resolve) => setImmediate(resolve));
      if (entry.isDirectory()) {
        // Skip subtrees entirely before startAfter, or outside the prefix.
        if (key < startAfter && !startAfter.startsWith(key)) continue;
        if (!key.startsWith(prefix) && !prefix.startsWith(key)) continue;
        await new Promise<void>((resolve) => setImmediate(resolve));
        yield* this.walk(key, prefix, startAfter);
      } else if (entry.isFile() && key > startAfter && key.startsWith(prefix)) {
        const info = this.statInfo(key, path.join(dir, entry.name));
        if (info) yield info;
      }
    }
  }

  private statInfo(key: string, file: string): ObjectInfo | undefined {
    try {
      const stat = statSync(file);
      return { key, size: stat.size, etag: etagOf(stat), lastModified: stat.mtime };
    } catch (err) {
      // Absent (or deleted since its directory was read).
      if (isCode(err, 'ENOENT')) return undefined;
      throw new UnavailableError('storage', 'object store file unreadable', { cause: err });
    }
  }

  async getStream(key: string): Promise<StreamedObject | undefined> {
    const file = this.localPath(key);
    return this.run(async () => {
      const handle = await openIfPresent(file);
      if (!handle) return undefined;
      try {
        // The open file is read, whatever replaces the key meanwhile: its stat describes those bytes.
        const stat = await handle.stat();
        return { key, size: stat.size, etag: etagOf(stat), lastModified: stat.mtime, body: storeStream(handle.createReadStream(), unreadable) };
      } catch (err) {
        await handle.close();
        throw err;
      }
    });
  }

  async ping(): Promise<void> {
    await this.run(async () => {
      await fs.mkdir(this.root, { recursive: true });
      await fs.access(this.root, fsc.R_OK | fsc.W_OK);
    });
  }

  private async ensureDir(dir: string): Promise<void> {
    if (this.dirs.has(dir)) return;
    await fs.mkdir(dir, { recursive: true });
    this.dirs.add(dir);
  }

  /**
   * Makes the directory's entries durable. A caller joins the next fsync to
   * start after its own rename, never one already running (which may predate it).
   */
  private syncDir(dir: string): Promise<void> {
    const state = this.dirSyncs.get(dir);
    if (!state) {
      const running = fsyncDirIfThere(dir).finally(() => this.afterDirSync(dir));
      this.dirSyncs.set(dir, { running });
      return running;
    }
    state.next ??= state.running.catch(() => undefined).then(() => fsyncDirIfThere(dir));
    return state.next;
  }

  private afterDirSync(dir: string): void {
    const state = this.dirSyncs.get(dir);
    if (!state?.next) {
      this.dirSyncs.delete(dir);
      return;
    }
    const running = state.next.finally(() => this.afterDirSync(dir));
    // Its callers hold `state.next` and see a failure there; this copy only chains the next fsync.
    running.catch(() => undefined);
    this.dirSyncs.set(dir, { running });
  }

  private async writeTemp(file: string, body: Buffer | string): Promise<string> {
    const dir = path.dirname(file);
    const tmp = tracked(`${file}${TMP_MARK}${randomBytes(6).toString('hex')}`);
    for (let attempt = 1; ; attempt++) {
      try {
        await this.ensureDir(dir);
        await writeDurably(tmp, 'wx', body);
        return tmp;
      } catch (err) {
        // A delete (in this process or another) pruned the folder, or one above it, emptied
        // since it was made, or while Node's recursive mkdir was making it (ENOENT; ENOTDIR when
        // a folder it found is gone by its check): made again, up to FOLDER_ATTEMPTS times.
        if (!(isCode(err, 'ENOENT') || isCode(err, 'ENOTDIR')) || attempt === FOLDER_ATTEMPTS) {
          // What a full disk let be written is of no use.
          unlinkQuietly(tmp);
          inFlight.delete(tmp);
          throw err;
        }
        this.dirs.delete(dir);
        // A moment longer before each try (190 ms in all): a delete's pruning of many folders passes.
        await pause(attempt);
      }
    }
  }
}

/** The file open for reading, or undefined when it is absent. */
async function openIfPresent(file: string): Promise<fs.FileHandle | undefined> {
  try {
    return await fs.open(file, 'r');
  } catch (err) {
    if (isCode(err, 'ENOENT')) return undefined;
    throw err;
  }
}

function etagOf(stat: { mtimeMs: number; size: number; ino: number }): string {
  return `${Math.round(stat.mtimeMs * 1000).toString(36)}-${stat.size.toString(36)}-${stat.ino.toString(36)}`;
}

function unreadable(err: unknown): Error {
  return err instanceof UnavailableError ? err : new UnavailableError('storage', 'object store read failed', { cause: err });
}

/** Disk errors (full, read-only, permissions) become UnavailableError at this boundary. */
async function guard<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof UnavailableError || err instanceof InvalidKeyError) throw err;
    const code = (err as { code?: unknown } | null)?.code;
    throw new UnavailableError('storage', `object store write or read failed${typeof code === 'string' ? ` (${code})` : ''}`, { cause: err });
  }
}
