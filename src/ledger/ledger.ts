// The ingest ledger port: what was accepted (first version wins), what still waits to be
// archived, and the queue message that carries it there. Intake, worker, reconciliation and
// verify speak only to this; the S3 adapter keeps objects written with If-None-Match, the
// embedded one a SQLite database (one transaction per batch of acceptances).
import type { PartnerReport } from '../reports/partnerReport.js';

/** What the ledger keeps of an accepted report, and what queue messages carry. */
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

/** A report by its identity at the source. */
export interface ReportId {
  source: string;
  post_id: number;
}

export interface AcceptedReport {
  pkey: string;
  created_at: string;
  pending: boolean;
}

export interface IngestLedger {
  readonly description: string;
  /**
   * Records the report if its (source, post_id) is new and sends it to the queue. Resolves once
   * both are durable; `created: false` when the post_id was accepted before (its first version
   * stays).
   */
  accept(record: IngestRecord): Promise<AcceptResult>;
  /** The first accepted version of a report, or undefined when it was never accepted. */
  get(id: ReportId): Promise<IngestRecord | undefined>;
  /** Whether the report still waits to be archived. */
  isPending(id: ReportId): Promise<boolean>;
  /** Marks reports archived: their parts are durable. */
  markArchived(ids: readonly ReportId[]): Promise<void>;
  /**
   * Pending reports last enqueued before `beforeMs` and no longer on their way (lost message,
   * queue outage): sent to the queue again, their age restarted. Returns how many.
   */
  requeueStale(beforeMs: number): Promise<number>;
  /** Accepted reports created in [fromMs, toMs], in no particular order. */
  accepted(fromMs: number, toMs: number): AsyncIterable<AcceptedReport>;
  /** Throws UnavailableError when the ledger cannot be written. */
  ping(): Promise<void>;
  close(): void;
}

/** The record a stored body holds, or undefined when it holds none (empty or torn). */
export function parseRecord(body: Buffer | string): IngestRecord | undefined {
  try {
    const value = JSON.parse(typeof body === 'string' ? body : body.toString('utf8')) as Partial<IngestRecord>;
    return value && value.v === 1 && typeof value.pkey === 'string' && value.report ? (value as IngestRecord) : undefined;
  } catch {
    return undefined;
  }
}
