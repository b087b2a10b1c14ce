// Small file-system helpers shared by everything that keeps files under DATA_DIR: the
// embedded object store, the generated keys, the local caches. Writing and closing are
// page-cache operations of microseconds, done synchronously; flushing, which waits for the
// disk, goes to the thread pool.
import { chmodSync, closeSync, createWriteStream, fsync, mkdirSync, open, openSync, writeSync } from 'node:fs';
import { once } from 'node:events';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import { UnavailableError } from './errors.js';

const fsyncFd = promisify(fsync);
const openFd = promisify(open);

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

/** Flushes a directory, so the names created or renamed in it survive a power loss. */
export async function fsyncDir(dir: string): Promise<void> {
  const fd = await openFd(dir, 'r');
  try {
    await fsyncFd(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * DATA_DIR (keys, the ledger, webhook secrets) is created readable by its owner alone (0700).
 * One that exists already is left as the operator made it; the secrets in it are 0600 anyway.
 */
export function ensureDataDir(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (err) {
    // A file where the directory should be, a read-only mount, no permission: storage the
    // process cannot use (the exit code and message a start reports), not a fault in this code.
    throw new UnavailableError('ledger', `data directory unavailable (${(err as { code?: string }).code ?? 'error'}): ${dir}`, { cause: err });
  }
}

/**
 * Makes an SQLite database file private (0600) before SQLite opens it: created with that mode
 * when absent (SQLite gives its -wal and -shm files the database file's mode), and narrowed,
 * with its -wal and -shm, when an earlier release left it readable by others.
 */
export function privateDatabaseFile(file: string): void {
  closeSync(openSync(file, 'a', 0o600));
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
