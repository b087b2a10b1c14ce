// Writes archive rows as one zstd Parquet file via DuckDB.
import { timestampValue, type DuckDBAppender } from '@duckdb/node-api';
import { sqlString, type DuckDb } from './duckdb.js';
import { checkedNames, COLUMNS, rowKeyOf, tableDdl, type ArchiveRow, type ColumnSpec, type Columns, type Kind } from './schema.js';

/**
 * Every part holds each pkey once (the last of `rows` wins) and is sorted newest first:
 * readers rely on both for hours with a single part.
 */
export async function writeParquet(db: DuckDb, input: readonly ArchiveRow[], file: string, table: Columns = COLUMNS): Promise<void> {
  const rows = new Map(input.map((r) => [r.pkey, r])).values();
  const append = rowAppender(table);
  await db.withConnection(async (conn) => {
    await conn.run(`CREATE TEMP TABLE "part" ${tableDdl(table)}`);
    const appender = await conn.createAppender('part');
    try {
      for (const row of rows) append(appender, row);
      appender.flushSync();
    } finally {
      appender.closeSync();
    }
    // Newest first, as answers go: a reader of a single part neither sorts nor de-duplicates it.
    await conn.run(
      `COPY (SELECT * FROM "part" ORDER BY created_at DESC, pkey DESC) TO ${sqlString(file)} (FORMAT parquet, COMPRESSION zstd)`,
    );
    await conn.run('DROP TABLE "part"');
  });
}

const APPEND: Record<Kind, (value: string) => string> = {
  text: (v) => `a.appendVarchar(${v})`,
  json: (v) => `a.appendVarchar(${v})`,
  // Into the TIMESTAMPTZ column as a plain timestamp: the same microseconds whatever the session's
  // time zone, written directly, where appendTimestampTZ makes a native value of each one (600,000
  // of them: 0.5–1.1 s against 0.13 s). See docs/performance.md, "Backfills".
  timestamp: (v) => `a.appendTimestamp(timestampValue(BigInt(${v}) * 1000n))`,
  double: (v) => `a.appendDouble(${v})`,
  bigint: (v) => `a.appendBigInt(BigInt(${v}))`,
};

function appendSql(c: ColumnSpec): string {
  const value = `r[${JSON.stringify(rowKeyOf(c))}]`;
  // A later column may be absent from rows made before it (undefined): null.
  return c.nullable ? `{ const v = ${value}; if (v === null || v === undefined) a.appendNull(); else ${APPEND[c.kind]('v')}; }` : `${APPEND[c.kind](value)};`;
}

/**
 * Appends a row's columns in the table's order, then ends the row. Compiled from the table into
 * straight-line code: a loop of a closure per column made flushes a quarter slower.
 */
function rowAppender(table: Columns = COLUMNS): (a: DuckDBAppender, row: object) => void {
  const body = `return (a, r) => { ${checkedNames(table).map(appendSql).join(' ')} a.endRow(); };`;
  return new Function('timestampValue', body)(timestampValue) as (a: DuckDBAppender, row: object) => void;
}
