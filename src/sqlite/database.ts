// The embedded backend's one SQLite database under DATA_DIR: the ingest ledger and the
// durable queue, shared by every process on that directory (serve, worker, scheduler, CLI).
// WAL with synchronous=FULL: a commit is on disk before it returns, and readers never block
// the writer. Writers from several processes take turns through SQLite's own lock.
import path from 'node:path';
import Database from 'better-sqlite3';
import { dependencyName, NewerSchemaError, UnavailableError, type Dependency } from '../shared/errors.js';
import { ensureDataDir, privateDatabaseFile } from '../shared/files.js';
import { pause } from '../shared/pause.js';
import { ALONE_GAP_MS } from './turns.js';
import { pkeyOf } from '../store/layout.js';

export type Db = Database.Database;

/**
 * Every connection to a database here (ledger, queue, event log, the commit thread): WAL with
 * synchronous=FULL, and the log truncated back to 1 MiB after each checkpoint, so a burst does
 * not leave a log of megabytes on a disk that may be nearly full. secure_delete: what a row held
 * is overwritten when it goes, on its page and on pages freed whole (a long text's), so a purged
 * retraction's fields leave the file and not only the table (no cost measured on a bulk import;
 * FAST would leave the freed pages' bytes).
 */
export const CONNECTION_PRAGMAS = ['journal_mode = WAL', 'synchronous = FULL', 'journal_size_limit = 1048576', 'secure_delete = ON'] as const;

/** How long a write waits for another process's transaction before it fails. */
const BUSY_TIMEOUT_MS = 2_000;

/** The index key of reports_created_day: a created_at's UTC day number (created_at_ms / DAY_MS). */
export const DAY_MS = 86_400_000;

