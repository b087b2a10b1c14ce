// The embedded ledger's commit thread (see commitThread.ts): each batch of acceptances is one
// immediate transaction, so one wait for the disk (synchronous=FULL) commits them all. A bulk
// import's held acceptances run here too, in turns (heldTurn.ts).
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { heldAcceptance } from './heldTurn.js';
import { takenKeys } from './takenKeys.js';
import { keptPkey } from '../sqlite/database.js';
import { unflatten, type AcceptRow, type CloseRequest, type CommitReply, type CommitRequest, type CommitWorkerData, type Committed } from './commitMessages.js';

const port = parentPort!;
const { file, busyTimeoutMs, insertSql, recordSql, existingSql, sendSql, pragmas } = workerData as CommitWorkerData;
// No busy handler: SQLite's sleeps grow to 100 ms between tries and miss the short gaps a bulk
// job leaves between its turns; a busy lock is tried again every millisecond instead.
const db = new Database(file, { timeout: 0 });
const nap = new Int32Array(new SharedArrayBuffer(4));
for (const pragma of pragmas) db.pragma(pragma);
const insert = db.prepare<[string, string, number, string | null, number, number, number]>(insertSql);
const taken = takenKeys(db);
const keep = db.prepare<[string, string, number, string]>(recordSql);
const existing = db.prepare<[string, string, number], string>(existingSql).pluck();
const send = db.prepare<[string, number, number]>(sendSql);
const commit = db.transaction((rows: AcceptRow[], now: number): Committed[] =>
  rows.map((r) => {
    if (taken(r)) return null;
    if (insert.run(r.source, r.partner, r.post_id, keptPkey(r), r.created_at_ms, now, now).changes === 1) {
      keep.run(r.source, r.partner, r.post_id, r.body);
      send.run(r.pkey, now, now);
      return true;
    }
    return existing.get(r.source, r.partner, r.post_id) ?? null;
  }),
);

/** Runs a transaction, trying again every millisecond while another connection holds the lock, up to busyTimeoutMs. */
function whenFree<T>(transaction: () => T): T {
  const deadline = performance.now() + busyTimeoutMs;
  for (;;) {
    try {
      return transaction();
    } catch (err) {
      // A failed transaction was rolled back whole: trying it again is safe.
      if ((err as { code?: unknown }).code !== 'SQLITE_BUSY' || performance.now() >= deadline) throw err;
      Atomics.wait(nap, 0, 0, 1);
    }
  }
}

const hold = heldAcceptance(db, whenFree);

/** The code (SQLITE_BUSY, SQLITE_FULL, EACCES…) is what the owner decides by. */
function failure(id: number, err: unknown): CommitReply {
  const { code, message } = (err ?? {}) as { code?: unknown; message?: unknown };
  return { id, error: { code: typeof code === 'string' ? code : undefined, message: String(message) } };
}

port.on('message', (request: CommitRequest | CloseRequest) => {
  if ('close' in request) {
    db.close();
    port.close();
    return;
  }
  const { id, flat, now, held } = request;
  if (held !== undefined) {
    // Its turns leave this thread free between them: acceptances that arrive meanwhile commit there.
    hold(unflatten(flat), now, held.untilMs, held.receivedAt).then(
      (held) => port.postMessage({ id, held } satisfies CommitReply),
      (err: unknown) => port.postMessage(failure(id, err)),
    );
    return;
  }
  let reply: CommitReply;
  try {
    reply = { id, created: whenFree(() => commit.immediate(unflatten(flat), now)) };
  } catch (err) {
    reply = failure(id, err);
  }
  port.postMessage(reply);
});
