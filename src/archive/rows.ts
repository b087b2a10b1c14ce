// Reads archive rows back from Parquet parts, de-duplicated the way the
// archive query does it (first received wins, then boundary version).
import type { DuckDb } from '../duckdb.js';
import { sqlString } from '../duckdb.js';
import { PART_COLUMNS, type ArchiveRow } from './row.js';
import { TOMBSTONE } from './sql.js';

/**
 * Which copy of a duplicated pkey wins: the one in the newest part (part
 * names are ULIDs, and cached copies keep the name as their suffix), so a
 * reprocessed hour answers with its new tags even before the old parts go.
 */
export const DEDUPE_WINDOW = `row_number() OVER (PARTITION BY pkey ORDER BY regexp_extract(filename, 'part-[0-9A-Z]{26}') DESC) = 1`;

/**
 * The de-duplicating read the rewriters of parts share (compaction, reprocessing): every column
 * parts are written with now. Hive partitioning is off: the store's paths (year=…/hour=…) would
 * otherwise add their values as columns, and a merged file would carry them, contradicting its
 * own path. Parts written before `key_name` existed lack it: the files are read by name
 * (union_by_name), and an empty relation that has it makes it null there, even when no file
 * has it. Answers never read it (see LATER_COLUMNS), so this costs the rewriters alone.
 */
export function dedupedPartsSql(files: readonly string[]): string {
  const list = `[${files.map(sqlString).join(', ')}]`;
  return `SELECT ${PART_COLUMNS.join(', ')}
    FROM (SELECT * FROM read_parquet(${list}, filename = true, hive_partitioning = false, union_by_name = true)
          UNION ALL BY NAME SELECT NULL::VARCHAR AS key_name WHERE false)
    QUALIFY ${DEDUPE_WINDOW}`;
}

export async function readRows(db: DuckDb, files: readonly string[]): Promise<ArchiveRow[]> {
  if (files.length === 0) return [];
  return db.withConnection(async (conn) => {
    const reader = await conn.runAndReadAll(
      `SELECT pkey, epoch_ms(created_at) AS created_at_ms, source, status, url, image_url, disaster_type,
              report_data::VARCHAR AS report_data, instance_region_code, local_area_id, title, text, lng, lat,
              post_id, partner_city, epoch_ms(received_at) AS received_at_ms, boundary_version, key_name
       FROM (${dedupedPartsSql(files)}) ORDER BY created_at, pkey`,
    );
    return reader.getRowObjectsJS().map((r) => ({
      ...(r as unknown as ArchiveRow),
      created_at_ms: Number(r.created_at_ms),
      received_at_ms: Number(r.received_at_ms),
      post_id: Number(r.post_id),
    }));
  });
}

/**
 * Rewrites parts into one de-duplicated Parquet file, newest first (as every part is); the
 * `retracted` pkeys as tombstones (their personal fields dropped).
 */
export async function mergeParts(db: DuckDb, files: readonly string[], out: string, retracted: readonly string[] = []): Promise<number> {
  const select = retracted.length > 0 ? TOMBSTONE(`pkey IN (${retracted.map(sqlString).join(', ')})`) : '*';
  return db.withConnection(async (conn) => {
    await conn.run(
      `COPY (SELECT ${select} FROM (${dedupedPartsSql(files)}) ORDER BY created_at DESC, pkey DESC)
       TO ${sqlString(out)} (FORMAT parquet, COMPRESSION zstd)`,
    );
    const reader = await conn.runAndReadAll(`SELECT count(*)::INTEGER AS n FROM read_parquet(${sqlString(out)})`);
    return Number(reader.getRowObjectsJS()[0]?.n ?? 0);
  });
}
