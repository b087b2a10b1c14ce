// Durable acceptance of partner reports (invariants 1 and 2).
//
// Order of writes, chosen so that any failure leaves nothing that would make a
// retry wrongly answer "already exists":
//   1. pending marker  (content-free; says "accepted, not yet archived")
//   2. idempotency key (create-if-absent; holds the full first version)
//   3. queue message
// A marker without a key is an abandoned attempt: reconciliation deletes it.
// A key with a marker is durable and gets archived even if step 3 failed.
import type { Queue } from '../queue/queue.js';
import type { ObjectStore } from '../store/objectStore.js';
import type { PartnerReport } from '../reports/partnerReport.js';
import { idempotencyKey, pendingKey, pkeyOf, SOURCE } from '../reports/layout.js';

/** What the idempotency key holds, and what queue messages carry. */
export interface IngestRecord {
  v: 1;
  pkey: string;
  source: string;
  post_id: number;
  received_at: string;
  report: PartnerReport;
}

export interface QueueEnvelope extends IngestRecord {
  /** Set when reconciliation re-enqueues: the worker checks it is still pending. */
  redelivery?: boolean;
}

export type AcceptResult = { created: true; pkey: string } | { created: false; pkey: string };

export class Intake {
  constructor(
    private readonly store: ObjectStore,
    private readonly queue: Queue,
    private readonly now: () => number = Date.now,
  ) {}

  async accept(report: PartnerReport, source = SOURCE): Promise<AcceptResult> {
    const pkey = pkeyOf(source, report.post_id);
    const keyPath = idempotencyKey(source, report.post_id);
    if (await this.store.head(keyPath)) return { created: false, pkey };

    const record: IngestRecord = {
      v: 1,
      pkey,
      source,
      post_id: report.post_id,
      received_at: new Date(this.now()).toISOString(),
      report,
    };
    // The key's content is staged (durable, invisible) while the marker is written; the key
    // becomes visible only once the marker is durable, so the order above still holds.
    // The marker's existence (and age) is all reconciliation reads: it is empty, so it is cheap.
    const staging = this.store.stageIfAbsent(keyPath, JSON.stringify(record));
    staging.catch(() => undefined); // handled below; keeps an early failure from counting as unhandled
    try {
      await this.store.put(pendingKey(source, report.post_id), '');
    } catch (err) {
      await staging.then((s) => s.discard(), () => undefined);
      throw err;
    }
    const staged = await staging;
    const created = await staged.commit();
    if (!created) return { created: false, pkey };
    await this.queue.send([JSON.stringify(record satisfies QueueEnvelope)]);
    return { created: true, pkey };
  }
}
