// What the embedded ledger's commit thread (commitWorker.ts) and the CommitThread that runs it
// (commitThread.ts) say to each other: the thread's start, a batch to commit, its answer.

/** One acceptance: the report's ledger row, and the queue message sent if the row is new. */
export interface AcceptRow {
  source: string;
  post_id: number;
  pkey: string;
  created_at_ms: number;
  /** The IngestRecord as JSON: the row's record and the message's body. */
  body: string;
}

/** The thread's workerData. */
export interface CommitWorkerData {
  file: string;
  busyTimeoutMs: number;
  /** INSERT … ON CONFLICT DO NOTHING into reports: (source, post_id, pkey, created_at_ms, record, accepted_at_ms, enqueued_at_ms). */
  insertSql: string;
  /** INSERT into queue: (body, pkey, sent_at_ms, visible_at_ms). */
  sendSql: string;
}

/** The rows as one flat array of their fields: cloned to the thread faster than objects. */
export type FlatRows = (string | number)[];

/** A batch to commit in one transaction, accepted (and its messages sent) at `now`. */
export interface CommitRequest {
  id: number;
  flat: FlatRows;
  now: number;
}

/** Whether each row of the batch was new, in order; or why the batch was not committed. */
export type CommitReply = { id: number; created: boolean[] } | { id: number; error: { code?: string; message: string } };

export function flatten(rows: readonly AcceptRow[]): FlatRows {
  const flat: FlatRows = [];
  for (const r of rows) flat.push(r.source, r.post_id, r.pkey, r.created_at_ms, r.body);
  return flat;
}

export function unflatten(flat: FlatRows): AcceptRow[] {
  const rows: AcceptRow[] = [];
  for (let i = 0; i < flat.length; i += 5) {
    rows.push({ source: flat[i] as string, post_id: flat[i + 1] as number, pkey: flat[i + 2] as string, created_at_ms: flat[i + 3] as number, body: flat[i + 4] as string });
  }
  return rows;
}
