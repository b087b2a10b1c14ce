// Upgrade of a DATA_DIR written by the release before the SQLite ledger: its ingest
// bookkeeping was files in the store (ingest/keys/…, ingest/pending/…) made durable by a
// write-ahead journal (+journal/*.wal). On first start they move into the ledger in one
// transaction (accepted reports stay accepted once; pending ones are queued again), then the
// files go. Running it twice changes nothing. That release's records name no partner: it had one
// key, or keys without names, so its reports go to the one key configured now (the partner whose
// retries they answer), or to no partner when there are several.
import fs from 'node:fs';
import path from 'node:path';
import { crc32 } from 'node:zlib';
import { IDEMPOTENCY_PREFIX, PENDING_PREFIX } from '../store/layout.js';
import type { SqliteQueue } from '../queue/sqliteQueue.js';
import { guardSync, keptPkey, type Db } from '../sqlite/database.js';
import { takenKeys } from './takenKeys.js';
import { parseRecord, type IngestRecord, type QueueEnvelope } from './ledger.js';

const JOURNAL_DIR = '+journal';

export interface LegacyImport {
  accepted: number;
  pending: number;
  unreadable: number;
  /** The partner the records went to; none: the operators'. */
  owner?: string;
}

/**
 * Imports the old layout under `storeRoot` if there is one; undefined when there is none.
 * `owner`: the name of the partner the records without one go to (see above).
 */
export function importLegacyLayout(storeRoot: string, db: Db, queue: SqliteQueue, owner?: string, now = Date.now()): LegacyImport | undefined {
  const dirs = [IDEMPOTENCY_PREFIX, PENDING_PREFIX, JOURNAL_DIR].map((d) => path.join(storeRoot, ...d.split('/').filter(Boolean)));
  const journalDir = dirs[2]!;
  if (!dirs.some((d) => fs.existsSync(d))) return undefined;

  // What the journal holds for each object, newest entry last: it repairs files a power loss
  // left missing or torn.
  const journaled = new Map<string, Buffer>();
  for (const name of listFiles(journalDir).filter((f) => f.endsWith('.wal')).sort()) {
    for (const entry of readJournal(fs.readFileSync(name))) journaled.set(entry.key, entry.body);
  }
  const read = (prefix: string) => {
    const out = new Map<string, IngestRecord | undefined>();
    const dir = path.join(storeRoot, ...prefix.split('/').filter(Boolean));
    for (const file of listFiles(dir).filter((f) => f.endsWith('.json'))) {
      const key = prefix + path.relative(dir, file).split(path.sep).join('/');
      out.set(key.slice(prefix.length), parseRecord(fs.readFileSync(file)) ?? recordIn(journaled.get(key)));
    }
    for (const [key, body] of journaled) {
      if (key.startsWith(prefix) && !out.has(key.slice(prefix.length))) out.set(key.slice(prefix.length), recordIn(body));
    }
    return out;
  };
  const keys = read(IDEMPOTENCY_PREFIX);
  const markers = read(PENDING_PREFIX);

  const insert = db.prepare(
    `INSERT INTO reports (source, partner, post_id, kept_pkey, created_at_ms, state, accepted_at_ms, enqueued_at_ms, archived_at_ms)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
  );
  const taken = takenKeys(db);
  // Kept while pending only, as the ledger does (see the migrations).
  const keep = db.prepare('INSERT INTO pending_records (source, partner, post_id, record) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING');
  const result: LegacyImport = { accepted: 0, pending: 0, unreadable: 0, ...(owner !== undefined && { owner }) };
  guardSync(() =>
    db
      .transaction(() => {
        for (const id of new Set([...keys.keys(), ...markers.keys()])) {
          // The key holds the first version; a marker alone (its key lost in a crash) holds it too.
          const record = keys.get(id) ?? markers.get(id);
          if (!record) {
            // A marker torn while its acceptance was under way: that request got no answer.
            result.unreadable += 1;
            continue;
          }
          const pending = markers.get(id) !== undefined;
          const partner = record.partner ?? owner;
          const owned: IngestRecord = partner === undefined ? record : { ...record, partner };
          const row = { ...owned, partner: partner ?? '' };
          const created = !taken(row) && insert.run(
            record.source, row.partner, record.post_id, keptPkey(row), Date.parse(record.report.created_at),
            pending ? 'pending' : 'archived', Date.parse(record.received_at) || now, now, pending ? null : now,
          ).changes === 1;
          result.accepted += 1;
          if (pending) {
            if (created) keep.run(record.source, row.partner, record.post_id, JSON.stringify(owned));
            result.pending += 1;
            if (created) queue.insert(JSON.stringify({ ...owned, redelivery: true } satisfies QueueEnvelope), record.pkey, now);
          }
        }
        db.prepare("INSERT INTO meta (name, value) VALUES ('legacy_import', ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value").run(
          JSON.stringify({ ...result, at: new Date(now).toISOString() }),
        );
      })
      .immediate(),
  );
  // Only once the ledger holds them: a crash before this line imports them again, to no effect.
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  return result;
}

function recordIn(body: Buffer | undefined): IngestRecord | undefined {
  return body ? parseRecord(body) : undefined;
}

function listFiles(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return (fs.readdirSync(dir, { recursive: true, withFileTypes: true }) as fs.Dirent[])
    .filter((e) => e.isFile() && !e.name.includes('.tmp-'))
    .map((e) => path.join(e.parentPath, e.name));
}

/** The old journal's entries (a JSON header line, the bytes, a newline), up to the first torn one. */
function* readJournal(data: Buffer): Iterable<{ key: string; body: Buffer }> {
  let off = 0;
  while (off < data.length) {
    const eol = data.indexOf(0x0a, off);
    if (eol < 0) return;
    let header: { k?: unknown; n?: unknown; c?: unknown };
    try {
      header = JSON.parse(data.toString('utf8', off, eol)) as typeof header;
    } catch {
      return;
    }
    const { k, n, c } = header;
    if (typeof k !== 'string' || typeof n !== 'number' || typeof c !== 'number') return;
    const end = eol + 1 + n;
    if (end + 1 > data.length || data[end] !== 0x0a) return;
    const body = data.subarray(eol + 1, end);
    if (crc32(body) !== c) return;
    yield { key: k, body };
    off = end + 1;
  }
}
