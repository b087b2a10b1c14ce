// Whether this instance can accept reports now: the object store and the queue answer,
// the boundaries are loaded, and a write goes through (a full disk or a read-only store
// answers pings but refuses every report). Each check has the acceptance deadline, so a
// stalled dependency makes /ready answer 503 promptly instead of hanging with it. Each check
// costs calls to the store and the queue (on AWS, S3 and SQS requests), so probes arriving while
// one runs share it and its answer stands for a second: a flood of probes makes at most one
// check a second. The write probe costs a durable write: its result stands a few seconds.
import { hostname } from 'node:os';
import { withDeadline } from '../shared/deadline.js';
import type { BoundaryRepository } from '../boundaries/repository.js';
import type { Logger } from '../shared/log.js';
import type { LedgerLifecycle } from '../ledger/ledger.js';
import type { Queue } from '../queue/queue.js';
import type { ObjectStore } from '../store/objectStore.js';

/** Where the write probe writes: under ingest/, which every API instance may write. */
export const WRITE_PROBE_KEY = 'ingest/probe/ready';
/** How long a write probe's result stands. */
export const WRITE_PROBE_TTL_MS = 5_000;
/** How long a whole check's answer stands once it is complete. */
export const READY_TTL_MS = 1_000;

export type CheckResult = { ok: true; detail?: string } | { ok: false; problem: string };

export interface ReadinessReport {
  ready: boolean;
  checks: Record<'storage' | 'queue' | 'boundaries' | 'writes', CheckResult>;
}

export interface ReadinessDeps {
  store: ObjectStore;
  queue: Queue;
  /** Where acceptances are recorded: its write is probed too (on the embedded backend, the SQLite file). */
  ledger: Pick<LedgerLifecycle, 'ping'>;
  boundaries: BoundaryRepository;
  log: Logger;
  deadlineMs: number;
  now?: () => number;
}

export class Readiness {
  private lastWrite: { at: number; result: Promise<CheckResult> } | undefined;
  /** The check under way (doneAt undefined) or the last one. */
  private last: { doneAt: number | undefined; report: Promise<ReadinessReport> } | undefined;
  private readonly now: () => number;

  constructor(private readonly deps: ReadinessDeps) {
    this.now = deps.now ?? Date.now;
  }

  check(): Promise<ReadinessReport> {
    const last = this.last;
    if (last && (last.doneAt === undefined || this.now() - last.doneAt < READY_TTL_MS)) return last.report;
    const entry: { doneAt: number | undefined; report: Promise<ReadinessReport> } = { doneAt: undefined, report: this.run() };
    const done = () => {
      entry.doneAt = this.now();
    };
    entry.report.then(done, done);
    this.last = entry;
    return entry.report;
  }

  private async run(): Promise<ReadinessReport> {
    const { store, queue, boundaries } = this.deps;
    const [storage, queued, loaded, writes] = await Promise.all([
      this.bounded(store.ping(), 'object store unreachable'),
      this.bounded(queue.ping(), 'queue unreachable'),
      this.bounded(boundaries.current().then((b) => b.version), 'boundaries not loaded'),
      this.writeProbe(),
    ]);
    const checks = { storage, queue: queued, boundaries: loaded, writes };
    return { ready: Object.values(checks).every((c) => c.ok), checks };
  }

  private writeProbe(): Promise<CheckResult> {
    const last = this.lastWrite;
    if (last && this.now() - last.at < WRITE_PROBE_TTL_MS) return last.result;
    const body = JSON.stringify({ probe: 'ready', host: hostname(), pid: process.pid, at: new Date(this.now()).toISOString(), pad: ' '.repeat(256) });
    const result = Promise.all([
      this.bounded(this.deps.store.put(WRITE_PROBE_KEY, body), 'writes to the object store fail'),
      this.bounded(this.deps.ledger.ping(), 'writes to the ingest ledger fail'),
    ]).then((results) => results.find((r) => !r.ok) ?? { ok: true as const });
    this.lastWrite = { at: this.now(), result };
    return result;
  }

  private async bounded(work: Promise<unknown>, problem: string): Promise<CheckResult> {
    try {
      const value = await withDeadline(
        work,
        this.deps.deadlineMs,
        () => new Error(`no answer within ${this.deps.deadlineMs} ms`),
        (err) => this.deps.log.debug({ err: String(err), problem }, 'a readiness probe failed after its deadline'),
      );
      return typeof value === 'string' ? { ok: true, detail: value } : { ok: true };
    } catch (err) {
      this.deps.log.warn({ err: String(err), problem }, 'readiness probe failed');
      return { ok: false, problem };
    }
  }
}
