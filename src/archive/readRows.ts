// Reads archive rows back from Parquet parts, de-duplicated the way the
// archive query does it (first received wins, then boundary version).
import { LIST, VARCHAR, listValue } from '@duckdb/node-api';
import type { DuckDb } from './duckdb.js';
import { sqlString } from './duckdb.js';
import { COLUMNS, laterColumns, partColumns, rowKeyOf, sqlTypeOf, tombstoneSql, type ArchiveRow, type Columns } from './schema.js';

/**
 * Which copy of a duplicated pkey wins: the one in the newest part (part
 * names are ULIDs, and cached copies keep the name as their suffix), so a
 * reprocessed hour answers with its new tags even before the old parts go.
 */
export const DEDUPE_WINDOW = `row_number() OVER (PARTITION BY pkey ORDER BY regexp_extract(filename, 'part-[0-9A-Z]{26}') DESC) = 1`;

/**
 * Parts as one relation with every column parts are written with now. Parts written before a
 * later column existed (schema.ts) lack it: the files are read by name (union_by_name), and an
 * empty relation that has the later columns makes them null there, even when no file has them.
 * `files`: a SQL list (a literal or a bound parameter). Hive partitioning is off: the store's
 * paths (year=…/hour=…) would otherwise add their values as columns.
 */
export function partsSql(files: string, withFilename = false, table: Columns = COLUMNS): string {
  const later = laterColumns(table).map((c) => `NULL::${sqlTypeOf(c)} AS ${c.name}`);
  const options = `${withFilename ? 'filename = true, ' : ''}hive_partitioning = false, union_by_name = true`;
  const read = `SELECT * FROM read_parquet(${files}, ${options})`;
  if (later.length === 0) return `(${read})`;
  return `(${read} UNION ALL BY NAME SELECT ${later.join(', ')}${withFilename ? ', NULL::VARCHAR AS filename' : ''} WHERE false)`;
}

/**
 * The de-duplicating read the rewriters of parts share (compaction, reprocessing): every column
 * parts are written with now, a merged file carrying none of the store's partition values.
 */
export function dedupedPartsSql(files: readonly string[], table: Columns = COLUMNS): string {
  const list = `[${files.map(sqlString).join(', ')}]`;
  // One part holds each pkey once (its writers guarantee it): nothing to de-duplicate.
  if (files.length === 1) return `SELECT ${partColumns(table).join(', ')} FROM ${partsSql(list, false, table)}`;
  return `SELECT ${partColumns(table).join(', ')} FROM ${partsSql(list, true, table)} QUALIFY ${DEDUPE_WINDOW}`;
}

/** Each column as its row field: timestamps as epoch ms, JSON as its text. */
const readSql = (table: Columns) =>
  table
    .map((c) => (c.kind === 'timestamp' ? `epoch_ms(${c.name}) AS ${rowKeyOf(c)}` : c.kind === 'json' ? `${c.name}::VARCHAR AS ${c.name}` : c.name))
    .join(', ');

/** The rows of `files`, de-duplicated; `only`: just these pkeys' (a few of many: verify's repair). */
export async function readRows(db: DuckDb, files: readonly string[], table: Columns = COLUMNS, only?: readonly string[]): Promise<ArchiveRow[]> {
  if (files.length === 0 || only?.length === 0) return [];
  // DuckDB gives BIGINTs (epoch_ms too) as bigint: rows hold numbers.
  const numbers = table.filter((c) => c.kind === 'timestamp' || c.kind === 'bigint').map(rowKeyOf);
  return db.withConnection(async (conn) => {
    const where = only ? 'WHERE list_contains($only, pkey)' : '';
    const sql = `SELECT ${readSql(table)} FROM (${dedupedPartsSql(files, table)}) ${where} ORDER BY created_at, pkey`;
    const reader = only ? await conn.runAndReadAll(sql, { only: listValue([...only]) }, { only: LIST(VARCHAR) }) : await conn.runAndReadAll(sql);
    return reader.getRowObjectsJS().map((r) => {
      const row: Record<string, unknown> = { ...r };
      for (const key of numbers) if (row[key] !== null) row[key] = Number(row[key]);
      return row as unknown as ArchiveRow;
    });
  });
}

/**
 * Rewrites parts into one de-duplicated Parquet file, newest first (as every part is); the
 * `retracted` pkeys as tombstones (their personal fields dropped).
 */
export async function mergeParts(db: DuckDb, files: readonly string[], out: string, retracted: readonly string[] = []): Promise<number> {
  const select = retracted.length > 0 ? tombstoneSql(`pkey IN (${retracted.map(sqlString).join(', ')})`) : '*';
  return db.withConnection(async (conn) => {
    await conn.run(
      `COPY (SELECT ${select} FROM (${dedupedPartsSql(files)}) ORDER BY created_at DESC, pkey DESC)
       TO ${sqlString(out)} (FORMAT parquet, COMPRESSION zstd)`,
    );
    const reader = await conn.runAndReadAll(`SELECT count(*)::INTEGER AS n FROM read_parquet(${sqlString(out)})`);
    return Number(reader.getRowObjectsJS()[0]?.n ?? 0);
  });
}
