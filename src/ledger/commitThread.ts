// The embedded ledger's acceptances, committed on a thread of their own. With
// synchronous=FULL a commit waits for the disk; on the event loop that wait stalled every
// request in the process. Here it does not: acceptances that arrive while one commit is on its
// way to the disk form the next batch (group commit), so a flush costs one fsync per batch.
// A bulk import's held acceptances are committed there too, in turns between which the
// acceptances commit: the import's process validates and stages while SQLite writes.
import { Worker } from 'node:worker_threads';
import { UnavailableError } from '../shared/errors.js';
import { workerScript } from '../shared/workerScript.js';
import { flatten, type AcceptRow, type CloseRequest, type CommitReply, type CommitRequest, type CommitWorkerData, type Committed, type HeldCommitted } from './commitMessages.js';
import { CONNECTION_PRAGMAS } from '../sqlite/database.js';

export interface CommitThreadOptions extends Omit<CommitWorkerData, 'pragmas'> {
  now?: () => number;
}

/**
 * After a slow commit (a busy disk: a few hundred ms is common while large files are written),
 * the next one waits a little for more acceptances before it starts: otherwise the first post
 * that arrives after a big batch is answered commits alone, and every other waits out a whole
 * commit behind it. A tenth of the last commit's time, at most 20 ms; none after a fast one.
 */
const GATHER_AFTER_MS = 10;
const GATHER_MAX_MS = 20;

/** How long a closing thread has to close its connection (a held turn may be finishing) before it is stopped. */
const CLOSE_WAIT_MS = 2_000;

interface Waiting {
  row: AcceptRow;
  resolve: (outcome: Committed) => void;
  reject: (err: unknown) => void;
}

interface HeldWaiting {
  resolve: (outcomes: HeldCommitted[]) => void;
  reject: (err: unknown) => void;
}

export class CommitThread {
  private worker: Worker | undefined;
  private queued: Waiting[] = [];
  private inFlight: { id: number; batch: Waiting[]; startedAt: number } | undefined;
  /** Held acceptances under way on the thread, by request id. */
  private held = new Map<number, HeldWaiting>();
  private nextId = 1;
  private closed = false;
  private lastCommitMs = 0;
  private gathering: NodeJS.Timeout | undefined;

  constructor(private readonly options: CommitThreadOptions) {}

  /** Resolves after the row (and its message, if new) are committed, with what the commit made of it. */
  submit(row: AcceptRow): Promise<Committed> {
    if (this.closed) return Promise.reject(new UnavailableError('ledger', 'ledger closed'));
    return new Promise<Committed>((resolve, reject) => {
      this.queued.push({ row, resolve, reject });
      this.pump();
    });
  }

  /**
   * Commits a bulk import's held acceptances (heldTurn.ts) in turns, each row's body its record
   * without the received_at the turn adds; what each row came to, in order. SQLite's failures
   * are UnavailableError with SQLite's code in their cause.
   */
  hold(rows: readonly AcceptRow[], now: number, holdUntilMs: number, receivedAt: string): Promise<HeldCommitted[]> {
    if (this.closed) return Promise.reject(new UnavailableError('ledger', 'ledger closed'));
    return new Promise<HeldCommitted[]>((resolve, reject) => {
      let worker: Worker;
      try {
        worker = this.thread();
      } catch (err) {
        reject(err);
        return;
      }
      const id = this.nextId++;
      this.held.set(id, { resolve, reject });
      worker.ref();
      const request: CommitRequest = { id, flat: flatten(rows), now, held: { untilMs: holdUntilMs, receivedAt } };
      worker.postMessage(request);
    });
  }

