// The ingest ledger port: what was accepted (first version wins), what still waits to be
// archived, and the queue message that carries it there; retractions; kept API keys. Each role
// is an interface of its own, and each consumer depends on the one it uses. The S3 adapter keeps
// objects written with If-None-Match, the embedded one a SQLite database (one transaction per
// batch of acceptances).
import type { PartnerReport } from '../partners/partnerReport.js';

/** What the ledger keeps of an accepted report, and what queue messages carry. */
export interface IngestRecord {
  v: 1;
  pkey: string;
  source: string;
  post_id: number;
  received_at: string;
  /** The name of the API key that posted it (absent on reports accepted before keys had names). */
  partner?: string;
  /**
   * Set on a report a bulk import accepted to archive itself (acceptHeld): reconciliation leaves
   * it alone until then, and queues it after that only if it is still pending.
   */
  held_until?: string;
  report: PartnerReport;
}

/**
 * A report a bulk import accepts (acceptHeld): its identity and time, and its record as JSON
 * without `received_at`, which the ledger adds as it stores the record (receivedRecordJson): one
 * time for a whole batch, written into each record where it is kept, so the import's thread
 * neither parses nor serialises a record to accept it.
 */
export interface HeldRecord {
  pkey: string;
  source: string;
  partner?: string;
  post_id: number;
  created_at_ms: number;
  /** JSON.stringify of the IngestRecord without its received_at. */
  json: string;
}

/**
 * What a held record's JSON ends with once received: its closing brace gives way to this. The
 * record is then the text JSON.stringify gives for it with `received_at` as its last key.
 */
export function receivedAtTail(receivedAt: string): string {
  return `,"received_at":${JSON.stringify(receivedAt)}}`;
}

/** A held record's JSON (HeldRecord.json), received at `receivedAt`: an IngestRecord's JSON. */
export function receivedRecordJson(json: string, receivedAt: string): string {
  return json.slice(0, -1) + receivedAtTail(receivedAt);
}

export interface QueueEnvelope extends IngestRecord {
  /** Set when reconciliation re-enqueues: the worker checks it is still pending. */
  redelivery?: boolean;
}

/** `pkey`: the new report's, or on a repeat the first one's (which may be of the older form). */
export type AcceptResult = { created: true; pkey: string } | { created: false; pkey: string };

/**
 * A held acceptance's outcome: as accept's; `taken` where accept throws PkeyTakenError; or a
 * repeat of a report another held acceptance left pending, its hold not yet over (`held`: its
 * first version), which the import resuming after a crash archives.
 */
export type HeldAcceptResult = AcceptResult | { created: false; pkey: string; taken: true } | { created: false; pkey: string; held: IngestRecord };

/**
 * A report by its identity at the source: the partner that posted it (its key's name; absent for
 * reports of no partner) and that partner's post_id. Two partners' same post_id are two reports.
 */
export interface ReportId {
  source: string;
  partner?: string;
  post_id: number;
}

/** A rotation that lost to another rotation of the same name at the same time (see rotateKey): it kept no key. */
export class KeyRotationConflictError extends Error {
  override name = 'KeyRotationConflictError';
  constructor(readonly keyName: string) {
    super(`another rotation of ${keyName} ran at the same time and its key is the one kept: this one kept no key`);
  }
}

/** A new key asked for under a name that already has one, or reports (see addKey). */
export class KeyNameInUseError extends Error {
  override name = 'KeyNameInUseError';
  constructor(
    readonly keyName: string,
    /** The name has reports (posted under a key no longer listed, in API_KEYS perhaps), not a kept key. */
    readonly hasReports = false,
  ) {
    super(
      hasReports
        ? `the name ${keyName} has reports, and they and the right to retract them follow the name: a new partner takes a name of its own (the partner that posted them gets a key with keys rotate --name ${keyName})`
        : `the name ${keyName} already has a key, and its reports and rights follow the name: rotate its key with keys rotate --name ${keyName}, or choose another name`,
    );
  }
}

/**
 * An acceptance of no partner whose `<source>-<post_id>` key is already another partner's report
 * (one accepted before post_ids were per partner): it cannot be archived under that key.
 */
export class PkeyTakenError extends Error {
  override name = 'PkeyTakenError';
  constructor(readonly pkey: string) {
    super(`${pkey} is already the key of a partner's report`);
  }
}

export interface AcceptedReport {
  pkey: string;
  createdMs: number;
  pending: boolean;
}