/** Schema versions, applied in order; `PRAGMA user_version` says how many ran. Append only. */
export const MIGRATIONS: readonly string[] = [
  `CREATE TABLE reports (
     source TEXT NOT NULL,
     post_id INTEGER NOT NULL,
     pkey TEXT NOT NULL UNIQUE,
     created_at_ms INTEGER NOT NULL,
     -- The first accepted version (an IngestRecord as JSON): it alone is ever archived.
     record TEXT NOT NULL,
     state TEXT NOT NULL CHECK (state IN ('pending', 'archived')),
     accepted_at_ms INTEGER NOT NULL,
     -- When it was last sent to the queue: reconciliation re-sends what waits too long.
     enqueued_at_ms INTEGER NOT NULL,
     archived_at_ms INTEGER,
     PRIMARY KEY (source, post_id)
   ) WITHOUT ROWID;
   CREATE INDEX reports_pending ON reports (enqueued_at_ms) WHERE state = 'pending';
   CREATE INDEX reports_created ON reports (created_at_ms);
   CREATE TABLE queue (
     id INTEGER PRIMARY KEY AUTOINCREMENT,
     body TEXT NOT NULL,
     -- The report a message carries, so reconciliation can tell a queued report from a lost one.
     pkey TEXT,
     sent_at_ms INTEGER NOT NULL,
     visible_at_ms INTEGER NOT NULL,
     receive_count INTEGER NOT NULL DEFAULT 0,
     receipt TEXT UNIQUE
   );
   CREATE INDEX queue_visible ON queue (visible_at_ms);
   CREATE INDEX queue_pkey ON queue (pkey);
   CREATE TABLE dead_letters (
     id INTEGER PRIMARY KEY,
     body TEXT NOT NULL,
     pkey TEXT,
     sent_at_ms INTEGER NOT NULL,
     receive_count INTEGER NOT NULL,
     dead_lettered_at_ms INTEGER NOT NULL
   );
   CREATE INDEX dead_letters_pkey ON dead_letters (pkey);
   CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);`,
  // Retraction: a state beside the pipeline's pending/archived (a pending report may be
  // retracted too); purged once its parts were rewritten without the personal fields.
  `ALTER TABLE reports ADD COLUMN retracted_at_ms INTEGER;
   ALTER TABLE reports ADD COLUMN retracted_by TEXT;
   ALTER TABLE reports ADD COLUMN retraction_reason TEXT;
   ALTER TABLE reports ADD COLUMN purged_at_ms INTEGER;
   CREATE INDEX reports_retracted ON reports (created_at_ms) WHERE retracted_at_ms IS NOT NULL;
   CREATE INDEX reports_unpurged ON reports (created_at_ms) WHERE retracted_at_ms IS NOT NULL AND purged_at_ms IS NULL;
   -- API keys kept here, as SHA-256 digests only; API_KEYS in the environment still works.
   CREATE TABLE api_keys (
     digest TEXT PRIMARY KEY,
     name TEXT NOT NULL,
     created_at_ms INTEGER NOT NULL,
     revoked_at_ms INTEGER
   ) WITHOUT ROWID;
   CREATE INDEX api_keys_name ON api_keys (name);`,
  // post_ids are each partner's own: a report is (source, partner, post_id), the partner being the
  // name of the key that posted it ('' for none: imports without a partner, reports from before
  // keys had names). Rows keep their pkeys; their partner comes from the record they hold.
  `CREATE TABLE reports_by_partner (
     source TEXT NOT NULL,
     partner TEXT NOT NULL,
     post_id INTEGER NOT NULL,
     pkey TEXT NOT NULL UNIQUE,
     created_at_ms INTEGER NOT NULL,
     record TEXT NOT NULL,
     state TEXT NOT NULL CHECK (state IN ('pending', 'archived')),
     accepted_at_ms INTEGER NOT NULL,
     enqueued_at_ms INTEGER NOT NULL,
     archived_at_ms INTEGER,
     retracted_at_ms INTEGER,
     retracted_by TEXT,
     retraction_reason TEXT,
     purged_at_ms INTEGER,
     PRIMARY KEY (source, partner, post_id)
   ) WITHOUT ROWID;
   INSERT INTO reports_by_partner
     SELECT source, coalesce(json_extract(record, '$.partner'), ''), post_id, pkey, created_at_ms, record, state, accepted_at_ms,
            enqueued_at_ms, archived_at_ms, retracted_at_ms, retracted_by, retraction_reason, purged_at_ms
     FROM reports;
   DROP TABLE reports;
   ALTER TABLE reports_by_partner RENAME TO reports;
   CREATE INDEX reports_pending ON reports (enqueued_at_ms) WHERE state = 'pending';
   CREATE INDEX reports_created ON reports (created_at_ms);
   CREATE INDEX reports_retracted ON reports (created_at_ms) WHERE retracted_at_ms IS NOT NULL;
   CREATE INDEX reports_unpurged ON reports (created_at_ms) WHERE retracted_at_ms IS NOT NULL AND purged_at_ms IS NULL;`,
  // Reports by the UTC day of their created_at, not the instant: a report is added at the end of
  // its day's run of the index (rows arrive in key order), so a transaction of thousands rewrites
  // a page per day it touches. By the instant, each row of a backfill spread over a year landed on
  // a page of its own, and inserts slowed from 48,000 to 30,000 a second within a million rows.
  `DROP INDEX reports_created;
   CREATE INDEX reports_created_day ON reports (created_at_ms / ${DAY_MS});`,
  // A report's record (its JSON, about 280 bytes) only while it is pending: once archived the
  // parts hold it, and the ledger keeps what idempotency, retraction and a lookup need (the row
  // of reports). In a table of its own, deleted once archived: a shrinking update leaves its
  // page as sparse as before (SQLite rebalances pages after deletes, not after updates), where a
  // delete frees the pages for the next reports. Ledgers kept the trimmed JSON of every
  // archived report before: 60% of their bytes.
  `CREATE TABLE pending_records (
     source TEXT NOT NULL,
     partner TEXT NOT NULL,
     post_id INTEGER NOT NULL,
     record TEXT NOT NULL,
     PRIMARY KEY (source, partner, post_id)
   ) WITHOUT ROWID;
   INSERT INTO pending_records SELECT source, partner, post_id, record FROM reports WHERE state = 'pending';
   ALTER TABLE reports DROP COLUMN record;`,
  // A bulk import's records while it holds them (acceptHeld): a row per batch of thousands, the
  // records end to end as UTF-8 JSON, each report's row naming its batch and its bytes in it
  // (cleared once archived). A row per report in pending_records cost a B-tree insert and a
  // delete each, and a third of a bulk import's time in the ledger. A batch row goes once none of
  // its reports is held (they are archived, or reconciliation moved their records to
  // pending_records); its hold is where the pending index finds its reports.
  `CREATE TABLE held_batches (
     id INTEGER PRIMARY KEY,
     hold_until_ms INTEGER NOT NULL,
     records BLOB NOT NULL
   );
   ALTER TABLE reports ADD COLUMN held_batch INTEGER;
   ALTER TABLE reports ADD COLUMN held_offset INTEGER;
   ALTER TABLE reports ADD COLUMN held_length INTEGER;`,
  // A report's pkey derived from its identity, as pkeyOf (store/layout.ts) names it, neither
  // stored nor indexed: a row stores a key (kept_pkey) only where it differs, a report accepted
  // before post_ids were per partner keeping its `<source>-<post_id>`. A report is found by its
  // key through the primary key its key names, or the kept keys' index (reportByPkeySql), and a
  // new report whose key another keeps is refused before its insert (ledger/takenKeys.ts). The
  // key's bytes in each row and its unique index were some 55 bytes a report.
  `CREATE TABLE reports_keyed (
     source TEXT NOT NULL,
     partner TEXT NOT NULL,
     post_id INTEGER NOT NULL,
     kept_pkey TEXT,
     pkey TEXT NOT NULL GENERATED ALWAYS AS (${derivedPkeySql('kept_pkey')}) VIRTUAL,
     created_at_ms INTEGER NOT NULL,
     state TEXT NOT NULL CHECK (state IN ('pending', 'archived')),
     accepted_at_ms INTEGER NOT NULL,
     enqueued_at_ms INTEGER NOT NULL,
     archived_at_ms INTEGER,
     retracted_at_ms INTEGER,
     retracted_by TEXT,
     retraction_reason TEXT,
     purged_at_ms INTEGER,
     held_batch INTEGER,
     held_offset INTEGER,
     held_length INTEGER,
     PRIMARY KEY (source, partner, post_id)
   ) WITHOUT ROWID;
   INSERT INTO reports_keyed (source, partner, post_id, kept_pkey, created_at_ms, state, accepted_at_ms, enqueued_at_ms, archived_at_ms,
                              retracted_at_ms, retracted_by, retraction_reason, purged_at_ms, held_batch, held_offset, held_length)
     SELECT source, partner, post_id, nullif(pkey, ${derivedPkeySql('NULL')}), created_at_ms, state, accepted_at_ms, enqueued_at_ms, archived_at_ms,
            retracted_at_ms, retracted_by, retraction_reason, purged_at_ms, held_batch, held_offset, held_length
     FROM reports;
   DROP TABLE reports;
   ALTER TABLE reports_keyed RENAME TO reports;
   CREATE UNIQUE INDEX reports_kept_pkey ON reports (kept_pkey) WHERE kept_pkey IS NOT NULL;
   CREATE INDEX reports_pending ON reports (enqueued_at_ms) WHERE state = 'pending';
   CREATE INDEX reports_retracted ON reports (created_at_ms) WHERE retracted_at_ms IS NOT NULL;
   CREATE INDEX reports_unpurged ON reports (created_at_ms) WHERE retracted_at_ms IS NOT NULL AND purged_at_ms IS NULL;
   CREATE INDEX reports_created_day ON reports (created_at_ms / ${DAY_MS});`,
  // A ledger that an earlier build of the migration above left with a unique index of the derived
  // pkey and none of the kept keys: every lookup by key, and every acceptance's check, would scan
  // the table. The kept keys' index is what they use; the derived pkey's is not needed.
  `DROP INDEX IF EXISTS reports_pkey;
   CREATE UNIQUE INDEX IF NOT EXISTS reports_kept_pkey ON reports (kept_pkey) WHERE kept_pkey IS NOT NULL;`,
];