  /** Fails what waits, then has the thread close its connection and end (CloseRequest), or stops it after CLOSE_WAIT_MS. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.gathering);
    this.gathering = undefined;
    const worker = this.worker;
    this.worker = undefined;
    this.fail(new UnavailableError('ledger', 'ledger closed'));
    if (!worker) return;
    const ended = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    worker.postMessage({ close: true } satisfies CloseRequest);
    const late = setTimeout(() => void worker.terminate(), CLOSE_WAIT_MS);
    try {
      await ended;
    } finally {
      clearTimeout(late);
    }
  }

  private pump(): void {
    if (this.inFlight || this.gathering || this.queued.length === 0) return;
    if (this.lastCommitMs >= GATHER_AFTER_MS) {
      this.gathering = setTimeout(() => {
        this.gathering = undefined;
        this.lastCommitMs = 0;
        this.pump();
      }, Math.min(GATHER_MAX_MS, this.lastCommitMs / 10));
      return;
    }
    let worker: Worker;
    try {
      worker = this.thread();
    } catch (err) {
      this.fail(err);
      return;
    }
    const batch = this.queued;
    this.queued = [];
    const id = this.nextId++;
    this.inFlight = { id, batch, startedAt: performance.now() };
    // Held only while a commit is under way: an idle thread never keeps the process alive.
    worker.ref();
    const request: CommitRequest = { id, flat: flatten(batch.map((w) => w.row)), now: (this.options.now ?? Date.now)() };
    worker.postMessage(request);
  }

  private thread(): Worker {
    if (this.worker) return this.worker;
    const { file, busyTimeoutMs, insertSql, recordSql, existingSql, sendSql } = this.options;
    const workerData: CommitWorkerData = { file, busyTimeoutMs, insertSql, recordSql, existingSql, sendSql, pragmas: [...CONNECTION_PRAGMAS] };
    const worker = new Worker(workerScript('ledger/commitWorker'), { workerData });
    worker.on('message', (reply: CommitReply) => this.settle(reply));
    // A thread that dies (it cannot open the file, or crashed) fails what it held; the next
    // acceptance starts another.
    const lost = (err: unknown) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      this.fail(new UnavailableError('ledger', 'ledger unavailable (commit thread stopped)', { cause: err }));
    };
    worker.on('error', lost);
    worker.on('exit', (code) => lost(new Error(`exit ${code}`)));
    this.worker = worker;
    return worker;
  }

  private settle(reply: CommitReply): void {
    const held = this.held.get(reply.id);
    if (held) {
      this.held.delete(reply.id);
      if ('held' in reply) held.resolve(reply.held);
      else if ('error' in reply) held.reject(errorOf(reply.error));
      this.release();
      return;
    }
    const flight = this.inFlight;
    if (!flight || flight.id !== reply.id) return;
    this.inFlight = undefined;
    this.lastCommitMs = performance.now() - flight.startedAt;
    this.release();
    if ('error' in reply) {
      const err = errorOf(reply.error);
      for (const w of flight.batch) w.reject(err);
    } else if ('created' in reply) {
      flight.batch.forEach((w, i) => w.resolve(reply.created[i]!));
    }
    this.pump();
  }

  /** An idle thread never keeps the process alive: held only while a commit is under way. */
  private release(): void {
    if (!this.inFlight && this.held.size === 0) this.worker?.unref();
  }

  private fail(err: unknown): void {
    const waiting = [...(this.inFlight?.batch ?? []), ...this.queued];
    const held = [...this.held.values()];
    this.inFlight = undefined;
    this.queued = [];
    this.held.clear();
    for (const w of waiting) w.reject(err);
    for (const h of held) h.reject(err);
  }
}

/**
 * As guardSync on the event loop: SQLite's own failures (busy, full, read-only, corrupt, I/O)
 * are the ledger being unavailable, with SQLite's code in the cause; anything else is a fault in
 * this code.
 */
function errorOf({ code, message }: { code?: string; message: string }): Error {
  return typeof code === 'string' && /^(SQLITE_|E[A-Z]+$)/.test(code)
    ? new UnavailableError('ledger', `ledger unavailable (${code})`, { cause: Object.assign(new Error(message), { code }) })
    : new Error(message);
}
