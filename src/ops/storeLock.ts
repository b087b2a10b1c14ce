// A lock on the archive for a job that must run alone (an import, a rewrite of parts: a compaction
// or a reprocess, a period's release), from any host: an object in the store, created if absent and naming its holder (host,
// pid, boot and pid namespace, an id of its own), touched every minute over the version read. One
// untouched for five minutes (its process gone, on this host or in another container), or whose
// holder is seen to be gone (the same boot and pid namespace, its pid not running), is taken over;
// a job whose lock was taken over stops at its next step (`stillHeld`); a process stopped by a
// signal stops its jobs at their next step and gives their locks back once they have stopped, so
// no write of theirs lands after another run took the lock (giveBackLocks).
import { randomUUID } from 'node:crypto';
import { readFileSync, readlinkSync } from 'node:fs';
import os from 'node:os';
import type { Logger } from '../shared/log.js';
import type { ObjectStore } from '../store/objectStore.js';

/** Untouched this long, a lock's holder is gone. */
export const STALE_MS = 5 * 60_000;
export const TOUCH_MS = 60_000;
/** Tries at giving a lock back at a job's end (each a read and a delete, retried by the store's client too). */
const GIVE_BACK_ATTEMPTS = 3;

/** A lock in the store: where, what job it is for (in messages), and the errors a job sees. */
export interface StoreLock {
  store: Pick<ObjectStore, 'description' | 'get' | 'putIfAbsent' | 'putIfMatch' | 'delete'>;
  key: string;
  what: string;
  log: Pick<Logger, 'warn'>;
  errors: { running: (message: string) => Error; lost: (message: string) => Error };
  /** How often the lock is touched (a minute; shorter in tests). */
  touchMs?: number;
}

/** The ids of the store locks this process's jobs hold now. */
const heldHere = new Set<string>();

/** A lock this process holds: how to stop the job that holds it, and when that job has given it back. */
interface HeldLock {
  /** The job stops at its next step (its `stillHeld` throws). */
  stop: () => void;
  /** Settles once the job has ended and given the lock back (or failed to take it). */
  released: Promise<void>;
}

/** The locks this process's jobs hold now: for a stop by a signal (the command line's, the scheduler's). */
const holding = new Set<HeldLock>();

/** How long a signal waits for jobs to reach their next step before the process leaves their locks to go stale. */
export const GIVE_BACK_WAIT_MS = 5_000;

/**
 * Counts a lock this process now holds (any kind: the data directory's file too), with how a
 * signal stops the job holding it; returns what to call once the job has given it back.
 */
export function holdLock(stop: () => void): () => void {
  let released!: () => void;
  const held: HeldLock = { stop, released: new Promise<void>((resolve) => (released = resolve)) };
  holding.add(held);
  return () => {
    holding.delete(held);
    released();
  };
}

/**
 * For a process about to exit on a signal (Ctrl-C, a deploy): stops each job holding a lock at its
 * next step and waits, up to `waitMs`, for them to give their locks back, so the next run need not
 * wait five minutes for them to go stale. Not given back at once: a write the job had under way
 * could land after the next run took the lock (a release's manifest over files its successor
 * removed). A job still in a step when the wait ends leaves its lock to go stale. The job is left
 * where it stopped, as a crash would leave it.
 */
