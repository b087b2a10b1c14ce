// One import at a time on a DATA_DIR. Two at once would each take the other's held reports for
// their own crashed run's (importFile.ts stages every held report received before it started)
// and store them twice, and two runs of one file would share its checkpoint and rejects file.
// The lock is a file naming its process; one left by a process no longer running is taken over.
// Imports called at once in one process run one after the other.
import fs from 'node:fs/promises';
import path from 'node:path';
import { isRunning } from '../shared/processes.js';

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
  for (let attempt = 0; ; attempt++) {
    try {
      await fs.writeFile(lock, String(process.pid), { flag: 'wx' });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 0) throw err;
      const owner = Number((await fs.readFile(lock, 'utf8').catch(() => '')).trim());
      // Our own pid is an earlier run's (a container's process is pid 1 each time).
      if (owner !== process.pid && isRunning(owner)) {
        throw new ImportRunningError(`another import is running on this data directory (pid ${owner}, ${lock}): wait for it to end, then run this one`);
      }
      await fs.rm(lock, { force: true });
    }
  }
  try {
    return await run();
  } finally {
    await fs.rm(lock, { force: true });
  }
}
