// One import at a time. Two at once would each take the other's held reports for their own
// crashed run's (importFile.ts stages every held report received before it started) and store
// them twice, and two runs of one file would share its checkpoint and rejects file. Two locks:
// - the archive's, an object in the store (`ingest/import-lock.json`), created if absent and
//   naming its holder, so imports on other hosts into the same bucket (whose ledger the bucket
//   holds on AWS) wait their turn too;
// - the data directory's, a file (`tmp/import/import.lock`) created whole by a link, for the run
//   folders and checkpoints under it, whatever store it names.
// Each holder touches its locks every minute; one untouched for five minutes (its process gone,
// on this host or in another container), or whose holder is seen to be gone (the same boot and
// pid namespace, its pid not running), is taken over; an import whose lock was taken over stops
// at its next step; a process stopped by a signal gives its locks back (giveBackImportLocks).
// Imports called at once in one process take turns.
import { randomUUID } from 'node:crypto';
import { readFileSync, readlinkSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from '../shared/log.js';
import { IMPORT_LOCK_KEY } from '../store/layout.js';
import type { ObjectStore } from '../store/objectStore.js';

/** Untouched this long, a lock's holder is gone. */
const STALE_MS = 5 * 60_000;
const TOUCH_MS = 60_000;

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

/** How to give back each lock this process holds now: for a stop by a signal (the command line's). */
const holding = new Set<() => Promise<void>>();

/**
 * Gives back the locks this process holds, for a process about to exit on a signal (Ctrl-C): the
 * next import need not wait five minutes for them to go stale. The import itself is left where
 * the signal found it, as a crash would leave it; its checkpoint resumes it.
 */
export async function giveBackImportLocks(): Promise<void> {
  await Promise.all([...holding].map((giveBack) => giveBack().catch(() => undefined)));
}

/**
 * Where this process runs, as far as telling a holder's death goes: the machine's boot and its pid
 * namespace (Linux; elsewhere unknown). A pid means the same process only under both: containers
 * on one host may share its name while each has its own pids (and each is pid 1).
 */
export const PLACE = (() => {
  try {
    return `${readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()} ${readlinkSync('/proc/self/ns/pid')}`;
  } catch {
    return undefined;
  }
})();

/** Whether `holder`, which is not this lock's own, names a process gone from where this one runs (a lock its crash left). */
function goneFromHere(holder: { host?: unknown; pid?: unknown; place?: unknown }): boolean {
  if (PLACE === undefined || holder.place !== PLACE || holder.host !== os.hostname() || typeof holder.pid !== 'number') return false;
  // This very process, under another lock id: an earlier process that had its pid.
  if (holder.pid === process.pid) return true;
  try {
    process.kill(holder.pid, 0);
    return false;
  } catch (err) {
    // EPERM: there, another user's.
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

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
  const turn = turns.then(() => inStore(locks, (stillHeld) => inDataDir(locks.dataDir, () => run(stillHeld))));
  turns = turn.catch(() => undefined);
  return turn;
}

/** What a lock says of its holder; `touched` is the holder's clock, as the scheduler's leases are. */
interface Holder {
  host: string;
  pid: number;
  /** Boot and pid namespace (goneFromHere), when known. */
  place?: string;
  id: string;
  since: string;
  touched: string;
}

async function inStore<T>(locks: ImportLocks, run: (stillHeld: () => void) => Promise<T>): Promise<T> {
  const { store, log } = locks;
  const since = new Date().toISOString();
  const me = { host: os.hostname(), pid: process.pid, ...(PLACE !== undefined && { place: PLACE }), id: randomUUID(), since };
  const body = (): string => JSON.stringify({ ...me, touched: new Date().toISOString() } satisfies Holder);
  const holderOf = async (): Promise<{ holder: Holder | undefined; etag: string } | undefined> => {
    const got = await store.get(IMPORT_LOCK_KEY);
    if (!got) return undefined;
    try {
      return { holder: JSON.parse(got.body.toString('utf8')) as Holder, etag: got.etag };
    } catch {
      return { holder: undefined, etag: got.etag }; // not ours to read: taken for stale below
    }
  };
  const acquire = async (): Promise<void> => {
    for (let attempt = 0; attempt < 2; attempt++) {
      if (await store.putIfAbsent(IMPORT_LOCK_KEY, body())) return;
      const held = await holderOf();
      if (!held) continue; // released meanwhile
      // Our own create, retried by the SDK after its answer was lost, is refused as a repeat: still ours.
      if (held.holder?.id === me.id) return;
      const touched = Date.parse(held.holder?.touched ?? '');
      if (Date.now() - touched < STALE_MS && !(held.holder && goneFromHere(held.holder))) {
        throw new ImportRunningError(`another import is running on this archive (${JSON.stringify(held.holder)}, ${IMPORT_LOCK_KEY} in ${store.description}): wait for it to end, then run this one`);
      }
      // Taken over only as it was judged stale: a lock another process took over since stays.
      if (await store.putIfMatch(IMPORT_LOCK_KEY, body(), held.etag)) return;
    }
    // A takeover of ours whose answer was lost, refused when the SDK asked again: still ours.
    if ((await holderOf())?.holder?.id === me.id) return;
    throw new ImportRunningError(`another import took this archive's lock (${IMPORT_LOCK_KEY} in ${store.description}) at the same moment: run this one once it ends`);
  };
  await acquire();
  const giveBack = async () => {
    // Only our own: a lock taken over meanwhile is its new holder's.
    const held = await holderOf().catch(() => undefined);
    if (held?.holder?.id === me.id) await store.delete([IMPORT_LOCK_KEY]).catch(() => undefined);
  };
  holding.add(giveBack);
  let lost: Holder | 'gone' | undefined;
  const stillHeld = () => {
    if (lost) throw new ImportLockLostError(`this import lost the archive's lock (${IMPORT_LOCK_KEY} in ${store.description}) to ${lost === 'gone' ? 'no one (it was removed)' : JSON.stringify(lost)}: it stopped where it was; run it again once no other import is running`);
  };
  let touching: Promise<void> | undefined;
  const touch = setInterval(() => {
    touching ??= (async () => {
      // Written only over the version read, and only while it is still ours. A refused write
      // (a retry of our own that had landed, a race) is judged by what the lock says after it.
      for (let attempt = 0; attempt < 2; attempt++) {
        const held = await holderOf();
        if (held?.holder?.id !== me.id) {
          lost = held?.holder ?? 'gone';
          log.warn({ lock: IMPORT_LOCK_KEY, holder: held?.holder }, 'this import lost the archive\'s import lock (another import took it over, its touches having failed for five minutes): it stops at its next step');
          clearInterval(touch);
          return;
        }
        if (await store.putIfMatch(IMPORT_LOCK_KEY, body(), held.etag)) return;
      }
    })()
      .catch((err: unknown) => log.warn({ lock: IMPORT_LOCK_KEY, err: err instanceof Error ? err.message : String(err) }, 'could not touch the archive\'s import lock; trying again in a minute (untouched for five minutes, another import may take it over)'))
      .finally(() => (touching = undefined));
  }, locks.touchMs ?? TOUCH_MS);
  touch.unref();
  try {
    return await run(stillHeld);
  } finally {
    clearInterval(touch);
    await touching;
    holding.delete(giveBack);
    await giveBack();
  }
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
  holding.add(giveBack);
  const touch = setInterval(() => void fs.utimes(lock, new Date(), new Date()).catch(() => undefined), TOUCH_MS);
  touch.unref();
  try {
    return await run();
  } finally {
    clearInterval(touch);
    holding.delete(giveBack);
    await giveBack();
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