/** A report's state: `confirmed` as accepted, or `retracted` (never shown again, its personal fields purged). */
export type ReportState = 'confirmed' | 'retracted';

/** Which report was retracted, and when. */
export interface RetractionRef {
  pkey: string;
  /** The report's created_at (its hour in the archive). */
  created_at: string;
  retracted_at: string;
}

export interface Retraction extends RetractionRef {
  /** The key name of the partner that retracted it, or `ops:<reason>` for the CLI. */
  by: string;
  reason: string;
}

/** What the ledger knows of one report. */
export interface LedgerEntry extends ReportId {
  pkey: string;
  /** The report's created_at (epoch ms): its hour in the archive. */
  createdMs: number;
  pending: boolean;
  state: ReportState;
  retraction?: Retraction;
  /**
   * The report as accepted, when the ledger still keeps it: always while it is pending; once
   * archived, the parts hold it and the embedded ledger keeps only the fields above.
   */
  record?: IngestRecord;
}

export type RetractResult = { found: false } | { found: true; first: boolean; retraction: Retraction };

export interface RetractionFilter {
  /** Only reports created in [fromMs, toMs]. */
  createdFromMs?: number;
  createdToMs?: number;
  /** Only retractions whose parts have not yet been rewritten without the personal fields. */
  unpurgedOnly?: boolean;
}

/** An API key kept in the ledger: its name and SHA-256 digest (hex), never the key. */
export interface StoredKey {
  name: string;
  digest: string;
  created_at: string;
  revoked_at?: string;
}

/** Acceptance: a new report recorded and queued, durably, first version winning (the intake). */
export interface AcceptanceLedger {
  /**
   * Records the report under `record.pkey` if its (source, partner, post_id) is new and sends it
   * to the queue. Resolves once both are durable; `created: false` when that partner's post_id was
   * accepted before (its first version stays, with its pkey). Throws PkeyTakenError when a report
   * of no partner would take the key of another partner's report.
   */
  accept(record: IngestRecord): Promise<AcceptResult>;
  /**
   * A bulk import's acceptance: records each new report as accept does (first version wins),
   * durably before it resolves, but sends no message: the caller archives the reports itself
   * and marks them archived. Until `holdUntilMs` reconciliation leaves them alone; a report
   * still pending after it (the import died and was not resumed) is queued like any other.
   * Each report is received at `receivedAt`. Results are in the order of `records`. Waits out a
   * busy ledger rather than failing.
   */
  acceptHeld(records: readonly HeldRecord[], receivedAt: string, holdUntilMs: number): Promise<HeldAcceptResult[]>;
  /**
   * An import's claim on reports it holds, before it archives them: each of `pkeys` still held
   * (pending, never queued) is held until `holdUntilMs`, if that is later (the embedded ledger
   * renews the others of its held batch, a turn of acceptHeld, with it). Returns those it no
   * longer holds (archived, or queued by reconciliation once their hold ran out: the worker's
   * now), which the import must not archive. Waits out a busy ledger rather than failing.
   */
  renewHolds(pkeys: readonly string[], holdUntilMs: number): Promise<string[]>;
  /**
   * Gives back to the disk the space that held records took once their reports were marked
   * archived: a bulk import's last step, after its reports are queryable. What another
   * writer's lock keeps it from giving back stays free for later rows.
   */
  reclaimHeldSpace(): Promise<void>;
}

/** Reports by their identity (the API's lookups, the CLI, the purge). */
export interface ReportLookup {
  /** A report by its identity at the source (its first accepted version), or undefined when it was never accepted. */
  get(id: ReportId): Promise<LedgerEntry | undefined>;
  /** A report by its pkey, with its state; undefined when it was never accepted. */
  lookup(pkey: string): Promise<LedgerEntry | undefined>;
}

/** The way from accepted to archived (the worker, reconciliation, verify). */
export interface PendingLedger {
  /** Whether the report still waits to be archived. */
  isPending(pkey: string): Promise<boolean>;
  /** Marks reports archived: their parts are durable. */
  markArchived(pkeys: readonly string[]): Promise<void>;
  /**
   * Pending reports last enqueued before `beforeMs` and no longer on their way (lost message,
   * queue outage): sent to the queue again, their age restarted. Returns how many. `backOff`
   * (the default): a ledger that cannot see the queue sends a report again only once it has
   * waited since its last sending as long as it had waited before it (up to 8 periods) while
   * the queue holds messages, so a backlog that is late, not lost, is not sent again in full
   * every period; false: all now.
   */
  requeueStale(beforeMs: number, options?: { backOff?: boolean }): Promise<number>;
  /** Accepted reports created in [fromMs, toMs], in no particular order, a page at a time (a year's are never held at once). */
  accepted(fromMs: number, toMs: number): AsyncIterable<AcceptedReport[]>;
}

