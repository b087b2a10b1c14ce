// Rows written as a Parquet file in the answer's form (the export columns and the WKB geometry,
// newest first, one row group): what a sidecar stores for Parquet answers to copy.
import type { DuckDBConnection } from '@duckdb/node-api';
import { sqlString } from './duckdb.js';
import { GEOMETRY_SQL, prepareGeometry } from './geoparquet.js';
import { ANSWER_ORDER, EXPORT_COLUMNS, type Bound } from './sql.js';

/** Rows per row group of an answer-form file: a part's (or a day's) rows in one. */
const PIECE_ROW_GROUP = 1_000_000;

/**
 * Writes the rows of `from` (a subquery of archive rows) as a Parquet file in the answer's form:
 * the export columns and the WKB geometry, newest first, one row group.
 */
export async function copyAnswerParquet(conn: DuckDBConnection, from: string, out: string, bound?: Omit<Bound, 'sql'>): Promise<void> {
  await prepareGeometry(conn);
  await conn.run(
    `COPY (SELECT ${EXPORT_COLUMNS.join(', ')}, ${GEOMETRY_SQL} FROM ${from} ${ANSWER_ORDER}) TO ${sqlString(out)} (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE ${PIECE_ROW_GROUP})`,
    bound?.values,
    bound?.types,
  );
}
