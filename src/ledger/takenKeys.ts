// Whether a new report's pkey is another report's. A row's pkey is derived from its identity and
// not indexed (see the migrations in src/sqlite/database.ts): the primary key refuses a repeat of
// a report, and this check, run before the insert in its transaction, a key taken otherwise. A
// check in the insert itself (INSERT … SELECT … WHERE NOT EXISTS) made each insert much slower.
import type Database from 'better-sqlite3';
import { keptPkey } from '../sqlite/database.js';
import { parsePkey } from '../store/layout.js';

/** What the check reads of a new row. */
export interface KeyedRow {
  source: string;
  /** '' for none. */
  partner: string;
  post_id: number;
  pkey: string;
}

/**
 * The check over `db`: true when another report keeps the row's key (one accepted before
 * post_ids were per partner), or, for a row that keeps a key of that form, when the report its
 * key names exists. A row's own earlier version is not another report: its repeat is left to the
 * insert's conflict.
 */
export function takenKeys(db: Database.Database): (row: KeyedRow) => boolean {
  const keeper = db.prepare<[string], { source: string; partner: string; post_id: number }>('SELECT source, partner, post_id FROM reports WHERE kept_pkey = ?');
  const named = db.prepare<[string, string, number]>('SELECT 1 FROM reports WHERE source = ? AND partner = ? AND post_id = ? AND kept_pkey IS NULL').pluck();
  return (row) => {
    const holder = keeper.get(row.pkey);
    if (holder && (holder.source !== row.source || holder.partner !== row.partner || holder.post_id !== row.post_id)) return true;
    if (keptPkey(row) === null) return false;
    const parts = parsePkey(row.pkey);
    return parts !== undefined && named.get(parts.source, parts.partner ?? '', parts.post_id) !== undefined;
  };
}
