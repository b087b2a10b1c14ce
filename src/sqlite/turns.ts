// Bulk writes to a SQLite database in turns: transactions sized to hold the one write lock
// briefly, the lock free between them, so acceptances (which wait for it) are not held off. On
// the event loop (the queue, the ledger's marks) and on the commit thread (held acceptances).
import type Database from 'better-sqlite3';
import { pause } from '../shared/pause.js';

/**
 * Rows per write transaction of a batch job (a flush's reports marked archived, its messages
 * deleted). The database has one write lock, and acceptances wait for it: behind a whole
 * flush in one transaction (5,000 rows: 40–90 ms here, far more on a slow disk or under a
 * profiler) every post in flight waited, and past the acceptance busy timeout was refused.
 */
const ROWS_PER_TURN = 250;
/** The lock left free between turns: a waiting acceptance retries after 1, 2, 5… ms. */
const TURN_GAP_MS = 2;

/** Writes `items` a few hundred per transaction (`write` runs one), the write lock free between them. */
export async function inTurns<T>(items: readonly T[], write: (chunk: readonly T[]) => void): Promise<void> {
  for (let i = 0; i < items.length; i += ROWS_PER_TURN) {
    if (i > 0) await pause(TURN_GAP_MS);
    write(items.slice(i, i + ROWS_PER_TURN));
  }
}

/**
 * How long a bulk job's turn waits out another process's write lock (a flush, a purge), in all,
 * before it fails: a bulk job has no client waiting on it.
 */
const BULK_BUSY_PATIENCE_MS = 10 * 60_000;
/** Between a bulk job's tries of a turn while another process holds the lock. */
const BUSY_PAUSE_MS = 100;

/**
 * Runs a bulk job's turn (`write`, one transaction), waiting out another process's long write (a
 * flush, a purge) that holds the lock past the busy timeout, as a bulk job has no client waiting
 * on it. Gives up after BULK_BUSY_PATIENCE_MS. `busy`: whether an error is the lock being held.
 */
export async function patiently<T>(write: () => T, busy: (err: unknown) => boolean): Promise<T> {
  for (const started = Date.now(); ; ) {
    try {
      return write();
    } catch (err) {
      if (!busy(err) || Date.now() - started >= BULK_BUSY_PATIENCE_MS) throw err;
      await pause(BUSY_PAUSE_MS);
    }
  }
}

/**
 * The lock left free between a bulk job's turns while no other connection writes: enough for an
 * acceptance, which tries the lock every millisecond (commitWorker.ts). Each millisecond more is
 * the bulk job idle: with 10 ms after turns of 40 ms, marks took 16 % longer.
 */
export const ALONE_GAP_MS = 3;
/** How long after another connection's last commit a bulk job still leaves long gaps. */
const SHARED_FOR_MS = 1_000;

/**
 * Writes `items` in transactions (`write` runs one) sized to hold the write lock about `lockMs`
 * each, the lock free between them: a bulk job's rows cost far less in large transactions (a
 * random insert into an index rewrites its page once per transaction, not once per row), while
 * the acceptances of a running service wait for the lock at most about that long.
 * `othersWrote`: whether another connection committed since the last call (PRAGMA data_version).
 */
export async function inTimedTurns<T>(
  items: readonly T[],
  write: (chunk: readonly T[]) => void | Promise<void>,
  options: { lockMs?: number; othersWrote?: () => boolean; smallest?: number; learned?: TurnSize } = {},
): Promise<void> {
  // `smallest`: items in the first and in any turn at least (rows by default; fewer for items of megabytes).
  const { lockMs = 40, othersWrote = () => true, smallest = ROWS_PER_TURN, learned } = options;
  let size = Math.max(smallest, learned?.size ?? smallest);
  let sharedUntil = 0;
  for (let i = 0; i < items.length; ) {
    const chunk = items.slice(i, i + size);
    const started = performance.now();
    // A turn that waited for the lock (a busy database) counts that wait: the next one is smaller.
    await write(chunk);
    const took = Math.max(1, performance.now() - started);
    i += chunk.length;
    // Grows at most twofold a turn, so one quick turn on an idle disk cannot make the next one long.
    size = Math.max(smallest, Math.min(size * 2, Math.round((chunk.length * lockMs) / took)));
    if (learned) learned.size = size;
    if (i >= items.length) break;
    // While others write, the lock is left free as long as it was held: a worker's flush waiting
    // in SQLite's busy handler (it sleeps up to 100 ms between tries) finds it free, where it
    // missed gaps of 2 ms. Alone, a short gap: an acceptance polls for the lock every
    // millisecond (commitWorker.ts) and takes it, and its commit brings the long gaps back.
    if (othersWrote()) sharedUntil = performance.now() + SHARED_FOR_MS;
    await pause(performance.now() < sharedUntil ? Math.max(TURN_GAP_MS, took) : ALONE_GAP_MS);
  }
}

/**
 * The turn size one call of inTimedTurns learned, for the next call of the same job (an import's
 * held acceptances, a batch a call): each then starts at the size that held the lock about
 * `lockMs`, where starting each batch at the smallest took 200 turns for 300,000 rows, not 120,
 * and as many gaps between them.
 */
export interface TurnSize {
  size: number;
}

/** A test of whether another connection to `db`'s file committed since it was last asked. */
export function commitsOfOthers(db: Pick<Database.Database, 'pragma'>): () => boolean {
  const version = () => db.pragma('data_version', { simple: true }) as number;
  let seen = version();
  return () => {
    const now = version();
    const changed = now !== seen;
    seen = now;
    return changed;
  };
}