/** A row's pkey in SQL: `kept`, else pkeyOf(source, post_id, partner) of its columns. */
function derivedPkeySql(kept: string): string {
  return `coalesce(${kept}, source || '-' || iif(partner = '', '', partner || '-') || CAST(post_id AS TEXT))`;
}

/** The trailing post_id of a pkey (SQL `key`) starts after this many characters. */
const digitsAt = (key: string) => `length(rtrim(${key}, '0123456789'))`;

/**
 * SQL true of the row of reports (as `table`) whose pkey is `key` (SQL: a parameter or a column):
 * the row its key names by its primary key (source, the partner if any, the post_id, as pkeyOf
 * joins them; a name may hold '-', the post_id is the trailing digits), unless that row keeps
 * another key; or the row that keeps it. Each is one lookup (SQLite's multi-index OR).
 */
export function reportByPkeySql(key: string, table = 'reports'): string {
  const source = `substr(${key}, 1, instr(${key}, '-') - 1)`;
  const partner = `substr(${key}, instr(${key}, '-') + 1, max(0, ${digitsAt(key)} - instr(${key}, '-') - 1))`;
  const postId = `CAST(substr(${key}, ${digitsAt(key)} + 1) AS INTEGER)`;
  const t = `${table}.`;
  return `((${t}source = ${source} AND ${t}partner = ${partner} AND ${t}post_id = ${postId} AND ${t}kept_pkey IS NULL AND ${t}pkey = ${key}) OR ${t}kept_pkey = ${key})`;
}

