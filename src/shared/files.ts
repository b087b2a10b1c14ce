// Small file-system helpers shared by everything that keeps files under DATA_DIR: the
// embedded object store, the generated keys, the local caches. Writing and closing are
// page-cache operations of microseconds, done synchronously; flushing, which waits for the
// disk, goes to the thread pool.
import { chmodSync, closeSync, createWriteStream, fsync, mkdirSync, open, openSync, statSync, unlinkSync, writeSync } from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import { FolderUnavailableError, type Dependency } from './errors.js';

const fsyncFd = promisify(fsync);
const openFd = promisify(open);

/** Removes a file another may have removed or moved already (a lock taken over as stale, a temp file swept or put in place): nothing to let go then. */
export function unlinkQuietly(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // Gone already.
  }
}

/** Whether an error is the system error `code` (ENOENT, EEXIST, …). */
export function isCode(err: unknown, code: string): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === code;
}

/** Writes the whole body at the descriptor's position (short writes continue). */
function writeAll(fd: number, body: Buffer | string): void {
  const data = typeof body === 'string' ? Buffer.from(body) : body;
  for (let off = 0; off < data.length; ) off += writeSync(fd, data, off);
}

/** Creates (per `flags`, e.g. 'wx' to fail with EEXIST) and writes a file, fsyncs and closes it. */
export async function writeDurably(file: string, flags: string, body: Buffer | string, mode = 0o644): Promise<void> {
  const fd = openSync(file, flags, mode);
  try {
    writeAll(fd, body);
    await fsyncFd(fd);
  } finally {
    closeSync(fd);
  }
}

/** Flushes a file another writer made (DuckDB's COPY, a rename into place): its bytes survive a power loss. */
export async function fsyncFile(file: string): Promise<void> {
  const fd = await openFd(file, 'r');
  try {
    await fsyncFd(fd);
  } finally {
    closeSync(fd);
  }
}

/** Creates `dir` and any missing parent, each new name flushed into its parent (a power loss keeps them). */
export async function mkdirDurably(dir: string): Promise<void> {
  const first = await fsp.mkdir(dir, { recursive: true });
  if (first === undefined) return;
  // The first folder made, and each below it, is a name in its parent's entries.
  for (let made = path.resolve(dir); made !== path.dirname(made); made = path.dirname(made)) {
    await fsyncDir(path.dirname(made));
    if (made === path.resolve(first)) return;
  }
}

/** Flushes a directory, so the names created or renamed in it survive a power loss (opened to read, as a file is). */
export const fsyncDir = (dir: string): Promise<void> => fsyncFile(dir);

/**
 * DATA_DIR (keys, the ledger, webhook secrets) is created readable by its owner alone (0700).
 * One that exists already is left as the operator made it; the secrets in it are 0600 anyway.
 */
export function ensureDataDir(dir: string): void {
  ensureFolder(dir, 'ledger', 'data directory', 'DATA_DIR', 0o700);
}

/**
 * Creates a configured folder (the data dir, the cache, the temp folder, the file store) and its
 * missing parents, or throws what a start reports: a file where the folder should be, a
 * read-only mount, no permission, a pseudo-filesystem.
 */
export function ensureFolder(dir: string, dependency: Dependency, what: string, setting: string, mode?: number): void {
  try {
    makeFolders(dir, mode);
  } catch (err) {
    // Storage the process cannot use (the exit code and message a start reports), not a fault in this code.
    throw new FolderUnavailableError(dependency, `${what} unavailable (${(err as { code?: string }).code ?? 'error'}): ${dir}`, setting, { cause: err });
  }
}

/**
 * `mkdir -p`, one name at a time. Node's recursive mkdir spins forever, deaf to signals, where a
 * parent exists but refuses the child with ENOENT (a folder under /proc).
 */
