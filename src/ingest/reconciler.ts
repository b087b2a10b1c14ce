// Reconciliation (invariant 3 of docs/architecture.md): an accepted report still pending after
// a few flush intervals, whose message is gone (lost, or a queue outage during its acceptance), is
// queued again, so a crash or an outage delays a report but never drops it.
import type { PendingLedger } from '../ledger/ledger.js';
import type { Logger } from '../shared/log.js';
import { RECONCILE_TURNS_PREFIX } from '../store/layout.js';
import type { ObjectStore } from '../store/objectStore.js';

export interface ReconcileResult {
  requeued: number;
}

/** Where the timers of the fleet's processes take their turns: a key per period, as the scheduler's ticks. */
/** Turn keys removed by each turn's winner: the last few periods before the one just past. */
const TURNS_SWEPT = 10;

export class Reconciler {
  private running: Promise<ReconcileResult | undefined> | undefined;

  constructor(
    private readonly ledger: Pick<PendingLedger, 'requeueStale'>,
    private readonly log: Logger,
    private readonly turns: Pick<ObjectStore, 'putIfAbsent' | 'delete'>,
  ) {}

  /** Re-enqueues pending reports last enqueued more than `olderThanMs` ago (0: all of them). */
  async run(olderThanMs: number): Promise<ReconcileResult> {
    const requeued = await this.ledger.requeueStale(Date.now() - olderThanMs, { backOff: olderThanMs > 0 });
    if (requeued > 0) this.log.info({ requeued }, 'reconciled pending reports');
    return { requeued };
  }

  /**
   * A timer's run (every worker's, `all`'s): none while this process's last one goes on, and
   * none when another process took this period's turn. Each run lists every pending report, so
   * without turns a fleet of workers, each restarted after a crash, reconciled once per worker
   * and once per restart: under a backlog that was most of the store's requests. Undefined when
   * it did not run.
   */
  async runInTurn(olderThanMs: number, periodMs: number): Promise<ReconcileResult | undefined> {
    if (this.running) return undefined;
    this.running = this.takeTurn(olderThanMs, periodMs);
    try {
      return await this.running;
    } finally {
      this.running = undefined;
    }
  }

  private async takeTurn(olderThanMs: number, periodMs: number): Promise<ReconcileResult | undefined> {
    const period = Math.floor(Date.now() / periodMs);
    const turn = (n: number) => `${RECONCILE_TURNS_PREFIX}${new Date(n * periodMs).toISOString().replace(/[^0-9TZ]/g, '')}.json`;
    if (!(await this.turns.putIfAbsent(turn(period), JSON.stringify({ pid: process.pid, at: new Date().toISOString() })))) return undefined;
    try {
      return await this.run(olderThanMs);
    } finally {
      await this.turns.delete(Array.from({ length: TURNS_SWEPT }, (_, i) => turn(period - 2 - i)));
    }
  }
}
