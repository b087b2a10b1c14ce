// The embedded ledger's acceptances, committed on a thread of their own. With
// synchronous=FULL a commit waits for the disk; on the event loop that wait stalled every
// request in the process. Here it does not: acceptances that arrive while one commit is on its
// way to the disk form the next batch (group commit), so a flush costs one fsync per batch.
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { UnavailableError } from '../errors.js';
import { CONNECTION_PRAGMAS } from './database.js';

/** One acceptance: the report's ledger row, and the queue message sent if the row is new. */
export interface AcceptRow {
  source: string;
  /** The posting key's name, '' for none. */
  partner: string;
  post_id: number;
  pkey: string;
  created_at_ms: number;
  /** The IngestRecord as JSON: the row's record (its message reads it from there). */
  body: string;
}

export interface CommitThreadOptions {
  file: string;
  busyTimeoutMs: number;
  /** INSERT … ON CONFLICT DO NOTHING into reports: (source, partner, post_id, pkey, created_at_ms, record, accepted_at_ms, enqueued_at_ms). */
  insertSql: string;
  /** The pkey of the report (source, partner, post_id), when the insert found one. */
  existingSql: string;
  /** INSERT into queue of an accepted report's message: (pkey, sent_at_ms, visible_at_ms); its body is the row's record. */
  sendSql: string;
  now?: () => number;
}

// Plain JavaScript, evaluated in the thread: the same code runs under the compiled service and
// under the test runner, which cannot hand TypeScript to a worker thread.
const THREAD = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file, { timeout: workerData.busyTimeoutMs });
for (const pragma of workerData.pragmas) db.pragma(pragma);
const insert = db.prepare(workerData.insertSql);
const send = db.prepare(workerData.sendSql);
const existing = db.prepare(workerData.existingSql).pluck();
// Per row: true (new), the pkey of the report it repeats, or null (its pkey is another report's).
const commit = db.transaction((rows, now) =>
  rows.map((r) => {
    if (insert.run(r.source, r.partner, r.post_id, r.pkey, r.created_at_ms, r.body, now, now).changes === 1) {
      send.run(r.pkey, now, now);
      return true;
    }
    return existing.get(r.source, r.partner, r.post_id) ?? null;
  }),
);
parentPort.on('message', ({ id, flat, now }) => {
  try {
    const rows = [];
    for (let i = 0; i < flat.length; i += 6) rows.push({ source: flat[i], partner: flat[i + 1], post_id: flat[i + 2], pkey: flat[i + 3], created_at_ms: flat[i + 4], body: flat[i + 5] });
    parentPort.postMessage({ id, created: commit.immediate(rows, now) });
  } catch (err) {
    parentPort.postMessage({ id, error: { code: err && err.code, message: String(err && err.message) } });
  }
});
`;

const DRIVER = createRequire(import.meta.url).resolve('better-sqlite3');

/**
 * After a slow commit (a busy disk: a few hundred ms is common while large files are written),
 * the next one waits a little for more acceptances before it starts: otherwise the first post
 * that arrives after a big batch is answered commits alone, and every other waits out a whole
 * commit behind it. A tenth of the last commit's time, at most 20 ms; none after a fast one.
 */
const GATHER_AFTER_MS = 10;
const GATHER_MAX_MS = 20;

/** What a commit made of a row: true (new), the pkey of the report it repeats, or null (its pkey is another report's). */
export type Committed = true | string | null;

interface Waiting {
  row: AcceptRow;
  resolve: (outcome: Committed) => void;
  reject: (err: unknown) => void;
}

type Reply = { id: number; created: Committed[] } | { id: number; error: { code?: string; message: string } };

export class CommitThread {
  private worker: Worker | undefined;
  private queued: Waiting[] = [];
  private inFlight: { id: number; batch: Waiting[]; startedAt: number } | undefined;
  private nextId = 1;
  private closed = false;
  private lastCommitMs = 0;
  private gathering: NodeJS.Timeout | undefined;

  constructor(private readonly options: CommitThreadOptions) {}

  /** Resolves after the row (and its message, if new) are committed. */
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
    const batch = this.queued;
    this.queued = [];
    const id = this.nextId++;
    this.inFlight = { id, batch, startedAt: performance.now() };
    const worker = this.thread();
    // Held only while a commit is under way: an idle thread never keeps the process alive.
    worker.ref();
    // The rows as one flat array of their fields: cloned to the thread faster than objects.
    const flat: (string | number)[] = [];
    for (const { row } of batch) flat.push(row.source, row.partner, row.post_id, row.pkey, row.created_at_ms, row.body);
    worker.postMessage({ id, flat, now: (this.options.now ?? Date.now)() });
  }

  private thread(): Worker {
    if (this.worker) return this.worker;
    const { file, busyTimeoutMs, insertSql, sendSql, existingSql } = this.options;
    const worker = new Worker(THREAD, { eval: true, workerData: { driver: DRIVER, file, busyTimeoutMs, insertSql, sendSql, existingSql, pragmas: CONNECTION_PRAGMAS } });
    worker.on('message', (reply: Reply) => this.settle(reply));
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

  private settle(reply: Reply): void {
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
      flight.batch.forEach((w, i) => w.resolve(reply.created[i] as Committed));
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