function makeFolders(dir: string, mode?: number): void {
  const missing: string[] = [];
  for (let at = path.resolve(dir); ; at = path.dirname(at)) {
    try {
      if (statSync(at).isDirectory()) break;
      throw Object.assign(new Error(`not a directory: ${at}`), { code: 'ENOTDIR' });
    } catch (err) {
      if (!isCode(err, 'ENOENT')) throw err;
    }
    missing.push(at);
    if (at === path.dirname(at)) break;
  }
  for (const at of missing.reverse()) {
    try {
      mkdirSync(at, mode === undefined ? {} : { mode });
    } catch (err) {
      if (!isCode(err, 'EEXIST')) throw err; // another process made it meanwhile, or a file
    }
  }
  if (missing.length > 0 && !statSync(dir).isDirectory()) throw Object.assign(new Error(`not a directory: ${dir}`), { code: 'ENOTDIR' });
}

/**
 * Makes an SQLite database file private (0600) before SQLite opens it: created with that mode
 * when absent (SQLite gives its -wal and -shm files the database file's mode), and narrowed,
 * with its -wal and -shm, when an earlier release left it readable by others. An existing file is
 * never opened here: closing any descriptor of it drops every POSIX lock this process holds on it,
 * SQLite's among them (a second runtime in `all` did, and a backup beside the service then took
 * the live ledger for idle and deleted its -wal).
 */
export function privateDatabaseFile(file: string): void {
  try {
    closeSync(openSync(file, 'wx', 0o600));
  } catch (err) {
    if (!isCode(err, 'EEXIST')) throw err;
  }
  for (const f of [file, `${file}-wal`, `${file}-shm`]) {
    try {
      chmodSync(f, 0o600);
    } catch (err) {
      // EPERM: another user's file, shared through the group; only its owner can narrow it.
      if (!isCode(err, 'ENOENT') && !isCode(err, 'EPERM')) throw err;
    }
  }
}

/**
 * Pipes `source` (through any `transforms`) into a new file at `file`, settling only once the
 * file is closed: a pipeline fails as soon as its source does, while its write stream may still
 * be opening the file, which would then be created after the caller's clean-up had run.
 */
export async function pipeToFile(file: string, source: NodeJS.ReadableStream, ...transforms: NodeJS.ReadWriteStream[]): Promise<void> {
  const out = createWriteStream(file);
  try {
    await pipeline([source, ...transforms, out]);
  } finally {
    if (!out.closed) await once(out, 'close');
  }
}

/** A path whose links go round in a loop: no file can be written there. */
export class LinkLoopError extends Error {
  override name = 'LinkLoopError';
}

/**
 * The file a path names through its links, a link to no file yet included (its target), as the
 * system resolves them (each link against the real folder it sits in): a file written there keeps
 * the links. LinkLoopError for links that go round.
 */
export async function linkTarget(named: string): Promise<string> {
  let file = path.resolve(named);
  for (let hops = 0; hops < 40; hops++) {
    try {
      return await fsp.realpath(file);
    } catch (err) {
      if (isCode(err, 'ELOOP')) throw new LinkLoopError(`${named}: its links go round in a loop`);
      if (!isCode(err, 'ENOENT')) throw err;
    }
    // Nothing there: the path itself, or the link to no file yet it is.
    const folder = await fsp.realpath(path.dirname(file)).catch(() => path.dirname(file));
    const link = await fsp.readlink(file).catch(() => undefined);
    if (link === undefined) return path.join(folder, path.basename(file));
    file = path.resolve(folder, link);
  }
  throw new LinkLoopError(`${named}: its links go round in a loop`);
}

/**
 * Whether a file can be written at `file` (its target, linkTarget's): one that is there is opened
 * to append, nothing written; otherwise a file of a name of its own is made in its folder, and
 * removed. Never a permission test (root passes those anywhere), and nothing another process may
 * be writing is touched. Rejects with the system's error when it cannot.
 */
export async function checkWritable(file: string): Promise<void> {
  const handle = await fsp.open(file, 'r+').catch((err: unknown) => {
    if (isCode(err, 'ENOENT')) return undefined;
    throw err;
  });
  if (handle) return handle.close();
  await checkFolderWritable(path.dirname(file));
}

/** Whether files can be made in `folder`: one of a name of its own is made there, and removed. Rejects with the system's error when it cannot. */
export async function checkFolderWritable(folder: string): Promise<void> {
  const probe = path.join(folder, `.${randomUUID()}.probe`);
  await (await fsp.open(probe, 'wx')).close();
  await fsp.rm(probe, { force: true });
}