export async function giveBackLocks(waitMs = GIVE_BACK_WAIT_MS): Promise<void> {
  const held = [...holding];
  for (const lock of held) lock.stop();
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise<void>((resolve) => (timer = setTimeout(resolve, waitMs)));
  await Promise.race([Promise.all(held.map((lock) => lock.released)), waited]);
  clearTimeout(timer);
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
export function goneFromHere(holder: { host?: unknown; pid?: unknown; place?: unknown; id?: unknown }): boolean {
  if (PLACE === undefined || holder.place !== PLACE || holder.host !== os.hostname() || typeof holder.pid !== 'number') return false;
  // This very process: the holder is another of its jobs, or an earlier process that had its pid.
  if (holder.pid === process.pid) return typeof holder.id !== 'string' || !heldHere.has(holder.id);
  try {
    process.kill(holder.pid, 0);
    return false;
  } catch (err) {
    // EPERM: there, another user's.
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/** What a lock says of its holder; `touched` is the holder's clock, as the scheduler's leases are. */
interface Holder {
  host: string;
  pid: number;
  /** Boot and pid namespace (goneFromHere), when known. */
  place?: string;
  id: string;
  /** The job that holds it: one lock may be several jobs' (a compaction's and a reprocess's). */
  job?: string;
  since: string;
  touched: string;
}

/**
 * Runs `run` holding the lock object `key` in the store (see the file's head). `run` is given
 * `stillHeld`, which throws `errors.lost` once the lock is known to be another's: called before
 * each step that writes, it stops a job that two would otherwise run at once. And
 * `confirmHeld`, which touches the lock at once and throws `errors.lost` if it is another's: for
 * a step that must not follow a takeover the minute's touch has not seen yet (a job that stalled
 * past five minutes learns it only at its next touch), the lock then stays this job's for five
 * minutes.
 */
export async function withStoreLock<T>(lock: StoreLock, run: (stillHeld: () => void, confirmHeld: () => Promise<void>) => Promise<T>): Promise<T> {
  const { store, log, key, what } = lock;
  const since = new Date().toISOString();
  const me = { host: os.hostname(), pid: process.pid, ...(PLACE !== undefined && { place: PLACE }), id: randomUUID(), job: what, since };
  const body = (): string => JSON.stringify({ ...me, touched: new Date().toISOString() } satisfies Holder);
  const holderOf = async (): Promise<{ holder: Holder | undefined; etag: string } | undefined> => {
    const got = await store.get(key);
    if (!got) return undefined;
    try {
      return { holder: JSON.parse(got.body.toString('utf8')) as Holder, etag: got.etag };
    } catch {
      return { holder: undefined, etag: got.etag }; // not ours to read: taken for stale below
    }
  };
  const acquire = async (): Promise<void> => {
    for (let attempt = 0; attempt < 2; attempt++) {
      if (await store.putIfAbsent(key, body())) return;
      const held = await holderOf();
      if (!held) continue; // released meanwhile
      // Our own create, retried by the SDK after its answer was lost, is refused as a repeat: still ours.
      if (held.holder?.id === me.id) return;
      const touched = Date.parse(held.holder?.touched ?? '');
      if (Date.now() - touched < STALE_MS && !(held.holder && goneFromHere(held.holder))) {
        throw lock.errors.running(`another ${typeof held.holder?.job === 'string' ? held.holder.job : what} is running on this archive (${JSON.stringify(held.holder)}, ${key} in ${store.description}): wait for it to end, then run this one`);
      }
      // Taken over only as it was judged stale: a lock another process took over since stays.
      if (await store.putIfMatch(key, body(), held.etag)) return;
    }
    // A takeover of ours whose answer was lost, refused when the SDK asked again: still ours.
    if ((await holderOf())?.holder?.id === me.id) return;
    throw lock.errors.running(`another ${what} took this archive's lock (${key} in ${store.description}) at the same moment: run this one once it ends`);
  };
  let lost: Holder | 'gone' | 'given back' | undefined;
  // Counted before it is taken: a signal while it is being taken gives it back before any of the job's work.
  const letGo = holdLock(() => (lost ??= 'given back'));
  // Known as this process's before it is taken: another job here never takes it for a dead one's.
  heldHere.add(me.id);
  try {
    await acquire();
  } catch (err) {
    heldHere.delete(me.id);
    letGo();
    throw err;
  }
  const giveBack = async () => {
    let failure: unknown;
    for (let attempt = 1; attempt <= GIVE_BACK_ATTEMPTS; attempt++) {
      try {
        // Only our own: a lock taken over meanwhile is its new holder's.
        if ((await holderOf())?.holder?.id === me.id) await store.delete([key]);
        return;
      } catch (err) {
        failure = err;
      }
    }
    // The job's work stands; only another process's next run waits, for the lock to go stale.
    lock.log.warn({ lock: key, err: String(failure) }, `the ${what}'s lock could not be given back: another process's ${what} waits until it is stale (${STALE_MS / 60_000} minutes)`);
  };
  const stillHeld = () => {
    if (lost === 'given back') throw lock.errors.lost(`this ${what} gave the archive's lock (${key} in ${store.description}) back as its process stops: it stopped where it was; run it again`);
    if (lost) throw lock.errors.lost(`this ${what} lost the archive's lock (${key} in ${store.description}) to ${lost === 'gone' ? 'no one (it was removed)' : JSON.stringify(lost)}: it stopped where it was; run it again once no other ${what} is running`);
  };
  let touching: Promise<void> | undefined;
  /** Touches the lock once, if it is still ours; else notes it lost. */
  const touchOnce = async (): Promise<void> => {
    // Written only over the version read, and only while it is still ours. A refused write
    // (a retry of our own that had landed, a race) is judged by what the lock says after it.
    for (let attempt = 0; attempt < 2; attempt++) {
      const held = await holderOf();
      if (held?.holder?.id !== me.id) {
        lost ??= held?.holder ?? 'gone';
        log.warn({ lock: key, holder: held?.holder }, `this ${what} lost its lock on the archive (another took it over, its touches having failed for five minutes): it stops at its next step`);
        clearInterval(touch);
        return;
      }
      if (await store.putIfMatch(key, body(), held.etag)) return;
    }
  };
  const touch = setInterval(() => {
    touching ??= touchOnce()
      .catch((err: unknown) => log.warn({ lock: key, err: err instanceof Error ? err.message : String(err) }, `could not touch the archive's ${what} lock; trying again in a minute (untouched for five minutes, another ${what} may take it over)`))
      .finally(() => (touching = undefined));
  }, lock.touchMs ?? TOUCH_MS);
  touch.unref();
  const confirmHeld = async (): Promise<void> => {
    stillHeld();
    await touching;
    // A failure to reach the store fails the step: it is not known to be this job's to take.
    await touchOnce();
    stillHeld();
  };
  try {
    stillHeld();
    return await run(stillHeld, confirmHeld);
  } finally {
    clearInterval(touch);
    await touching;
    await giveBack();
    heldHere.delete(me.id);
    letGo();
  }
}
