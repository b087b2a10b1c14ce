// One import at a time. Two at once would each take the other's held reports for their own
// crashed run's (importFile.ts stages every held report received before it started) and store
// them twice, and two runs of one file would share its checkpoint and rejects file. Two locks:
// - the archive's (`ingest/import-lock.json`, storeLock.ts), so imports on other hosts into the
//   same bucket (whose ledger the bucket holds on AWS) wait their turn too;
// - the data directory's, a file (`tmp/import/import.lock`) created whole by a link, for the run
//   folders and checkpoints under it, whatever store it names: touched every minute, taken over
//   when untouched for five minutes or when its holder is seen to be gone, as the archive's is.
// Imports called at once in one process take turns.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from '../shared/log.js';
import { IMPORT_LOCK_KEY } from '../store/layout.js';
import type { ObjectStore } from '../store/objectStore.js';
import { goneFromHere, holdLock, PLACE, STALE_MS, TOUCH_MS, withStoreLock } from './storeLock.js';

export class ImportRunningError extends Error {
  override name = 'ImportRunningError';
}

/** Where an import's locks are: the archive's store, the data directory; told of a lock lost while held. */
export interface ImportLocks {
  store: Pick<ObjectStore, 'description' | 'get' | 'putIfAbsent' | 'putIfMatch' | 'delete'>;
  dataDir: string;
  log: Pick<Logger, 'warn'>;
  /** How often the locks are touched (a minute; shorter in tests). */
  touchMs?: number;
}

/** This process's imports, one after another (the locks tell processes apart, not calls). */
let turns: Promise<unknown> = Promise.resolve();

/** A lock lost while its import ran (taken over by another, its touches unable to reach the store for five minutes). */
export class ImportLockLostError extends ImportRunningError {
  override name = 'ImportLockLostError';
}

/**
 * Runs `run` holding both locks. `run` is given `stillHeld`, which throws ImportLockLostError once
 * the archive's lock is known to be another's: called before each step that writes, it stops an
 * import that two would otherwise run at once.
 */
export function withImportLock<T>(locks: ImportLocks, run: (stillHeld: () => void) => Promise<T>): Promise<T> {
  const archive = { ...locks, key: IMPORT_LOCK_KEY, what: 'import', errors: { running: (m: string) => new ImportRunningError(m), lost: (m: string) => new ImportLockLostError(m) } };
  const turn = turns.then(() => withStoreLock(archive, (stillHeld) => inDataDir(locks.dataDir, () => run(stillHeld))));
  turns = turn.catch(() => undefined);
  return turn;
}

async function inDataDir<T>(dataDir: string, run: () => Promise<T>): Promise<T> {
  const dir = path.join(dataDir, 'tmp', 'import');
  await fs.mkdir(dir, { recursive: true });
  const lock = path.join(dir, 'import.lock');
  const token = JSON.stringify({ host: os.hostname(), pid: process.pid, ...(PLACE !== undefined && { place: PLACE }), id: randomUUID(), since: new Date().toISOString() });
  await acquireFile(lock, token);
  // Only our own: a lock taken over meanwhile is its new holder's.
  const giveBack = async () => {
    if ((await fs.readFile(lock, 'utf8').catch(() => '')) === token) await fs.rm(lock, { force: true });
  };
  // A signal stops the import through the archive's lock it runs under; this one goes as the run ends.
  const letGo = holdLock(() => undefined);
  const touch = setInterval(() => void fs.utimes(lock, new Date(), new Date()).catch(() => undefined), TOUCH_MS);
  touch.unref();
  try {
    return await run();
  } finally {
    clearInterval(touch);
    await giveBack();
    letGo();
  }
}

async function acquireFile(lock: string, token: string): Promise<void> {
  const mine = `${lock}.${randomUUID()}`;
  await fs.writeFile(mine, token);
  try {
    for (let attempt = 0; attempt < 2; attempt++) {
      // A link creates the lock with its content already whole, or fails where one stands.
      if (await fs.link(mine, lock).then(() => true, (err: NodeJS.ErrnoException) => (err.code === 'EEXIST' ? false : Promise.reject(err)))) return;
      const held = await fs.readFile(lock, 'utf8').catch(() => undefined);
      const stat = await fs.stat(lock).catch(() => undefined);
      if (held === undefined || !stat) continue; // released meanwhile
      if (Date.now() - stat.mtimeMs < STALE_MS && !goneFromHere(parseHolder(held))) {
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

function parseHolder(text: string): { host?: unknown; pid?: unknown; place?: unknown } {
  try {
    return JSON.parse(text) as { host?: unknown; pid?: unknown; place?: unknown };
  } catch {
    return {};
  }
}
