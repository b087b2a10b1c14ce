// Reconciliation (invariant 3): any accepted report still pending after a few
// flush intervals is enqueued again, so a lost message, a crashed worker or an
// in-process queue lost in a restart delays a report but never drops it.
import type { Logger } from '../log.js';
import type { Queue } from '../queue/queue.js';
import { IDEMPOTENCY_PREFIX, PENDING_PREFIX } from '../reports/layout.js';
import type { ObjectStore } from '../store/objectStore.js';
import type { IngestRecord, QueueEnvelope } from './intake.js';

export interface ReconcileResult {
  pending: number;
  requeued: number;
  abandonedRemoved: number;
}

export class Reconciler {
  constructor(
    private readonly store: ObjectStore,
    private readonly queue: Queue,
    private readonly log: Logger,
  ) {}

  /** Re-enqueues markers older than `olderThanMs` (0: all of them). */
  async run(olderThanMs: number): Promise<ReconcileResult> {
    const cutoff = Date.now() - olderThanMs;
    const result: ReconcileResult = { pending: 0, requeued: 0, abandonedRemoved: 0 };
    let batch: { marker: string; body: string }[] = [];
    const sendBatch = async () => {
      if (batch.length === 0) return;
      await this.queue.send(batch.map((b) => b.body));
      // Rewriting the marker restarts its age, so one outage yields one re-enqueue, not one per run.
      for (const b of batch) await this.store.put(b.marker, '');
      result.requeued += batch.length;
      batch = [];
    };
    for await (const info of this.store.list({ prefix: PENDING_PREFIX })) {
      result.pending += 1;
      if (info.lastModified.getTime() > cutoff) continue;
      const recordKey = IDEMPOTENCY_PREFIX + info.key.slice(PENDING_PREFIX.length);
      const record = await this.store.get(recordKey);
      if (!record) {
        // The acceptance that wrote this marker failed before its key: nothing was promised.
        await this.store.delete([info.key]);
        result.abandonedRemoved += 1;
        continue;
      }
      const envelope: QueueEnvelope = { ...(JSON.parse(record.body.toString('utf8')) as IngestRecord), redelivery: true };
      batch.push({ marker: info.key, body: JSON.stringify(envelope) });
      if (batch.length >= 100) await sendBatch();
    }
    await sendBatch();
    if (result.requeued > 0 || result.abandonedRemoved > 0) this.log.info(result, 'reconciled pending reports');
    return result;
  }
}