/**
 * What a new row stores of its pkey (kept_pkey): nothing when its identity names it, as the
 * table derives it (see the migrations); the key itself when it does not.
 */
export function keptPkey(row: { source: string; partner: string; post_id: number; pkey: string }): string | null {
  return row.pkey === pkeyOf(row.source, row.post_id, row.partner === '' ? undefined : row.partner) ? null : row.pkey;
}

/** Opens (creating if needed) and migrates the database; disk errors become UnavailableError. */
export function openLedgerDb(dataDir: string): Db {
  const file = path.join(dataDir, 'ledger.sqlite');
  return guardSync(() => {
    ensureDataDir(dataDir);
    privateDatabaseFile(file);
    const db = new Database(file, { timeout: BUSY_TIMEOUT_MS });
    try {
      // Set before the first table exists (a no-op on an older file): pages freed by a bulk
      // job's archived records go back to the disk (reclaimFreePages), not only to later rows.
      db.pragma('auto_vacuum = INCREMENTAL');
      for (const pragma of CONNECTION_PRAGMAS) db.pragma(pragma);
      db.pragma('foreign_keys = ON');
      migrate(db);
      return db;
    } catch (err) {
      db.close();
      throw err;
    }
  });
}

/**
 * How long a process opening a database waits for another's migration (or long write) before
 * applying its own: it serves nothing yet, and a migration may take seconds on a large file.
 */
const MIGRATION_BUSY_TIMEOUT_MS = 60_000;

/**
 * Applies the `migrations` not yet applied (PRAGMA user_version counts them), once however many
 * processes open the file together. A file already up to date takes no write lock.
 */
export function migrate(db: Db, migrations: readonly string[] = MIGRATIONS, what: Dependency = 'ledger'): void {
  if (upToDate(db, migrations, what)) return;
  const own = db.pragma('busy_timeout', { simple: true }) as number;
  db.pragma(`busy_timeout = ${MIGRATION_BUSY_TIMEOUT_MS}`);
  try {
    // IMMEDIATE: two processes starting together migrate once, one after the other.
    db.transaction(() => {
      if (upToDate(db, migrations, what)) return;
      const version = db.pragma('user_version', { simple: true }) as number;
      for (let v = version; v < migrations.length; v++) db.exec(migrations[v]!);
      db.pragma(`user_version = ${migrations.length}`);
    }).immediate();
  } finally {
    db.pragma(`busy_timeout = ${own}`);
  }
}

/** Whether every migration ran; a file a later release migrated further is refused, not used. */
function upToDate(db: Db, migrations: readonly string[], what: Dependency): boolean {
  const version = db.pragma('user_version', { simple: true }) as number;
  if (version > migrations.length) {
    throw new NewerSchemaError(what, `the ${dependencyName(what)} (${path.basename(db.name)}) has schema ${version}, newer than this build's ${migrations.length}: a later release wrote it`);
  }
  return version === migrations.length;
}

