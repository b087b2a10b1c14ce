// Small file-system helpers shared by everything that keeps files under DATA_DIR: the
// embedded object store, the generated keys, the local caches. Writing and closing are
// page-cache operations of microseconds, done synchronously; flushing, which waits for the
// disk, goes to the thread pool.
import { closeSync, fsync, open, openSync, writeSync } from 'node:fs';
import { promisify } from 'node:util';

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
