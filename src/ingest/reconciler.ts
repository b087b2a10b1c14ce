// Reconciliation (invariant 3 of docs/architecture.md): an accepted report still pending after
// a few flush intervals, whose message is gone (lost, or a queue outage during its acceptance), is
// queued again, so a crash or an outage delays a report but never drops it.
import type { PendingLedger } from '../ledger/ledger.js';
import type { Logger } from '../shared/log.js';

export interface ReconcileResult {
  requeued: number;
}

export class Reconciler {
  constructor(
    private readonly ledger: Pick<PendingLedger, 'requeueStale'>,
    private readonly log: Logger,
  ) {}

  /** Re-enqueues pending reports last enqueued more than `olderThanMs` ago (0: all of them). */
  async run(olderThanMs: number): Promise<ReconcileResult> {
    const requeued = await this.ledger.requeueStale(Date.now() - olderThanMs);
    if (requeued > 0) this.log.info({ requeued }, 'reconciled pending reports');
    return { requeued };
  }
}
