// A bulk import's held acceptances (SqliteLedger.acceptHeld) on the commit thread's connection
// (commitWorker.ts): in timed turns, each one transaction in which the rows are inserted first
// version wins and the new ones' records are kept end to end in one held_batches row (see the
// migrations), each report's row naming its bytes there. Meanwhile the import's own thread tags
// and stages the batch before. The turns are driven here too: driven from the event loop, each
// turn waited for whatever that thread was busy with.
import type Database from 'better-sqlite3';
import { commitsOfOthers, inTimedTurns, patiently, type TurnSize } from '../sqlite/turns.js';
import type { AcceptRow, HeldCommitted } from './commitMessages.js';
import { receivedAtTail } from './ledger.js';
import { keptPkey } from '../sqlite/database.js';
import { takenKeys } from './takenKeys.js';

/** A new held report's row, nothing on a repeat; after takenKeys (takenKeys.ts) has found its key free. */
const INSERT_HELD_SQL = `INSERT INTO reports (source, partner, post_id, kept_pkey, created_at_ms, state, accepted_at_ms, enqueued_at_ms, held_batch, held_offset, held_length)
  VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`;
/** What a repeat needs of the report it repeats: whether it is still held, and where its record is. */
const FIRST_SQL = `SELECT r.pkey, r.state, r.enqueued_at_ms, r.held_batch, r.held_offset, r.held_length, p.record
  FROM reports r LEFT JOIN pending_records p ON p.source = r.source AND p.partner = r.partner AND p.post_id = r.post_id
  WHERE r.source = ? AND r.partner = ? AND r.post_id = ?`;

interface FirstRow {
  pkey: string;
  state: string;
  enqueued_at_ms: number;
  held_batch: number | null;
  held_offset: number | null;
  held_length: number | null;
  record: string | null;
}

/**
 * Accepts `rows` held until `holdUntilMs`, received at `receivedAt` (each row's body its record
 * without it), in timed turns: the lock free between them, longer while another connection
 * writes (a worker's flush sleeping in SQLite's busy handler). A turn that finds the lock busy
 * past `whenFree`'s wait is waited out (`patiently`, turns.ts): a bulk job has no client waiting
 * on it.
 */
export function heldAcceptance(
  db: Database.Database,
  whenFree: <T>(transaction: () => T) => T,
): (rows: readonly AcceptRow[], now: number, holdUntilMs: number, receivedAt: string) => Promise<HeldCommitted[]> {
  const turn = heldTurn(db);
  // The thread's own commits (acceptances, earlier turns) do not count: only another connection's.
  const othersWrote = commitsOfOthers(db);
  // One import's batches follow one another here: each starts at the turn size the last one reached.
  const learned: TurnSize = { size: 0 };
  return async (rows, now, holdUntilMs, receivedAt) => {
    const tail = Buffer.from(receivedAtTail(receivedAt));
    const out: HeldCommitted[] = [];
    await inTimedTurns(
      rows,
      async (chunk) => {
        const outcomes = await patiently(() => whenFree(() => turn(chunk, now, holdUntilMs, tail)), (err) => (err as { code?: unknown }).code === 'SQLITE_BUSY');
        for (const outcome of outcomes) out.push(outcome);
      },
      { othersWrote, learned },
    );
    return out;
  };
}

/**
 * A held row's record: its body (JSON without received_at) with `tail` (receivedAtTail) in place
 * of its closing brace, written straight into the bytes kept, not joined as a string first.
 */
function receivedBytes(body: string, tail: Buffer): Buffer {
  const length = Buffer.byteLength(body);
  const bytes = Buffer.allocUnsafe(length - 1 + tail.length);
  bytes.write(body, 0, 'utf8');
  tail.copy(bytes, length - 1);
  return bytes;
}

/** One turn's transaction over `db`: the rows held until `holdUntilMs`, accepted at `now`, their records ending in `tail`; what each came to, in order. */
function heldTurn(db: Database.Database): (rows: readonly AcceptRow[], now: number, holdUntilMs: number, tail: Buffer) => HeldCommitted[] {
  const insert = db.prepare(INSERT_HELD_SQL);
  const taken = takenKeys(db);
  const first = db.prepare(FIRST_SQL);
  const nextBatch = db.prepare('SELECT coalesce(max(id), 0) + 1 AS id FROM held_batches').pluck();
  const insertBatch = db.prepare('INSERT INTO held_batches (id, hold_until_ms, records) VALUES (?, ?, ?)');
  const batchOf = db.prepare('SELECT records FROM held_batches WHERE id = ?').pluck();
  const turn = db.transaction((rows: readonly AcceptRow[], now: number, holdUntilMs: number, tail: Buffer): HeldCommitted[] => {
    const batch = nextBatch.get() as number;
    // This turn's new records, by pkey, in the order of their bytes in the batch.
    const gathered = new Map<string, Buffer>();
    const batches = new Map<number, Buffer>();
    let offset = 0;
    const outcomes = rows.map((row): HeldCommitted => {
      const text = receivedBytes(row.body, tail);
      if (taken(row)) return null;
      if (insert.run(row.source, row.partner, row.post_id, keptPkey(row), row.created_at_ms, now, holdUntilMs, batch, offset, text.length).changes === 1) {
        gathered.set(row.pkey, text);
        offset += text.length;
        return true;
      }
      const found = first.get(row.source, row.partner, row.post_id) as FirstRow | undefined;
      if (!found) return null;
      // Still held by an import (this one, before a crash): its first version, to archive, its
      // hold passed or not: reconciliation takes a report out of its batch as it queues it, in one
      // transaction, so one still in its batch is queued nowhere (and a renewal before the
      // archiving keeps it). One held earlier in this turn is in the batch being gathered.
      if (found.state !== 'pending' || (found.held_batch === null && found.enqueued_at_ms <= now)) return found.pkey;
      const record = found.held_batch === batch ? gathered.get(found.pkey)!.toString() : (found.record ?? heldRecord(found, batches, (id) => batchOf.get(id) as Buffer | undefined));
      return record === null ? found.pkey : { pkey: found.pkey, record };
    });
    if (gathered.size > 0) insertBatch.run(batch, holdUntilMs, Buffer.concat([...gathered.values()]));
    return outcomes;
  });
  // IMMEDIATE: the write lock is taken at the start, so a busy ledger fails the turn before any work.
  return (rows, now, holdUntilMs, tail) => turn.immediate(rows, now, holdUntilMs, tail);
}

/**
 * A held row's record: its bytes in the batch that holds it (`batches` keeps the batches read,
 * each read once for a run of rows). Null for a row not held, or whose batch is gone.
 */
export function heldRecord(
  row: Pick<FirstRow, 'held_batch' | 'held_offset' | 'held_length'>,
  batches: Map<number, Buffer>,
  read: (id: number) => Buffer | undefined,
): string | null {
  if (row.held_batch === null || row.held_offset === null || row.held_length === null) return null;
  let held = batches.get(row.held_batch);
  if (!held) {
    held = read(row.held_batch);
    if (!held) return null;
    batches.set(row.held_batch, held);
  }
  return held.toString('utf8', row.held_offset, row.held_offset + row.held_length);
}
