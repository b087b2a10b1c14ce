// One import at a time on a DATA_DIR. Two at once would each take the other's held reports for
// their own crashed run's (importFile.ts stages every held report received before it started)
// and store them twice, and two runs of one file would share its checkpoint and rejects file.
// The lock is a file (`tmp/import/import.lock`) created whole by a link, naming its holder; the
// holder touches it every minute, and one untouched for five minutes (its process gone, on this
// host or in another container) is taken over. Imports called at once in one process take turns.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

/** Untouched this long, a lock's holder is gone. */
const STALE_MS = 5 * 60_000;
const TOUCH_MS = 60_000;

export class ImportRunningError extends Error {
  override name = 'ImportRunningError';
}

/** This process's imports, one after another (the lock file tells processes apart, not calls). */
let turns: Promise<unknown> = Promise.resolve();

export function withImportLock<T>(dataDir: string, run: () => Promise<T>): Promise<T> {
  const turn = turns.then(() => locked(dataDir, run));
  turns = turn.catch(() => undefined);
  return turn;
}

async function locked<T>(dataDir: string, run: () => Promise<T>): Promise<T> {
  const dir = path.join(dataDir, 'tmp', 'import');
  await fs.mkdir(dir, { recursive: true });
  const lock = path.join(dir, 'import.lock');
  const token = JSON.stringify({ host: os.hostname(), pid: process.pid, id: randomUUID(), since: new Date().toISOString() });
  await acquire(lock, token);
  const touch = setInterval(() => void fs.utimes(lock, new Date(), new Date()).catch(() => undefined), TOUCH_MS);
  touch.unref();
  try {
    return await run();
  } finally {
    clearInterval(touch);
    // Only our own: a lock taken over meanwhile is its new holder's.
    if ((await fs.readFile(lock, 'utf8').catch(() => '')) === token) await fs.rm(lock, { force: true });
  }
}

async function acquire(lock: string, token: string): Promise<void> {
  const mine = `${lock}.${randomUUID()}`;
  await fs.writeFile(mine, token);
  try {
    for (let attempt = 0; attempt < 2; attempt++) {
      // A link creates the lock with its content already whole, or fails where one stands.
      if (await fs.link(mine, lock).then(() => true, (err: NodeJS.ErrnoException) => (err.code === 'EEXIST' ? false : Promise.reject(err)))) return;
      const held = await fs.readFile(lock, 'utf8').catch(() => undefined);
      const stat = await fs.stat(lock).catch(() => undefined);
      if (held === undefined || !stat) continue; // released meanwhile
      if (Date.now() - stat.mtimeMs < STALE_MS) {
        throw new ImportRunningError(`another import is running on this data directory (${held}, ${lock}): wait for it to end, then run this one`);
      }
      // Taken over only as it was judged stale: a lock another process took over since stays.
      if ((await fs.readFile(lock, 'utf8').catch(() => undefined)) === held) await fs.rm(lock, { force: true });
    }
    throw new ImportRunningError(`another import took this data directory's lock (${lock}) at the same moment: run this one once it ends`);
  } finally {
    await fs.rm(mine, { force: true });
  }
}
