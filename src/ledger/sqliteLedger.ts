// The embedded ledger: one SQLite row per accepted report, and its queue message inserted in
// the same transaction, so an acceptance is whole or absent. Acceptances are committed on a
// thread of their own (CommitThread), concurrent ones sharing a commit: one disk flush per batch.
import { randomBytes } from 'node:crypto';
import { DAY_MS, guardSync, isBusy, keptPkey, reclaimFreePages, reportByPkeySql, writeOnLoop, type Db } from '../sqlite/database.js';
import { commitsOfOthers, inTimedTurns, inTurns, patiently } from '../sqlite/turns.js';
import { CommitThread } from './commitThread.js';
import { heldRecord } from './heldTurn.js';
import { takenKeys } from './takenKeys.js';
import type { AcceptRow } from './commitMessages.js';
import { parsePkey, SOURCE } from '../store/layout.js';
import { ACCEPTED_SEND_SQL, type SqliteQueue } from '../queue/sqliteQueue.js';
import { ADOPTED_RETRACTION_REASON, KeyNameInUseError, PkeyTakenError, type AcceptedReport, type ArchivedRecord, type AcceptResult, type HeldAcceptResult, type HeldRecord, type IngestLedger, type IngestRecord, type LedgerEntry, type QueueEnvelope, type ReportId, type RetractResult, type Retraction, type RetractionFilter, type RetractionRef, type StoredKey } from './ledger.js';

interface ReportRow {
  source: string;
  /** '' for a report of no partner. */
  partner: string;
  post_id: number;
  /** Its record while pending, if kept on its own (a live post's, or one reconciliation queued). */
  record: string | null;
  /** Where a bulk import holds its record, while it does: its batch, and its bytes in it. */
  held_batch: number | null;
  held_offset: number | null;
  held_length: number | null;
  state: string;
  created_at_ms: number;
  enqueued_at_ms: number;
  pkey: string;
  retracted_at_ms: number | null;
  retracted_by: string | null;
  retraction_reason: string | null;
}

/** What the commit thread writes of a record: its identity, key, time and the record itself. */
function rowOf(record: IngestRecord): AcceptRow {
  return {
    source: record.source,
    partner: record.partner ?? '',
    post_id: record.post_id,
    pkey: record.pkey,
    created_at_ms: Date.parse(record.report.created_at),
    body: JSON.stringify(record),
  };
}

interface KeyRow {
  digest: string;
  name: string;
  created_at_ms: number;
  revoked_at_ms: number | null;
}

/**
 * How long an acceptance waits for another process's write lock: well inside the acceptance
 * deadline (2 s by default), so a long lock mostly ends in a clean 503 with nothing accepted.
 * An acceptance that waited behind others too may still commit after its 503: the partner's
 * retry then finds it accepted (docs/http.md).
 */
const ACCEPT_BUSY_TIMEOUT_MS = 1_000;

/**
 * A report whose message was dead-lettered is sent again by reconciliation once the dead letter
 * is this old: a worker crashing in a loop dead-letters good reports, archived then with no
 * operator's help (as the bucket's markers send them again on AWS); a poison message costs a few
 * receives an hour.
 */
export const DEAD_LETTER_RETRY_MS = 3_600_000;

/** A new report's row, nothing on a repeat; after takenKeys (takenKeys.ts) has found its key free. */
const INSERT_REPORT_SQL = `INSERT INTO reports (source, partner, post_id, kept_pkey, created_at_ms, state, accepted_at_ms, enqueued_at_ms)
  VALUES (?, ?, ?, ?, ?, 'pending', ?, ?) ON CONFLICT DO NOTHING`;
/** A new report's record, kept while it is pending (see the migrations). */
const INSERT_RECORD_SQL = 'INSERT INTO pending_records (source, partner, post_id, record) VALUES (?, ?, ?, ?)';
const EXISTING_PKEY_SQL = 'SELECT pkey FROM reports WHERE source = ? AND partner = ? AND post_id = ?';
/** What a lookup reads of a row (`r`) and its record while pending (`p`). */
const ENTRY_SQL = `SELECT r.source, r.partner, r.post_id, r.pkey, p.record, r.held_batch, r.held_offset, r.held_length, r.state, r.created_at_ms, r.enqueued_at_ms, r.retracted_at_ms, r.retracted_by, r.retraction_reason
  FROM reports r LEFT JOIN pending_records p ON p.source = r.source AND p.partner = r.partner AND p.post_id = r.post_id`;

