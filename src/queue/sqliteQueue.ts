// The embedded backend's queue: a table in the ledger database, with SQS's semantics
// (visibility timeout, receive count, dead letters after N receives, batch receive and
// delete), for any number of consumers in any number of processes on one DATA_DIR.
import { randomBytes } from 'node:crypto';
import { UnavailableError } from '../shared/errors.js';
import { guardSync, reportByPkeySql, withoutFsync, type Db } from '../sqlite/database.js';
import { inTurns } from '../sqlite/turns.js';
import { pause } from '../shared/pause.js';
import type { Queue, QueueDepth, QueueMessage, ReceiveOptions } from './queue.js';

/** Sends one message: (body, pkey, sent_at_ms, visible_at_ms). The ledger's acceptances use it too. */
export const QUEUE_SEND_SQL = 'INSERT INTO queue (body, pkey, sent_at_ms, visible_at_ms) VALUES (?, ?, ?, ?)';

/**
 * An accepted report's message: (pkey, sent_at_ms, visible_at_ms). Its body is empty, and a
 * receive reads the report's pending record instead, so a pending report's body is stored once;
 * once the report is archived (its record gone), the message is done and a receive drops it.
 */
export const ACCEPTED_SEND_SQL = "INSERT INTO queue (body, pkey, sent_at_ms, visible_at_ms) VALUES ('', ?, ?, ?)";

/** How often a waiting receive looks again (other processes' sends wake nobody). */
const POLL_MS = 100;

export interface DeadLetterRow {
  id: number;
  body: string;
  receiveCount: number;
  deadLetteredAt: string;
}

export class SqliteQueue implements Queue {
  readonly description: string;
  private closed = false;
  private readonly stmts;
  /** When the last receive found less than a full batch (performance.now()). */
  private lastShortTake = -Infinity;

  constructor(
    private readonly db: Db,
    private readonly maxReceives: number,
    private readonly now: () => number = Date.now,
  ) {
    this.description = `sqlite:${db.name}`;
    this.stmts = {
      send: db.prepare(QUEUE_SEND_SQL),
      // An empty body is an accepted report's message (ACCEPTED_SEND_SQL): its pending record is
      // the body (null: the report is archived).
      due: db.prepare(
        `SELECT q.id, q.body = '' AS accepted, CASE WHEN q.body = '' THEN p.record ELSE q.body END AS body, q.pkey, q.sent_at_ms, q.receive_count
         FROM queue q
           LEFT JOIN reports r ON q.body = '' AND ${reportByPkeySql('q.pkey', 'r')}
           LEFT JOIN pending_records p ON p.source = r.source AND p.partner = r.partner AND p.post_id = r.post_id
         WHERE q.visible_at_ms <= ? ORDER BY q.visible_at_ms, q.id LIMIT ?`,
      ),
      take: db.prepare('UPDATE queue SET receive_count = receive_count + 1, visible_at_ms = ?, receipt = ? WHERE id = ?'),
      bury: db.prepare('INSERT INTO dead_letters (id, body, pkey, sent_at_ms, receive_count, dead_lettered_at_ms) VALUES (?, ?, ?, ?, ?, ?)'),
      // A report's earlier dead letter (its message sent again since by reconciliation) gives way to the new one.
      unbury: db.prepare('DELETE FROM dead_letters WHERE pkey = ?'),
      drop: db.prepare('DELETE FROM queue WHERE id = ?'),
      delete: db.prepare('DELETE FROM queue WHERE receipt = ?'),
      hide: db.prepare('UPDATE queue SET visible_at_ms = ? WHERE receipt = ?'),
      depth: db.prepare('SELECT sum(visible_at_ms <= ?) AS visible, sum(visible_at_ms > ?) AS in_flight FROM queue'),
      // An accepted report's dead letter reads as its message was received: its pending record
      // (or, archived since, its key alone).
      deadLetters: db.prepare(
        `SELECT d.id, CASE WHEN d.body = '' THEN coalesce(p.record, json_object('pkey', d.pkey)) ELSE d.body END AS body, d.receive_count, d.dead_lettered_at_ms
         FROM dead_letters d
           LEFT JOIN reports r ON d.body = '' AND ${reportByPkeySql('d.pkey', 'r')}
           LEFT JOIN pending_records p ON p.source = r.source AND p.partner = r.partner AND p.post_id = r.post_id
         ORDER BY d.id`,
      ),
      redrive: db.prepare('INSERT INTO queue (body, pkey, sent_at_ms, visible_at_ms) SELECT body, pkey, ?, ? FROM dead_letters ORDER BY id'),
      clearDead: db.prepare('DELETE FROM dead_letters'),
    };
  }

  async send(bodies: readonly string[]): Promise<void> {
    const now = this.now();
    guardSync(() => this.db.transaction(() => bodies.forEach((b) => this.insert(b, pkeyOf(b), now)))());
  }

  /** Inserts within the caller's transaction (the ledger's acceptance). */
  insert(body: string, pkey: string | null, now = this.now()): void {
    this.stmts.send.run(body, pkey, now, now);
  }