/**
 * A report the archive holds and the ledger does not know, as its archived row gives it back: a
 * ledger restored from a backup older than the archive, or (on S3) an idempotency key an earlier
 * build lost to a crash between a report's marker and its key.
 */
export interface ArchivedRecord {
  /** Its first version as the archive keeps it (received_at, the part's). */
  record: IngestRecord;
  /** The archive holds it as a tombstone: retracted, its personal fields purged already. */
  retracted: boolean;
}

/** The reason a report adopted as a tombstone is recorded retracted for: the first one is lost. */
export const ADOPTED_RETRACTION_REASON = 'retracted in the archive before the ledger lost the retraction';

/** Repair: the ledger told of reports only the archive knows (`verify --repair`). */
export interface LedgerRepair {
  /**
   * Records each report whose identity (and pkey) the ledger does not know as accepted and
   * archived, the archive's copy its first version, a tombstone as retracted (by `by`, now) and
   * purged; sends nothing. A report the ledger knows, pending or archived, is left as it is.
   * Returns the pkeys recorded, so a partner's repeat of one is a repeat again and its DELETE
   * finds it.
   */
  adoptArchived(reports: readonly ArchivedRecord[], by: string): Promise<string[]>;
}

/** Retractions: made by partners and operators, read by every writer and reader of parts. */
export interface RetractionLedger {
  /**
   * Retracts a report, durably before it resolves; a repeat keeps the first retraction
   * (`first: false`). The archive hides it from then on, and its parts are purged later.
   */
  retract(pkey: string, by: string, reason: string): Promise<RetractResult>;
  /** Retractions, in no particular order. */
  retractions(filter?: RetractionFilter): AsyncIterable<RetractionRef>;
  /** Records that the parts holding these reports were rewritten without their personal fields. */
  markPurged(pkeys: readonly string[]): Promise<void>;
}

/** Partner API keys kept as digests (authentication, the `keys` command). */
export interface KeyLedger {
  /** A kept API key by its digest (revoked ones too), read afresh: a revocation counts at once. */
  keyByDigest(digest: string): Promise<StoredKey | undefined>;
  /**
   * Keeps a key. A partner's rights (its reports, its post_ids) follow its key's name, so a key
   * under a name that has one already (revoked or not), or has reports (posted with a key since
   * dropped from API_KEYS), is only a rotation's: otherwise KeyNameInUseError, decided atomically
   * with the write.
   */
  addKey(name: string, digest: string): Promise<void>;
  /**
   * Keeps a new key under `name` (which may have keys, revoked or not, or only reports) and
   * revokes the name's keys kept before it; returns how many it revoked. Rotations of one name
   * are ordered: a later one revokes an earlier one's key, never the other way round, so the name
   * is never left without a working key. One overtaken by another may fail with
   * KeyRotationConflictError (keeping no key), or return and see its key revoked by the later one
   * (keyByDigest tells).
   */
  rotateKey(name: string, digest: string): Promise<number>;
  /** Whether any report was accepted under the partner `name` (pending or archived, retracted or not). */
  hasReports(name: string): Promise<boolean>;
  /** Revokes every key of `name`; returns how many. */
  revokeKeys(name: string): Promise<number>;
  listKeys(): Promise<StoredKey[]>;
}

/** The ledger as a dependency of the process: what it is, whether it can be written, its end. */
export interface LedgerLifecycle {
  readonly description: string;
  /** Throws UnavailableError when the ledger cannot be written. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** Every role at once: what an adapter implements and the wiring holds; consumers take one role. */
export interface IngestLedger extends AcceptanceLedger, ReportLookup, PendingLedger, RetractionLedger, LedgerRepair, KeyLedger, LedgerLifecycle {}

/** The record a stored body holds, or undefined when it holds none (empty or torn). */
export function parseRecord(body: Buffer | string): IngestRecord | undefined {
  try {
    const value = JSON.parse(typeof body === 'string' ? body : body.toString('utf8')) as Partial<IngestRecord>;
    return value && value.v === 1 && typeof value.pkey === 'string' && value.report ? (value as IngestRecord) : undefined;
  } catch {
    return undefined;
  }
}
