// The port the worker speaks to after a flush has put its parts: "these reports are archived".
// Both backends record them in an event log (SQLite embedded, the bucket on AWS) that webhooks,
// the live stream, CAP and the SNS relay read. A flush repeated after a crash announces nothing
// twice (embedded: unique per report; AWS: within an hour).
import type { ArchiveRow } from '../archive/partColumns.js';
import type { ReportFeature } from './feature.js';

export const EVENT_TYPES = ['archived', 'retracted'] as const;
export type EventKind = (typeof EVENT_TYPES)[number];

/** CloudEvents `type` of each kind (reverse-DNS, versioned with the payload). */
export const CLOUDEVENT_TYPE: Record<EventKind, string> = {
  archived: 'ph.floodarchive.report.archived.v1',
  retracted: 'ph.floodarchive.report.retracted.v1',
};

export interface ArchiveEvents {
  /** Called after the parts holding `rows` are durable and before the ledger says so. */
  archived(rows: readonly ArchiveRow[]): Promise<void>;
}

type Awaitable<T> = T | Promise<T>;

/** One report's event as the stream, CAP, webhooks and SNS read it. */
export interface StoredEvent {
  /** Increasing id within the log: the stream's event id and a consumer's cursor. */
  seq: number;
  kind: EventKind;
  pkey: string;
  /** When it was recorded. */
  at_ms: number;
  feature: ReportFeature;
}

/** A report retracted after its archived event went out: the alert a CAP `Cancel` withdraws. */
export interface CancelledAlert {
  pkey: string;
  /** When its archived event was recorded: the withdrawn alert's `sent`. */
  alertSentMs: number;
  /** When the retraction was recorded. */
  retractedMs: number;
}

/**
 * The event log both backends keep: SQLite beside the ledger on the embedded backend
 * (EventLog), numbered objects in the store on AWS (ObjectEventLog). Writers record, readers
 * follow it by id: no process needs another's memory.
 */
export interface EventFeed extends ArchiveEvents {
  /** Records a retraction (the report's Feature without its personal fields); hides the report as `hide` does. */
  retracted(feature: ReportFeature): Awaitable<void>;
  /**
   * Leaves the report's archived events out of what readers get from now on, and out of the
   * webhook deliveries waiting: for a retraction whose Feature cannot be made (its point unknown).
   */
  hide(pkey: string): Awaitable<void>;
  /**
   * Announces these reports again as these rows (an archived event each, past the repeat filters):
   * verify's repair kept another copy of each than the one announced. The earlier event reaches no
   * reader's CAP feed from now on; a retracted report is left out.
   */
  superseded(rows: readonly ArchiveRow[]): Promise<void>;
  /** Events after `seq`, in order, at most `limit`. */
  since(seq: number, limit?: number): Awaitable<StoredEvent[]>;
  /**
   * The id of the newest event (0 when none). A reader may answer from a value some moments old
   * (on S3, a listing every 250 ms); `fresh`: as of now (an id from another process is newer).
   */
  lastSeq(fresh?: boolean): Awaitable<number>;
  /** The id of the oldest event kept (0 when none): resuming from before it starts there. */
  firstSeq(): Awaitable<number>;
  /** Archived, unretracted reports created in [fromMs, toMs], newest first; `cities`: only those tagged with one of these city codes. */
  createdBetween(fromMs: number, toMs: number, limit: number, cities?: readonly string[]): Awaitable<StoredEvent[]>;
  /**
   * Reports created in [fromMs, toMs] whose archived event went out and which were retracted
   * since (what a CAP `Cancel` names), the latest retraction first; `cities` as createdBetween.
   */
  cancelledBetween(fromMs: number, toMs: number, limit: number, cities?: readonly string[]): Awaitable<CancelledAlert[]>;
  archivedReport(pkey: string): Awaitable<StoredEvent | undefined>;
  wasRetracted(pkey: string): Awaitable<boolean>;
  /** Drops events older than the retention; returns how many. */
  prune(retentionMs: number): Awaitable<number>;
}
