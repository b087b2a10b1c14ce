// Durable acceptance of partner reports (invariants 1 and 2).
//
// Order of writes:
//   1. pending marker: holds the record. Once it is durable the report is accepted,
//      in one wait for the disk.
//   2. idempotency key: the marker's bytes under the key's name (create-if-absent; the
//      first version wins). On the file store it is a hard link, durable once the worker
//      has synced it, before it clears the marker; after a crash reconciliation rebuilds
//      it from the marker.
//   3. queue message.
// A marker that cannot be parsed was torn by a crash during step 1: nothing was promised,
// and reconciliation deletes it. A marker is archived even if step 3 failed.
import { UnavailableError } from '../errors.js';
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
    const body = JSON.stringify(record satisfies QueueEnvelope);
    const marker = pendingKey(source, report.post_id);
    if (!(await this.createMarker(marker, body))) return { created: false, pkey };
    if (!(await this.store.copyIfAbsent(marker, keyPath, body))) {
      // Accepted and archived since the HEAD above: ours is a repeat. Its marker stays for
      // reconciliation, which sends the key's (first) version again; answers drop the copy.
      return { created: false, pkey };
    }
    await this.queue.send([body]);
    return { created: true, pkey };
  }

  /** False when an acceptance of this post_id holds the marker (done, or under way). */
  private async createMarker(marker: string, body: string): Promise<boolean> {
    if (await this.store.createIfAbsent(marker, body)) return true;
    const existing = await this.store.get(marker);
    if (!existing) return this.store.createIfAbsent(marker, body);
    if (parseRecord(existing.body) !== undefined) return false;
    // Unparsable: torn by a crash during an earlier acceptance, or still being written by a
    // concurrent one. Only an old one can be replaced; a fresh one asks the client to retry.
    if (this.now() - existing.lastModified.getTime() < TORN_MARKER_AGE_MS) {
      throw new UnavailableError('storage', 'an acceptance of this post_id is under way');
    }
    await this.store.put(marker, body);
    return true;
  }
}

/** A marker this old that still cannot be parsed was torn by a crash, not being written. */
const TORN_MARKER_AGE_MS = 60_000;

/** The record a marker or key holds, or undefined when it holds none (empty or torn). */
export function parseRecord(body: Buffer): IngestRecord | undefined {
  try {
    const value = JSON.parse(body.toString('utf8')) as Partial<IngestRecord>;
    return value && value.v === 1 && typeof value.pkey === 'string' && value.report ? (value as IngestRecord) : undefined;
  } catch {
    return undefined;
  }
}
