// Writes archive rows as one zstd Parquet file via DuckDB.
import { timestampTZValue, type DuckDBAppender } from '@duckdb/node-api';
import { sqlString, type DuckDb } from '../duckdb.js';
import { COLUMNS, rowKeyOf, tableDdl, type ArchiveRow, type ColumnSpec, type Columns, type Kind } from './schema.js';

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

type Append = (a: DuckDBAppender, value: unknown) => void;

const APPEND: Record<Kind, Append> = {
  text: (a, v) => a.appendVarchar(v as string),
  json: (a, v) => a.appendVarchar(v as string),
  timestamp: (a, v) => a.appendTimestampTZ(timestampTZValue(BigInt(v as number) * 1000n)),
  double: (a, v) => a.appendDouble(v as number),
  bigint: (a, v) => a.appendBigInt(BigInt(v as number)),
};

function appenderOf(c: ColumnSpec): (a: DuckDBAppender, row: Record<string, unknown>) => void {
  const key = rowKeyOf(c);
  const append = APPEND[c.kind];
  if (!c.nullable) return (a, row) => append(a, row[key]);
  // A later column may be absent from rows made before it (undefined): null.
  return (a, row) => {
    const value = row[key];
    if (value === null || value === undefined) a.appendNull();
    else append(a, value);
  };
}

/** Appends a row's columns in the table's order, then ends the row. */
export function rowAppender(table: Columns = COLUMNS): (a: DuckDBAppender, row: object) => void {
  const steps = table.map(appenderOf);
  return (a, row) => {
    for (const step of steps) step(a, row as Record<string, unknown>);
    a.endRow();
  };
}
