// Reconciliation (invariant 3): any accepted report still pending after a few
// flush intervals is enqueued again, so a lost message, a crashed worker or an
// in-process queue lost in a restart delays a report but never drops it.
import type { Logger } from '../log.js';
import type { Queue } from '../queue/queue.js';
import { keyOfMarker, PENDING_PREFIX } from '../reports/layout.js';
import type { ObjectStore } from '../store/objectStore.js';
import { parseRecord, type IngestRecord, type QueueEnvelope } from './intake.js';

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
    let batch: { marker: string; record: IngestRecord }[] = [];
    const sendBatch = async () => {
      if (batch.length === 0) return;
      await this.queue.send(batch.map((b) => JSON.stringify({ ...b.record, redelivery: true } satisfies QueueEnvelope)));
      // Rewriting the marker restarts its age, so one outage yields one re-enqueue, not one per run.
      for (const b of batch) await this.store.put(b.marker, JSON.stringify(b.record));
      result.requeued += batch.length;
      batch = [];
    };
    for await (const info of this.store.list({ prefix: PENDING_PREFIX })) {
      result.pending += 1;
      if (info.lastModified.getTime() > cutoff) continue;
      const record = await this.recordOf(info.key);
      if (record === 'archived') continue;
      if (!record) {
        // Torn by a crash during its acceptance: nothing was promised.
        await this.store.delete([info.key]);
        result.abandonedRemoved += 1;
        continue;
      }
      batch.push({ marker: info.key, record });
      if (batch.length >= 100) await sendBatch();
    }
    await sendBatch();
    if (result.requeued > 0 || result.abandonedRemoved > 0) this.log.info(result, 'reconciled pending reports');
    return result;
  }

  /**
   * The record a marker stands for, with its idempotency key in place (rolled forward from
   * the marker when a crash lost it). The key's version wins: it is the first one accepted.
   * Undefined when the marker holds no record and its key none either (torn).
   */
  private async recordOf(marker: string): Promise<IngestRecord | 'archived' | undefined> {
    const key = keyOfMarker(marker);
    const held = await this.store.get(marker);
    // Cleared by the worker since it was listed.
    if (!held) return 'archived';
    const fromMarker = parseRecord(held.body);
    if (fromMarker) {
      await this.store.copyIfAbsent(marker, key, held.body);
      await this.store.sync([key]);
    }
    // Markers written before they carried records are empty: their key holds it.
    const stored = await this.store.get(key);
    return (stored && parseRecord(stored.body)) ?? fromMarker;
  }
}