/**
 * Runs `fn` (one transaction of the caller's) with synchronous=NORMAL: its commit is not
 * fsynced on the event loop, only ordered in the write-ahead log. It becomes durable with the next
 * FULL commit on the database (every acceptance is one, and an fsync of the log keeps all that
 * came before it) or the next checkpoint; a power cut may undo it alone, never a later commit.
 * Only for writes that may be lost that way (queue receives and deletes: delivery is at least once).
 */
export function withoutFsync<T>(db: Db, fn: () => T): T {
  db.pragma('synchronous = NORMAL');
  try {
    return guardSync(fn);
  } finally {
    db.pragma('synchronous = FULL');
  }
}

/** Free pages moved to the end of the file and cut off per transaction (4 MiB at 4 KiB pages). */
const RECLAIM_PAGES = 1_024;

/**
 * Gives a database's free pages back to the disk, a few at a time with the write lock free
 * between them (a long incremental vacuum would hold off acceptances): after a bulk job freed
 * more than live writes soon reuse. A file created before auto_vacuum was set keeps its pages
 * (VACUUM converts it). Returns the pages given back.
 */
export async function reclaimFreePages(db: Db): Promise<number> {
  if ((db.pragma('auto_vacuum', { simple: true }) as number) !== 2) return 0;
  let given = 0;
  try {
    for (;;) {
      const free = guardSync(() => db.pragma('freelist_count', { simple: true }) as number);
      if (free === 0) return given;
      guardSync(() => db.pragma(`incremental_vacuum(${RECLAIM_PAGES})`));
      given += Math.min(free, RECLAIM_PAGES);
      await pause(ALONE_GAP_MS);
    }
  } catch (err) {
    // Another writer kept the lock: what is left stays free for later rows.
    if (isBusy(err)) return given;
    throw err;
  }
}

/** A try's own wait for another connection's write lock, on the thread (SQLite's busy handler sleeps it). */
const TRY_BUSY_MS = 2;
/** Between tries, on a timer: the event loop serves meanwhile. */
const RETRY_PAUSE_MS = 2;

/**
 * Runs `fn` (one write transaction) on the event loop without sleeping the loop while another
 * process holds the write lock (a worker's flush, a purge): SQLite's busy handler sleeps the
 * calling thread for as long as the connection's busy timeout, so an API request's write (a
 * retraction) held every other request up to 2 s. Each try waits on the thread at most
 * TRY_BUSY_MS, then again after a pause on a timer, for BUSY_TIMEOUT_MS in all; then it fails
 * as a busy database does (UnavailableError).
 */
export async function writeOnLoop<T>(db: Db, fn: () => T, what: Dependency = 'ledger'): Promise<T> {
  const started = Date.now();
  for (;;) {
    const own = db.pragma('busy_timeout', { simple: true }) as number;
    db.pragma(`busy_timeout = ${TRY_BUSY_MS}`);
    try {
      return guardSync(fn, what);
    } catch (err) {
      if (!isBusy(err) || Date.now() - started >= BUSY_TIMEOUT_MS) throw err;
    } finally {
      db.pragma(`busy_timeout = ${own}`);
    }
    await pause(RETRY_PAUSE_MS);
  }
}

/**
 * SQLite errors a client cannot cause (locked, full, read-only, corrupt, I/O) as the named
 * dependency's: the ledger's file, the embedded queue's or the event log's.
 */
export function guardSync<T>(fn: () => T, what: Dependency = 'ledger'): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof UnavailableError) throw err;
    if (isDatabaseError(err)) throw new UnavailableError(what, `${dependencyName(what)} unavailable (${(err as { code?: string }).code ?? 'error'})`, { cause: err });
    throw err;
  }
}

/** Whether a failure is another connection's write lock held past the busy timeout (guarded or not). */
export function isBusy(err: unknown): boolean {
  const cause = err instanceof UnavailableError ? err.cause : err;
  const code = (cause as { code?: unknown })?.code;
  return code === 'SQLITE_BUSY' || code === 'SQLITE_BUSY_SNAPSHOT' || code === 'SQLITE_LOCKED';
}

function isDatabaseError(err: unknown): boolean {
  if (err instanceof Database.SqliteError) return true;
  const code = (err as { code?: unknown })?.code;
  return typeof code === 'string' && /^(SQLITE_|E[A-Z]+$)/.test(code);
}
