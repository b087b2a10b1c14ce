// The embedded ledger's acceptances, committed on a thread of their own. With
// synchronous=FULL a commit waits for the disk; on the event loop that wait stalled every
// request in the process. Here it does not: acceptances that arrive while one commit is on its
// way to the disk form the next batch (group commit), so a flush costs one fsync per batch.
import { statSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import { UnavailableError } from '../shared/errors.js';
import { flatten, type AcceptRow, type CommitReply, type CommitRequest, type CommitWorkerData, type Committed } from './commitMessages.js';
import { CONNECTION_PRAGMAS } from '../sqlite/database.js';

export interface CommitThreadOptions extends Omit<CommitWorkerData, 'pragmas'> {
  now?: () => number;
}

/**
 * The thread's script, commitWorker.ts compiled: worker threads run JavaScript only. Beside
 * this module in the build; when this module runs as TypeScript (under the test runner), the
 * build's copy, refused if older than its sources (it would run code that is no longer there).
 */
function workerScript(): URL {
  if (!import.meta.url.endsWith('.ts')) return new URL('./commitWorker.js', import.meta.url);
  for (const name of ['commitWorker', 'commitMessages']) {
    const built = statSync(new URL(`../../dist/src/ledger/${name}.js`, import.meta.url), { throwIfNoEntry: false });
    if (!built || built.mtimeMs < statSync(new URL(`./${name}.ts`, import.meta.url)).mtimeMs) {
      throw new Error(`the commit thread runs the build's ${name}.js, ${built ? 'older than its source' : 'not built'}: npm run build`);
    }
  }
  return new URL('../../dist/src/ledger/commitWorker.js', import.meta.url);
}

/**
 * After a slow commit (a busy disk: a few hundred ms is common while large files are written),
 * the next one waits a little for more acceptances before it starts: otherwise the first post
 * that arrives after a big batch is answered commits alone, and every other waits out a whole
 * commit behind it. A tenth of the last commit's time, at most 20 ms; none after a fast one.
 */
const GATHER_AFTER_MS = 10;
const GATHER_MAX_MS = 20;

interface Waiting {
  row: AcceptRow;
  resolve: (outcome: Committed) => void;
  reject: (err: unknown) => void;
}

export class CommitThread {
  private worker: Worker | undefined;
  private queued: Waiting[] = [];
  private inFlight: { id: number; batch: Waiting[]; startedAt: number } | undefined;
  private nextId = 1;
  private closed = false;
  private lastCommitMs = 0;
  private gathering: NodeJS.Timeout | undefined;

  constructor(private readonly options: CommitThreadOptions) {}

  /** Resolves after the row (and its message, if new) are committed, with what the commit made of it. */
  submit(row: AcceptRow): Promise<Committed> {
    if (this.closed) return Promise.reject(new UnavailableError('storage', 'ledger closed'));
    return new Promise<Committed>((resolve, reject) => {
      this.queued.push({ row, resolve, reject });
      this.pump();
    });
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.gathering);
    this.gathering = undefined;
    const worker = this.worker;
    this.worker = undefined;
    this.fail(new UnavailableError('storage', 'ledger closed'));
    void worker?.terminate();
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
    const worker = new Worker(workerScript(), { workerData });
    worker.on('message', (reply: CommitReply) => this.settle(reply));
    // A thread that dies (it cannot open the file, or crashed) fails what it held; the next
    // acceptance starts another.
    const lost = (err: unknown) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      this.fail(new UnavailableError('storage', 'ledger unavailable (commit thread stopped)', { cause: err }));
    };
    worker.on('error', lost);
    worker.on('exit', (code) => lost(new Error(`exit ${code}`)));
    this.worker = worker;
    return worker;
  }

  private settle(reply: CommitReply): void {
    const flight = this.inFlight;
    if (!flight || flight.id !== reply.id) return;
    this.inFlight = undefined;
    this.lastCommitMs = performance.now() - flight.startedAt;
    this.worker?.unref();
    if ('error' in reply) {
      // As guardSync on the event loop: SQLite's own failures (busy, full, read-only, corrupt,
      // I/O) are the ledger being unavailable; anything else is a fault in this code.
      const { code, message } = reply.error;
      const err = typeof code === 'string' && /^(SQLITE_|E[A-Z]+$)/.test(code) ? new UnavailableError('storage', `ledger unavailable (${code})`) : new Error(message);
      for (const w of flight.batch) w.reject(err);
    } else {
      flight.batch.forEach((w, i) => w.resolve(reply.created[i]!));
    }
    this.pump();
  }

  private fail(err: unknown): void {
    const waiting = [...(this.inFlight?.batch ?? []), ...this.queued];
    this.inFlight = undefined;
    this.queued = [];
    for (const w of waiting) w.reject(err);
  }
}
