// Writes archive rows as one zstd Parquet file via DuckDB.
import { timestampTZValue, type DuckDBAppender } from '@duckdb/node-api';
import { sqlString, type DuckDb } from '../duckdb.js';
import { ARCHIVE_TABLE_DDL, type ArchiveRow } from './row.js';

/**
 * Every part holds each pkey once (the last of `rows` wins) and is sorted newest first:
 * readers rely on both for hours with a single part.
 */
export async function writeParquet(db: DuckDb, input: readonly ArchiveRow[], file: string): Promise<void> {
  const rows = new Map(input.map((r) => [r.pkey, r])).values();
  await db.withConnection(async (conn) => {
    await conn.run(`CREATE TEMP TABLE "part" ${ARCHIVE_TABLE_DDL}`);
    const appender = await conn.createAppender('part');
    try {
      for (const row of rows) appendRow(appender, row);
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

function appendRow(a: DuckDBAppender, r: ArchiveRow): void {
  a.appendVarchar(r.pkey);
  a.appendTimestampTZ(timestampTZValue(BigInt(r.created_at_ms) * 1000n));
  a.appendVarchar(r.source);
  a.appendVarchar(r.status);
  appendNullable(a, r.url);
  appendNullable(a, r.image_url);
  a.appendVarchar(r.disaster_type);
  appendNullable(a, r.report_data);
  appendNullable(a, r.instance_region_code);
  appendNullable(a, r.local_area_id);
  a.appendVarchar(r.title);
  a.appendVarchar(r.text);
  a.appendDouble(r.lng);
  a.appendDouble(r.lat);
  a.appendBigInt(BigInt(r.post_id));
  a.appendVarchar(r.partner_city);
  a.appendTimestampTZ(timestampTZValue(BigInt(r.received_at_ms) * 1000n));
  a.appendVarchar(r.boundary_version);
  appendNullable(a, r.key_name ?? null);
  a.endRow();
}

function appendNullable(a: DuckDBAppender, value: string | null): void {
  if (value === null) a.appendNull();
  else a.appendVarchar(value);
}
