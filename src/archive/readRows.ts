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

/** DuckDB gives BIGINTs (epoch_ms too) as bigint: rows hold numbers. */
function rowOf(r: Record<string, unknown>, numbers: readonly string[]): ArchiveRow {
  const row: Record<string, unknown> = { ...r };
  for (const key of numbers) if (row[key] !== null) row[key] = Number(row[key]);
  return row as unknown as ArchiveRow;
}

const numberKeys = (table: Columns) => table.filter((c) => c.kind === 'timestamp' || c.kind === 'bigint').map(rowKeyOf);

export async function readRows(db: DuckDb, files: readonly string[], table: Columns = COLUMNS): Promise<ArchiveRow[]> {
  if (files.length === 0) return [];
  const numbers = numberKeys(table);
  return db.withConnection(async (conn) => {
    const reader = await conn.runAndReadAll(`SELECT ${readSql(table)} FROM (${dedupedPartsSql(files, table)}) ORDER BY created_at, pkey`);
    return reader.getRowObjectsJS().map((r) => rowOf(r, numbers));
  });
}

/**
 * The rows of `pkeys` (a few of many: verify's repair) the parts hold, de-duplicated, handed to
 * `each` about `batch` at a time as the query streams them, each batch awaited before the next
 * is read: the files are read once, and no more than a batch is held.
 */
export async function eachRowOf(db: DuckDb, files: readonly string[], pkeys: readonly string[], batch: number, each: (rows: ArchiveRow[]) => Promise<void>): Promise<void> {
  if (files.length === 0 || pkeys.length === 0) return;
  const numbers = numberKeys(COLUMNS);
  await db.withConnection(async (conn) => {
    // A semi-join on the list's rows (a hash join): list_contains for each row took 96 s for a
    // month's 212,000 (each row against every pkey).
    const result = await conn.stream(
      `SELECT ${readSql(COLUMNS)} FROM (${dedupedPartsSql(files)}) WHERE pkey IN (SELECT unnest($pkeys))`,
      { pkeys: listValue([...pkeys]) },
      { pkeys: LIST(VARCHAR) },
    );
    const names = result.deduplicatedColumnNames();
    let rows: ArchiveRow[] = [];
    for await (const chunk of result) {
      for (const r of chunk.getRowObjects(names)) rows.push(rowOf(r, numbers));
      if (rows.length < batch) continue;
      await each(rows);
      rows = [];
    }
    if (rows.length > 0) await each(rows);
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