  async receive(options: ReceiveOptions): Promise<QueueMessage[]> {
    const deadline = this.now() + options.waitSeconds * 1000;
    // A long poll on a steady trickle (posts arriving as the worker takes them) waits out the
    // poll interval after a short batch: each receive is a write transaction on the shared
    // database, and one per few messages cost the API on the same event loop more than the
    // messages themselves. A full batch is followed at once.
    const since = performance.now() - this.lastShortTake;
    if (options.waitSeconds > 0 && since < POLL_MS) await pause(Math.min(POLL_MS - since, options.waitSeconds * 1000), options.signal);
    for (;;) {
      // Closed: an error, not an empty batch, or a consumer polling in a loop would spin on it.
      if (this.closed) throw new UnavailableError('queue', 'queue closed');
      if (options.signal?.aborted) return [];
      const got = this.take(options);
      if (got.length < options.maxMessages) this.lastShortTake = performance.now();
      if (got.length > 0 || this.now() >= deadline) return got;
      await pause(Math.min(POLL_MS, Math.max(1, deadline - this.now())), options.signal);
    }
  }

  private take(options: ReceiveOptions): QueueMessage[] {
    // One random part per receive: a receipt is still unguessable and valid for this delivery only.
    const nonce = randomBytes(8).toString('hex');
    // Without an fsync of its own (see withoutFsync): a receive lost to a power cut only makes
    // its messages visible again sooner, which at-least-once delivery allows.
    return withoutFsync(this.db, () =>
      this.db
        .transaction(() => {
          const now = this.now();
          const out: QueueMessage[] = [];
          const rows = this.stmts.due.all(now, Math.min(1000, options.maxMessages)) as { id: number; accepted: number; body: string | null; pkey: string | null; sent_at_ms: number; receive_count: number }[];
          for (const row of rows) {
            // An accepted report's message whose report is archived since: delivered, and done.
            if (row.body === null) {
              this.stmts.drop.run(row.id);
              continue;
            }
            // As SQS's redrive policy: past the allowed receives, a message moves aside instead.
            if (row.receive_count >= this.maxReceives) {
              // As it was sent: an accepted report's message stays one that reads its record.
              if (row.pkey !== null) this.stmts.unbury.run(row.pkey);
              this.stmts.bury.run(row.id, row.accepted ? '' : row.body, row.pkey, row.sent_at_ms, row.receive_count, now);
              this.stmts.drop.run(row.id);
              continue;
            }
            const receipt = `${row.id}.${nonce}`;
            this.stmts.take.run(now + options.visibilitySeconds * 1000, receipt, row.id);
            out.push({ id: String(row.id), body: row.body, receipt, receiveCount: row.receive_count + 1 });
          }
          return out;
        })
        .immediate(),
    );
  }

  async delete(receipts: readonly string[]): Promise<void> {
    // Without an fsync of its own: a delete lost to a power cut redelivers messages whose reports
    // the ledger already marks archived (durably, before the delete), and the worker drops them.
    await inTurns(receipts, (turn) => withoutFsync(this.db, () => this.db.transaction(() => turn.forEach((r) => this.stmts.delete.run(r))).immediate()));
  }

  async changeVisibility(receipt: string, seconds: number): Promise<void> {
    guardSync(() => this.stmts.hide.run(this.now() + seconds * 1000, receipt));
  }

  async extend(receipts: readonly string[], seconds: number): Promise<void> {
    // As a delete: without an fsync of its own (lost to a power cut, the messages come back sooner).
    await inTurns(receipts, (turn) =>
      withoutFsync(this.db, () =>
        this.db
          .transaction(() => {
            const until = this.now() + seconds * 1000;
            for (const r of turn) this.stmts.hide.run(until, r);
          })
          .immediate(),
      ),
    );
  }

  async depth(): Promise<QueueDepth> {
    const now = this.now();
    const row = guardSync(() => this.stmts.depth.get(now, now)) as { visible: number | null; in_flight: number | null };
    return { visible: row.visible ?? 0, inFlight: row.in_flight ?? 0 };
  }

  async ping(): Promise<void> {
    guardSync(() => this.db.prepare('SELECT count(*) FROM queue').get());
  }

  deadLetters(): DeadLetterRow[] {
    return guardSync(() => this.stmts.deadLetters.all() as { id: number; body: string; receive_count: number; dead_lettered_at_ms: number }[]).map(
      (r) => ({ id: r.id, body: r.body, receiveCount: r.receive_count, deadLetteredAt: new Date(r.dead_lettered_at_ms).toISOString() }),
    );
  }

  /** Moves every dead letter back to the queue, fresh (receive count 0); returns how many. */
  redriveDeadLetters(): number {
    return guardSync(() =>
      this.db
        .transaction(() => {
          const now = this.now();
          const moved = this.stmts.redrive.run(now, now).changes;
          this.stmts.clearDead.run();
          return moved;
        })
        .immediate(),
    );
  }

  close(): void {
    this.closed = true;
  }
}

/** The pkey an ingest message carries, if it is one. */
function pkeyOf(body: string): string | null {
  const m = /"pkey":"([^"\\]{1,200})"/.exec(body);
  return m ? m[1]! : null;
}