/** More reports marked archived at once than a worker's flush holds: a bulk import's part. */
const BULK_MARKS = 5_000;

export class SqliteLedger implements IngestLedger {
  readonly description: string;
  private readonly accepts: CommitThread;
  private readonly stmts;

  constructor(
    private readonly db: Db,
    private readonly queue: SqliteQueue,
    private readonly now: () => number = Date.now,
  ) {
    this.description = `sqlite:${db.name}`;
    this.stmts = {
      state: db.prepare(`SELECT state FROM reports WHERE ${reportByPkeySql('@pkey')}`),
      holdOf: db.prepare(`SELECT state, held_batch FROM reports WHERE ${reportByPkeySql('@pkey')}`),
      // A batch's held reports all share its hold (the pending index finds them by it, see
      // doneBatches): renewed together, in one transaction with the batch.
      renewBatchReports: db.prepare(
        `UPDATE reports SET enqueued_at_ms = @until WHERE state = 'pending' AND held_batch = @id
           AND enqueued_at_ms = (SELECT hold_until_ms FROM held_batches WHERE id = @id AND hold_until_ms < @until)`,
      ),
      renewBatch: db.prepare('UPDATE held_batches SET hold_until_ms = @until WHERE id = @id AND hold_until_ms < @until'),
      insert: db.prepare(INSERT_REPORT_SQL),
      insertRecord: db.prepare(INSERT_RECORD_SQL),
      batch: db.prepare('SELECT records FROM held_batches WHERE id = ?'),
      // Through the pending index (the batch's hold, then its id): a batch's reports not yet
      // archived are a few thousand rows at most.
      doneBatches: db.prepare(
        `SELECT id FROM held_batches h WHERE NOT EXISTS (
           SELECT 1 FROM reports r WHERE r.state = 'pending' AND r.enqueued_at_ms = h.hold_until_ms AND r.held_batch = h.id)`,
      ),
      dropBatch: db.prepare(
        `DELETE FROM held_batches WHERE id = ? AND NOT EXISTS (
           SELECT 1 FROM reports r WHERE r.state = 'pending' AND r.enqueued_at_ms = held_batches.hold_until_ms AND r.held_batch = held_batches.id)`,
      ),
      byId: db.prepare(`${ENTRY_SQL} WHERE r.source = ? AND r.partner = ? AND r.post_id = ?`),
      // Once archived, the parts hold the report: the row keeps what idempotency, retraction and
      // a lookup need (its identity, key, time, state), and its record goes.
      archive: db.prepare(
        `UPDATE reports SET state = 'archived', archived_at_ms = ?, held_batch = NULL, held_offset = NULL, held_length = NULL WHERE ${reportByPkeySql('@pkey')} AND state = 'pending' RETURNING source, partner, post_id`,
      ),
      archiveById: db.prepare(
        `UPDATE reports SET state = 'archived', archived_at_ms = ?, held_batch = NULL, held_offset = NULL, held_length = NULL
         WHERE source = ? AND partner = ? AND post_id = ? AND pkey = ? AND state = 'pending'`,
      ),
      // A held report has no pending_records row (its record is in its batch until reconciliation
      // moves it there and unholds the row, in one transaction): marked without the delete's probe.
      archiveHeldById: db.prepare(
        `UPDATE reports SET state = 'archived', archived_at_ms = ?, held_batch = NULL, held_offset = NULL, held_length = NULL
         WHERE source = ? AND partner = ? AND post_id = ? AND pkey = ? AND state = 'pending' AND held_batch IS NOT NULL`,
      ),
      dropRecord: db.prepare('DELETE FROM pending_records WHERE source = ? AND partner = ? AND post_id = ?'),
      stale: db.prepare(
        `SELECT r.source, r.partner, r.post_id, r.pkey, p.record, r.held_batch, r.held_offset, r.held_length
         FROM reports r LEFT JOIN pending_records p ON p.source = r.source AND p.partner = r.partner AND p.post_id = r.post_id
         WHERE r.state = 'pending' AND r.enqueued_at_ms < ?
           AND (p.record IS NOT NULL OR EXISTS (SELECT 1 FROM held_batches h WHERE h.id = r.held_batch))
           -- A message waiting in line will get there. One in flight past the reconcile time may
           -- have lost its worker: sent again as a redelivery, which a worker drops if the report
           -- was archived meanwhile (two copies in flight at once are stored twice, read once).
           AND NOT EXISTS (SELECT 1 FROM queue q WHERE q.pkey = r.pkey AND q.visible_at_ms <= ?)
           -- Dead-lettered: sent again once its dead letter is DEAD_LETTER_RETRY_MS old.
           AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.pkey = r.pkey AND d.dead_lettered_at_ms > ?)
         LIMIT 500`,
      ),
      touch: db.prepare('UPDATE reports SET enqueued_at_ms = ? WHERE source = ? AND partner = ? AND post_id = ?'),
      // A held report reconciliation queues keeps its record as a live post's is kept.
      unhold: db.prepare('UPDATE reports SET held_batch = NULL, held_offset = NULL, held_length = NULL WHERE source = ? AND partner = ? AND post_id = ?'),
      // By day first (the index's key, see the migrations), then to the instant.
      accepted: db.prepare(`SELECT pkey, created_at_ms, state FROM reports WHERE created_at_ms / ${DAY_MS} BETWEEN ? AND ? AND created_at_ms BETWEEN ? AND ?`),
      nextDay: db.prepare(`SELECT min(created_at_ms / ${DAY_MS}) AS day FROM reports WHERE created_at_ms / ${DAY_MS} >= ?`),
      byPkey: db.prepare(`${ENTRY_SQL} WHERE ${reportByPkeySql('@pkey', 'r')}`),
      retract: db.prepare(`UPDATE reports SET retracted_at_ms = ?, retracted_by = ?, retraction_reason = ? WHERE ${reportByPkeySql('@pkey')} AND retracted_at_ms IS NULL`),
      retractions: db.prepare(
        `SELECT pkey, created_at_ms, retracted_at_ms FROM reports
         WHERE retracted_at_ms IS NOT NULL AND created_at_ms BETWEEN ? AND ? AND (? = 0 OR purged_at_ms IS NULL)`,
      ),
      purged: db.prepare(`UPDATE reports SET purged_at_ms = ? WHERE ${reportByPkeySql('@pkey')} AND retracted_at_ms IS NOT NULL`),
      keyByDigest: db.prepare('SELECT digest, name, created_at_ms, revoked_at_ms FROM api_keys WHERE digest = ?'),
      addKey: db.prepare('INSERT INTO api_keys (digest, name, created_at_ms) VALUES (?, ?, ?) ON CONFLICT DO NOTHING'),
      nameHasKey: db.prepare('SELECT 1 FROM api_keys WHERE name = ? LIMIT 1'),
      // The primary key's prefix (source, partner): one probe of the index.
      nameHasReports: db.prepare('SELECT 1 FROM reports WHERE source = ? AND partner = ? LIMIT 1'),
      revokeKeys: db.prepare('UPDATE api_keys SET revoked_at_ms = ? WHERE name = ? AND digest <> ? AND revoked_at_ms IS NULL'),
      listKeys: db.prepare('SELECT digest, name, created_at_ms, revoked_at_ms FROM api_keys ORDER BY name, created_at_ms'),
      // A report only the archive knows: archived (a tombstone retracted and purged), no record kept.
      adopt: db.prepare(
        `INSERT INTO reports (source, partner, post_id, kept_pkey, created_at_ms, state, accepted_at_ms, enqueued_at_ms, archived_at_ms,
                              retracted_at_ms, retracted_by, retraction_reason, purged_at_ms)
         VALUES (?, ?, ?, ?, ?, 'archived', ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
      ),
      probe: db.prepare("INSERT INTO meta (name, value) VALUES ('probe', ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value"),
    };
    this.accepts = new CommitThread({ file: db.name, busyTimeoutMs: ACCEPT_BUSY_TIMEOUT_MS, insertSql: INSERT_REPORT_SQL, recordSql: INSERT_RECORD_SQL, sendSql: ACCEPTED_SEND_SQL, existingSql: EXISTING_PKEY_SQL, now });
  }

  /** The row, and its message only if the row is new (first version wins), in one transaction. */
  async accept(record: IngestRecord): Promise<AcceptResult> {
    const outcome = await this.accepts.submit(rowOf(record));
    if (outcome === true) return { created: true, pkey: record.pkey };
    if (outcome === null) throw new PkeyTakenError(record.pkey);
    return { created: false, pkey: outcome };
  }

  /**
   * On the commit thread, in timed turns (heldTurn.ts): each turn's new reports are held in one
   * batch row (see the migrations), their records end to end, each report's row naming its bytes.
   */
  async acceptHeld(records: readonly HeldRecord[], receivedAt: string, holdUntilMs: number): Promise<HeldAcceptResult[]> {
    // Each body the record without its received_at: the turn adds it as it keeps the bytes.
    const rows = records.map((r): AcceptRow => ({ source: r.source, partner: r.partner ?? '', post_id: r.post_id, pkey: r.pkey, created_at_ms: r.created_at_ms, body: r.json }));
    const outcomes = await this.accepts.hold(rows, this.now(), holdUntilMs, receivedAt);
    return outcomes.map((outcome, i): HeldAcceptResult => {
      if (outcome === true) return { created: true, pkey: rows[i]!.pkey };
      if (outcome === null) return { created: false, pkey: rows[i]!.pkey, taken: true };
      if (typeof outcome === 'string') return { created: false, pkey: outcome };
      return { created: false, pkey: outcome.pkey, held: JSON.parse(outcome.record) as IngestRecord };
    });
  }

  /**
   * A report is held while its row names its batch: reconciliation queues it and unholds the row
   * in one transaction. Renewing a batch renews all its held reports (those this import staged
   * before a crash and those it accepted but had not staged alike).
   */
  async renewHolds(pkeys: readonly string[], holdUntilMs: number): Promise<string[]> {
    const released: string[] = [];
    const renewed = new Set<number>();
    const renew = (turn: readonly string[]) =>
      guardSync(() =>
        this.db
          .transaction(() => {
            const gone: string[] = [];
            const batches: number[] = [];
            for (const pkey of turn) {
              const row = this.stmts.holdOf.get({ pkey }) as { state: string; held_batch: number | null } | undefined;
              if (row?.state !== 'pending' || row.held_batch === null) gone.push(pkey);
              else if (!renewed.has(row.held_batch) && !batches.includes(row.held_batch)) {
                this.stmts.renewBatchReports.run({ until: holdUntilMs, id: row.held_batch });
                this.stmts.renewBatch.run({ until: holdUntilMs, id: row.held_batch });
                batches.push(row.held_batch);
              }
            }
            return { gone, batches };
          })
          .immediate(),
      );
    await inTimedTurns(
      pkeys,
      async (turn) => {
        const { gone, batches } = await patiently(() => renew(turn), isBusy);
        released.push(...gone);
        for (const id of batches) renewed.add(id);
      },
      { othersWrote: commitsOfOthers(this.db) },
    );
    return released;
  }

  /**
   * A pending row's record: its own, or its bytes in the batch that holds it (`batches` keeps the
   * batches read, each read once for a run of rows).
   */
  private recordOf(row: Pick<ReportRow, 'record' | 'held_batch' | 'held_offset' | 'held_length'>, batches = new Map<number, Buffer>()): string | null {
    return row.record ?? heldRecord(row, batches, (id) => (this.stmts.batch.get(id) as { records: Buffer } | undefined)?.records);
  }

  async get(id: ReportId): Promise<LedgerEntry | undefined> {
    const row = guardSync(() => this.stmts.byId.get(id.source, id.partner ?? '', id.post_id)) as ReportRow | undefined;
    return row && entryOf(row, guardSync(() => this.recordOf(row)));
  }

  async isPending(pkey: string): Promise<boolean> {
    const row = guardSync(() => this.stmts.state.get({ pkey })) as { state: string } | undefined;
    return row?.state === 'pending';
  }

  async markArchived(pkeys: readonly string[]): Promise<void> {
    const now = this.now();
    // A report archived without a record of its own was held in a batch (an import's).
    let held = false;
    // Many at once only from a bulk import, whose reports are held: tried as held first, which
    // saves the delete's probe of pending_records (its turns 1.9 -> 1.65 s for 300,000 marks).
    const heldFirst = pkeys.length > BULK_MARKS;
    const archive = (pkey: string) => {
      // By the primary key the pkey names (one lookup, not the pkey's index and then the row: a
      // fifth to a third less time a report). A report accepted before post_ids were per partner
      // has a pkey without its partner, and is found by its pkey.
      const named = parsePkey(pkey);
      if (heldFirst && named && this.stmts.archiveHeldById.run(now, named.source, named.partner ?? '', named.post_id, pkey).changes === 1) {
        held = true;
        return;
      }
      if (named && this.stmts.archiveById.run(now, named.source, named.partner ?? '', named.post_id, pkey).changes === 1) {
        if (this.stmts.dropRecord.run(named.source, named.partner ?? '', named.post_id).changes === 0) held = true;
        return;
      }
      const id = this.stmts.archive.get(now, { pkey }) as { source: string; partner: string; post_id: number } | undefined;
      if (id && this.stmts.dropRecord.run(id.source, id.partner, id.post_id).changes === 0) held = true;
    };
    // Each turn its own fsync: a turn's is small, where one for a whole bulk job's turns at its end
    // held the write lock past a live acceptance's busy timeout.
    const mark = (turn: readonly string[]) => guardSync(() => this.db.transaction(() => turn.forEach(archive)).immediate());
    // Many at once only from a bulk import: each turn as large as a short hold of the lock allows,
    // and a busy ledger waited out (a worker's flush fails instead, and is tried again whole).
    if (heldFirst) {
      await inTimedTurns(pkeys, (turn) => patiently(() => mark(turn), isBusy), { othersWrote: commitsOfOthers(this.db) });
      // Also when nothing was held: an import resumed after a crash that came between its marks
      // and the drop marks its reports again (archived already), and its batches go now.
      await this.dropDoneBatches();
    } else {
      await inTurns(pkeys, mark);
      if (held) await this.dropDoneBatches();
    }
  }

  /**
   * Moving the live pages at the file's end into the free ones costs nearly as much as the marks
   * (11 s against 12–13 s for a year of 2.5 million): the import's reports are queryable before it.
   */
  async reclaimHeldSpace(): Promise<void> {
    await reclaimFreePages(this.db);
  }

  /**
   * The batches of held records none of whose reports is held any more, in timed turns from one
   * batch a transaction up, the lock free between them: each frees a megabyte or so of pages,
   * and a year's at once would hold off acceptances for seconds.
   */
  private async dropDoneBatches(): Promise<void> {
    const done = (guardSync(() => this.stmts.doneBatches.all()) as { id: number }[]).map((r) => r.id);
    const drop = (turn: readonly number[]) => guardSync(() => this.db.transaction(() => turn.forEach((id) => this.stmts.dropBatch.run(id))).immediate());
    await inTimedTurns(done, (turn) => patiently(() => drop(turn), isBusy), { smallest: 1, othersWrote: commitsOfOthers(this.db) });
  }

  /** No back-off here: a report whose message is still queued is not stale (the queue is in this database). */
  async requeueStale(beforeMs: number): Promise<number> {
    let total = 0;
    for (;;) {
      const moved = guardSync(() =>
        this.db
          .transaction(() => {
            const now = this.now();
            const rows = this.stmts.stale.all(beforeMs, now, now - DEAD_LETTER_RETRY_MS) as ReportRow[];
            const batches = new Map<number, Buffer>();
            for (const row of rows) {
              const record = this.recordOf(row, batches)!;
              const envelope: QueueEnvelope = { ...(JSON.parse(record) as IngestRecord), redelivery: true };
              this.queue.insert(JSON.stringify(envelope), envelope.pkey, now);
              this.stmts.touch.run(now, row.source, row.partner, row.post_id);
              if (row.record === null) {
                this.stmts.insertRecord.run(row.source, row.partner, row.post_id, record);
                this.stmts.unhold.run(row.source, row.partner, row.post_id);
              }
            }
            for (const id of batches.keys()) this.stmts.dropBatch.run(id);
            return rows.length;
          })
          .immediate(),
      );
      total += moved;
      if (moved === 0) return total;
      // Let requests in between batches of a large backlog.
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /** A week of days at a time, from the next day holding a report (a window from 1970 skips the decades before). */
  async *accepted(fromMs: number, toMs: number): AsyncIterable<AcceptedReport[]> {
    const [from, to] = [Math.trunc(fromMs), Math.trunc(toMs)];
    const lastDay = Math.trunc(to / DAY_MS);
    for (let day = Math.trunc(from / DAY_MS); day <= lastDay; ) {
      const next = (guardSync(() => this.stmts.nextDay.get(day)) as { day: number | null }).day;
      if (next === null || next > lastDay) return;
      const until = Math.min(lastDay, next + 6);
      const rows = guardSync(() => this.stmts.accepted.all(next, until, from, to)) as { pkey: string; created_at_ms: number; state: string }[];
      yield rows.map((r) => ({ pkey: r.pkey, createdMs: r.created_at_ms, pending: r.state === 'pending' }));
      day = until + 1;
    }
  }

  async lookup(pkey: string): Promise<LedgerEntry | undefined> {
    const row = guardSync(() => this.stmts.byPkey.get({ pkey })) as ReportRow | undefined;
    return row && entryOf(row, guardSync(() => this.recordOf(row)));
  }

  async retract(pkey: string, by: string, reason: string): Promise<RetractResult> {
    const now = this.now();
    // One transaction: the first retraction wins, a repeat reads it back. A client waits on it:
    // another process's write lock is waited out off the event loop.
    const row = await writeOnLoop(this.db, () =>
      this.db
        .transaction(() => {
          const first = this.stmts.retract.run(now, by, reason, { pkey }).changes === 1;
          const found = this.stmts.byPkey.get({ pkey }) as ReportRow | undefined;
          return found && { first, row: found };
        })
        .immediate(),
    );
    if (!row) return { found: false };
    return { found: true, first: row.first, retraction: retractionOf(row.row)! };
  }

  async *retractions(filter: RetractionFilter = {}): AsyncIterable<RetractionRef> {
    const rows = guardSync(() =>
      this.stmts.retractions.all(Math.trunc(filter.createdFromMs ?? -8.64e15), Math.trunc(filter.createdToMs ?? 8.64e15), filter.unpurgedOnly ? 1 : 0),
    ) as ReportRow[];
    for (const row of rows) yield { pkey: row.pkey, created_at: new Date(row.created_at_ms).toISOString(), retracted_at: new Date(row.retracted_at_ms!).toISOString() };
  }

  async markPurged(pkeys: readonly string[]): Promise<void> {
    const now = this.now();
    await inTurns(pkeys, (turn) => guardSync(() => this.db.transaction(() => turn.forEach((p) => this.stmts.purged.run(now, { pkey: p }))).immediate()));
  }

  async adoptArchived(reports: readonly ArchivedRecord[], by: string): Promise<string[]> {
    const now = this.now();
    const taken = takenKeys(this.db);
    const adopted: string[] = [];
    const adopt = ({ record, retracted }: ArchivedRecord) => {
      const row = rowOf(record);
      // A key another report keeps (one accepted before post_ids were per partner) is not this one's to take.
      if (taken(row)) return;
      const receivedMs = Date.parse(record.received_at);
      const retraction = retracted ? [now, by, ADOPTED_RETRACTION_REASON, now] : [null, null, null, null];
      if (this.stmts.adopt.run(row.source, row.partner, row.post_id, keptPkey(row), row.created_at_ms, receivedMs, receivedMs, now, ...retraction).changes === 1) adopted.push(record.pkey);
    };
    // In timed turns, the lock free between them: live acceptances go on beside a repair.
    await inTimedTurns(reports, (turn) => patiently(() => guardSync(() => this.db.transaction(() => turn.forEach(adopt)).immediate()), isBusy), {
      othersWrote: commitsOfOthers(this.db),
    });
    return adopted;
  }

  async keyByDigest(digest: string): Promise<StoredKey | undefined> {
    const row = guardSync(() => this.stmts.keyByDigest.get(digest)) as KeyRow | undefined;
    return row && storedKey(row);
  }

  async addKey(name: string, digest: string): Promise<void> {
    guardSync(() =>
      this.db
        .transaction(() => {
          if (this.stmts.nameHasKey.get(name)) throw new KeyNameInUseError(name);
          if (this.stmts.nameHasReports.get(SOURCE, name)) throw new KeyNameInUseError(name, true);
          this.stmts.addKey.run(digest, name, this.now());
        })
        .immediate(),
    );
  }

  /** One transaction: rotations of a name are ordered by the database's lock. */
  async rotateKey(name: string, digest: string): Promise<number> {
    return guardSync(() =>
      this.db
        .transaction(() => {
          const now = this.now();
          this.stmts.addKey.run(digest, name, now);
          return this.stmts.revokeKeys.run(now, name, digest).changes;
        })
        .immediate(),
    );
  }

  async hasReports(name: string): Promise<boolean> {
    return guardSync(() => this.stmts.nameHasReports.get(SOURCE, name)) !== undefined;
  }

  async revokeKeys(name: string): Promise<number> {
    return guardSync(() => this.stmts.revokeKeys.run(this.now(), name, '').changes);
  }

  async listKeys(): Promise<StoredKey[]> {
    return (guardSync(() => this.stmts.listKeys.all()) as KeyRow[]).map(storedKey);
  }

  /** A write that goes through the disk: a full disk or a read-only mount fails it. */
  async ping(): Promise<void> {
    guardSync(() => this.stmts.probe.run(randomBytes(8).toString('hex')));
  }

  async close(): Promise<void> {
    this.queue.close();
    if (this.db.open) this.db.close();
    await this.accepts.close();
  }
}

/** A row as the port's entry, with its record while pending. */
function entryOf(row: ReportRow, record: string | null): LedgerEntry {
  const retraction = retractionOf(row);
  return {
    source: row.source,
    ...(row.partner !== '' && { partner: row.partner }),
    post_id: row.post_id,
    pkey: row.pkey,
    createdMs: row.created_at_ms,
    pending: row.state === 'pending',
    state: retraction ? 'retracted' : 'confirmed',
    ...(retraction && { retraction }),
    ...(row.state === 'pending' && record !== null && { record: JSON.parse(record) as IngestRecord }),
  };
}

function retractionOf(row: Pick<ReportRow, 'pkey' | 'created_at_ms' | 'retracted_at_ms' | 'retracted_by' | 'retraction_reason'>): Retraction | undefined {
  if (row.retracted_at_ms === null) return undefined;
  return {
    pkey: row.pkey,
    created_at: new Date(row.created_at_ms).toISOString(),
    retracted_at: new Date(row.retracted_at_ms).toISOString(),
    by: row.retracted_by ?? '',
    reason: row.retraction_reason ?? '',
  };
}

function storedKey(row: KeyRow): StoredKey {
  return {
    name: row.name,
    digest: row.digest,
    created_at: new Date(row.created_at_ms).toISOString(),
    ...(row.revoked_at_ms !== null && { revoked_at: new Date(row.revoked_at_ms).toISOString() }),
  };
}
