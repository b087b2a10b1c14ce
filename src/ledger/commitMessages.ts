// What the embedded ledger's commit thread (commitWorker.ts) and the CommitThread that runs it
// (commitThread.ts) say to each other: the thread's start, a batch to commit (acceptances, or a
// bulk import's held ones), its answer.

/** One acceptance: the report's ledger row, and the queue message sent if the row is new. */
export interface AcceptRow {
  source: string;
  /** The posting key's name, '' for none. */
  partner: string;
  post_id: number;
  pkey: string;
  created_at_ms: number;
  /** The IngestRecord as JSON: the report's pending record (its message reads it from there). */
  body: string;
}

/** What a commit made of a row: true (new), the pkey of the report it repeats, or null (its pkey is another report's). */
export type Committed = true | string | null;

/**
 * What a held turn made of a row (heldTurn.ts): true (new), null (its pkey is another report's),
 * the pkey of the report it repeats, or that pkey with the repeated report's record while an
 * import still holds it.
 */
export type HeldCommitted = true | null | string | { pkey: string; record: string };

/** The thread's workerData. */
export interface CommitWorkerData {
  file: string;
  busyTimeoutMs: number;
  /** INSERT … ON CONFLICT DO NOTHING into reports, once takenKeys found the key free: (source, partner, post_id, kept_pkey, created_at_ms, accepted_at_ms, enqueued_at_ms). */
  insertSql: string;
  /** INSERT into pending_records of a new report's record: (source, partner, post_id, record). */
  recordSql: string;
  /** The pkey of the report (source, partner, post_id), when the insert found one. */
  existingSql: string;
  /** INSERT into queue of an accepted report's message: (pkey, sent_at_ms, visible_at_ms); its body is the pending record. */
  sendSql: string;
  /** Every connection's pragmas (src/sqlite/database.ts). */
  pragmas: string[];
}

/** The rows as one flat array of their fields: cloned to the thread faster than objects. */
export type FlatRows = (string | number)[];

/**
 * A batch to commit in one transaction, accepted (and its messages sent) at `now`; with `held`,
 * a bulk import's batch instead, committed in turns (heldTurn.ts): no messages, the reports held
 * until `held.untilMs`, each row's body its record without its received_at, which the turn adds
 * (`held.receivedAt`, receivedAtTail in ledger.ts).
 */
export interface CommitRequest {
  id: number;
  flat: FlatRows;
  now: number;
  held?: { untilMs: number; receivedAt: string };
}

/**
 * The thread's end: it closes its connection and leaves. The last connection to the file to
 * close takes the write-ahead log with it; a thread stopped with its connection open left the log
 * beside the ledger (megabytes after a bulk import) until the next start.
 */
export interface CloseRequest {
  close: true;
}

/** What each row of the batch came to, in order; or why the batch was not (wholly) committed. */
export type CommitReply = { id: number; created: Committed[] } | { id: number; held: HeldCommitted[] } | { id: number; error: { code?: string; message: string } };

export function flatten(rows: readonly AcceptRow[]): FlatRows {
  const flat: FlatRows = [];
  for (const r of rows) flat.push(r.source, r.partner, r.post_id, r.pkey, r.created_at_ms, r.body);
  return flat;
}

export function unflatten(flat: FlatRows): AcceptRow[] {
  const rows: AcceptRow[] = [];
  for (let i = 0; i < flat.length; i += 6) {
    rows.push({ source: flat[i] as string, partner: flat[i + 1] as string, post_id: flat[i + 2] as number, pkey: flat[i + 3] as string, created_at_ms: flat[i + 4] as number, body: flat[i + 5] as string });
  }
  return rows;
}
