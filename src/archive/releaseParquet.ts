// A window's reports as a release file: GeoParquet 1.1 as its best-practice guide has it for
// files people download and query in place: the answer's columns, the WKB geometry and a `bbox`
// covering column, sorted by time (oldest first, then pkey) so a time filter reads few row groups,
// zstd, row groups of 100,000 reports (50k–150k is the guide's range for point data).
import type { DuckDBConnection } from '@duckdb/node-api';
import { sqlString } from './duckdb.js';
import { BBOX_COVERING_SQL, GEOMETRY_SQL, geoCopyOption, prepareGeometry, type Bbox } from './geoparquet.js';
import { EXPORT_COLUMNS, type Bound } from './sql.js';

export const RELEASE_ROW_GROUP = 100_000;

export interface ReleaseFileFacts {
  reports: number;
  /** Of the reports' points; undefined for none. */
  bbox: Bbox | undefined;
  firstMs: number | undefined;
  lastMs: number | undefined;
  /** Reports by the boundary version they were tagged with. */
  taggedWith: Record<string, number>;
}

/** Writes the rows of `rows` (filtered, de-duplicated archive rows) to `out` as a release GeoParquet file. */
export async function copyReleaseParquet(conn: DuckDBConnection, rows: Bound, out: string): Promise<ReleaseFileFacts> {
  await prepareGeometry(conn);
  const facts = (
    await conn.runAndReadAll(
      `SELECT count(*)::BIGINT AS n, min(lng) AS x0, min(lat) AS y0, max(lng) AS x1, max(lat) AS y1, min(epoch_ms(created_at)) AS t0, max(epoch_ms(created_at)) AS t1 FROM ${rows.sql}`,
      rows.values,
      rows.types,
    )
  ).getRowObjectsJS()[0]!;
  const reports = Number(facts.n);
  const versions = (await conn.runAndReadAll(`SELECT boundary_version AS v, count(*)::BIGINT AS n FROM ${rows.sql} GROUP BY 1`, rows.values, rows.types)).getRowObjectsJS();
  const taggedWith = Object.fromEntries(versions.map((r) => [String(r.v), Number(r.n)]));
  const bbox: Bbox | undefined = reports > 0 ? [Number(facts.x0), Number(facts.y0), Number(facts.x1), Number(facts.y1)] : undefined;
  await conn.run(
    `COPY (SELECT ${EXPORT_COLUMNS.join(', ')}, ${GEOMETRY_SQL}, ${BBOX_COVERING_SQL} FROM ${rows.sql} ORDER BY created_at, pkey)
     TO ${sqlString(out)} (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE ${RELEASE_ROW_GROUP}, ${geoCopyOption(bbox, true)})`,
    rows.values,
    rows.types,
  );
  return { reports, bbox, firstMs: reports > 0 ? Number(facts.t0) : undefined, lastMs: reports > 0 ? Number(facts.t1) : undefined, taggedWith };
}
