// One consumer of the event log (the SNS relay, one webhook subscription on AWS), stepped by a
// worker: read its durable cursor, take the next batch of events it wants (one kind, in order),
// claim it with a lease, send it, and record the outcome (done, or retry later with backoff, or
// set aside once it has failed for too long). Several workers may step the same consumer: the
// claim is a conditional append (DurableCursor), so one sends at a time, and one that died
// mid-batch is taken over when its lease runs out (at least once, under the same batch id).
import { createHash } from 'node:crypto';
import { backoffMs, type CursorState, type DurableCursor } from './cursor.js';
import type { EventFeed, EventKind, StoredEvent } from './events.js';

export interface BatchOutcome {
  ok: boolean;
  error?: string;
}

export interface Batch {
  /** Stable for the batch's range of the log: the same on every attempt and in every worker. */
  id: string;
  kind: EventKind;
  events: StoredEvent[];
  /** When the first attempt was made (the CloudEvent's time). */
  firstAttemptMs: number;
  attempts: number;
}

export interface ConsumerSpec {
  cursor: DurableCursor;
  /** Which events it wants (the others are passed over). */
  wants(e: StoredEvent): boolean;
  send(batch: Batch): Promise<BatchOutcome>;
  /** How long sending these events may take, when that depends on them (absent: the options' leaseMs). */
  leaseFor?(events: readonly StoredEvent[]): number;
  /**
   * Called before a batch that has failed `retryForMs` after its first event was recorded is
   * passed over (absent: retried for ever). From the recording, not the first attempt: behind a
   * long outage each batch would otherwise wait its full period behind the one before it, and
   * the log's retention would drop the batches behind them unsent.
   */
  setAside?(batch: Batch, error: string): Promise<void>;
  retryForMs?: number;
  /**
   * Whether the consumer still exists (a webhook subscription may be removed while a worker steps
   * it): asked after each claim, right before sending, so nothing recorded after a removal is
   * sent. A step under way when the removal came may have written a state after the removal
   * dropped them all: when gone, `gone` clears up after it.
   */
  exists?(): Promise<boolean>;
  gone?(): Promise<void>;
}

export interface StepOptions {
  holder: string;
  leaseMs: number;
  maxBatch: number;
  retryBaseMs: number;
  retryMaxMs: number;
  now?: () => number;
}

export type StepResult = 'idle' | 'waiting' | 'sent' | 'failed' | 'skipped' | 'lost' | 'removed';

const SCAN = 2000;

/**
 * While the state last read says wait (a retry's back-off, another worker's lease), the cursor is
 * read again this often at most, not at every step: on S3 a read is a LIST and a GET, and a dead
 * endpoint backs off for up to an hour. Often enough to see a redrive or a lease given back.
 */
const WAIT_RECHECK_MS = 10_000;

/** Whether `state` says to wait at `t`. */
const waits = (state: CursorState, t: number): boolean => (state.lease !== undefined && state.lease.untilMs > t) || (state.pending !== undefined && state.pending.nextAttemptMs > t);

export class LogConsumer {
  /** The last state this process saw, to stay idle without a store request while nothing is new. */
  private seen: CursorState | undefined;
  /** When the cursor was last read. */
  private readAtMs = -Infinity;
  /** Found removed: it never comes back (a worker's list may hold it a few seconds more). */
  private removed = false;

  constructor(
    private readonly feed: EventFeed,
    readonly spec: ConsumerSpec,
    private readonly options: StepOptions,
  ) {}

  async step(): Promise<StepResult> {
    const now = this.options.now ?? Date.now;
    if (this.removed) return 'removed';
    if (this.seen && !this.seen.pending && !this.seen.lease && (await this.feed.since(this.seen.upto, 1)).length === 0) return 'idle';
    if (this.seen && waits(this.seen, now()) && now() - this.readAtMs < WAIT_RECHECK_MS) return 'waiting';
    const { n, state } = await this.spec.cursor.current();
    this.seen = state;
    const t = now();
    this.readAtMs = t;
    if (waits(state, t)) return 'waiting';

    const scanned = await this.feed.since(state.upto, SCAN);
    let to: number;
    let events: StoredEvent[];
    if (state.pending) {
      const limit = state.pending.to;
      to = limit;
      events = scanned.filter((e) => e.seq <= limit && this.spec.wants(e));
    } else {
      if (scanned.length === 0) return 'idle';
      // The next run of one kind, up to maxBatch wanted events; unwanted events ride along.
      events = [];
      to = state.upto;
      let kind: EventKind | undefined;
      for (const e of scanned) {
        if (this.spec.wants(e)) {
          if ((kind !== undefined && e.kind !== kind) || events.length >= this.options.maxBatch) break;
          kind = e.kind;
          events.push(e);
        }
        to = e.seq;
      }
      if (events.length === 0) {
        // Nothing wanted in what was scanned: move past it (no send, no lease).
        const moved = await this.spec.cursor.advance(n, { upto: to });
        if (moved) this.seen = { upto: to };
        return moved ? 'skipped' : 'lost';
      }
    }
    if (events.length === 0) {
      // The pending range's events are no longer kept (pruned): nothing left to send.
      return (await this.spec.cursor.advance(n, { upto: to })) ? 'skipped' : 'lost';
    }
    const pending = state.pending ?? { to, firstAttemptMs: t, attempts: 0, nextAttemptMs: t };
    const leaseMs = this.spec.leaseFor?.(events) ?? this.options.leaseMs;
    const claim: CursorState = { upto: state.upto, pending, lease: { holder: this.options.holder, untilMs: t + leaseMs } };
    if (!(await this.spec.cursor.advance(n, claim))) return 'lost';
    if (this.spec.exists && !(await this.spec.exists())) {
      this.removed = true;
      await this.spec.gone?.();
      return 'removed';
    }

    const batch: Batch = {
      id: batchId(this.spec.cursor.name, state.upto, to),
      kind: events[0]!.kind,
      events,
      firstAttemptMs: pending.firstAttemptMs,
      attempts: pending.attempts,
    };
    let outcome: BatchOutcome;
    try {
      outcome = await this.spec.send(batch);
    } catch (err) {
      outcome = { ok: false, error: err instanceof Error ? err.message : String(err) };
    }
    const after = now();
    const sinceMs = Math.min(pending.firstAttemptMs, events[0]!.at_ms);
    let next: CursorState;
    if (outcome.ok) {
      next = { upto: to };
    } else if (this.spec.retryForMs !== undefined && after - sinceMs >= this.spec.retryForMs) {
      await this.spec.setAside?.({ ...batch, attempts: pending.attempts + 1 }, outcome.error ?? 'failed');
      next = { upto: to };
    } else {
      const delay = backoffMs(pending.attempts, this.options.retryBaseMs, this.options.retryMaxMs);
      const at = this.spec.retryForMs === undefined ? after + delay : Math.min(after + delay, sinceMs + this.spec.retryForMs);
      next = { upto: state.upto, pending: { ...pending, attempts: pending.attempts + 1, nextAttemptMs: at, lastError: (outcome.error ?? 'failed').slice(0, 500) } };
    }
    // Refused when the lease ran out and another worker took the batch over: its outcome stands.
    if (!(await this.spec.cursor.advance(n + 1, next))) return 'lost';
    this.seen = next;
    return outcome.ok ? 'sent' : 'failed';
  }
}

function batchId(consumer: string, upto: number, to: number): string {
  return createHash('sha256').update(`${consumer}\n${upto}\n${to}`).digest('hex').slice(0, 32);
}
