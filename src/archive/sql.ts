// The SQL a window runs over its parts: the filtered, de-duplicated rows (with bound
// parameters), and how each report is serialised in each text shape.
import { DOUBLE, LIST, TIMESTAMPTZ, VARCHAR, listValue, timestampTZValue, type DuckDBType, type DuckDBValue } from '@duckdb/node-api';
import type { WindowQuery } from './query.js';
import { DEDUPE_WINDOW } from './rows.js';

/** How each report is serialized: a GeoJSON Feature, a TopoJSON Point geometry, or a CSV line. */
export type FeatureShape = 'geojson' | 'topojson' | 'csv';

export interface Bound {
  sql: string;
  values: Record<string, DuckDBValue>;
  types: Record<string, DuckDBType>;
}

export const micros = (ms: number) => timestampTZValue(BigInt(Math.trunc(ms)) * 1000n);

/**
 * The de-duplicated, filtered rows of some part files, as a SQL subquery with bound parameters.
 * `clean`: the files are single parts of distinct hours, or one compacted day, which hold each
 * pkey once (writers guarantee it, and a pkey lives in one hour), so there is nothing to
 * de-duplicate.
 */
export function filteredRows(files: readonly string[], query: WindowQuery, clean = false): Bound {
  // Every copy of a report shares its created_at, place and received_at, so those filters
  // can run before de-duplication (and reach the Parquet row groups); the tags may differ
  // between copies (reprocessing), so the admin filter runs after it.
  const where = ['created_at BETWEEN $start AND $end'];
  const after: string[] = [];
  const values: Record<string, DuckDBValue> = { files: listValue([...files]), start: micros(query.startMs), end: micros(query.endMs) };
  const types: Record<string, DuckDBType> = { files: LIST(VARCHAR), start: TIMESTAMPTZ, end: TIMESTAMPTZ };
  if (query.admin !== undefined) {
    after.push('instance_region_code = $admin');
    values.admin = query.admin;
    types.admin = VARCHAR;
  }
  if (query.bbox) {
    where.push('lng BETWEEN $minLng AND $maxLng AND lat BETWEEN $minLat AND $maxLat');
    [values.minLng, values.minLat, values.maxLng, values.maxLat] = query.bbox;
    Object.assign(types, { minLng: DOUBLE, minLat: DOUBLE, maxLng: DOUBLE, maxLat: DOUBLE });
  }
  if (query.pkey !== undefined) {
    where.push('pkey = $pkey');
    values.pkey = query.pkey;
    types.pkey = VARCHAR;
  }
  if (query.changed !== undefined) {
    where.push('list_contains($changed, pkey)');
    values.changed = listValue(query.changed.map((r) => r.pkey));
    types.changed = LIST(VARCHAR);
  }
  const receivedBefore = query.after?.receivedBeforeMs ?? query.receivedBeforeMs;
  if (receivedBefore !== undefined) {
    where.push('received_at <= $receivedBefore');
    values.receivedBefore = micros(receivedBefore);
    types.receivedBefore = TIMESTAMPTZ;
  }
  if (query.after) {
    where.push('(created_at < $afterCreated OR (created_at = $afterCreated AND pkey < $afterPkey))');
    values.afterCreated = micros(query.after.createdMs);
    values.afterPkey = query.after.pkey;
    types.afterCreated = TIMESTAMPTZ;
    types.afterPkey = VARCHAR;
  }
  // Retracted reports: those the ledger names (parts not yet purged) go by pkey, before
  // de-duplication; purged ones by status, after it (an older copy may still say confirmed).
  const hidden = (query.retracted ?? []).map((r) => r.pkey);
  if (hidden.length > 0) {
    values.retracted = listValue(hidden);
    types.retracted = LIST(VARCHAR);
  }
  if (!query.includeRetracted) {
    if (hidden.length > 0) where.push('NOT list_contains($retracted, pkey)');
    after.push(`status <> 'retracted'`);
  }
  const rows = clean
    ? `(SELECT * FROM read_parquet($files) WHERE ${[...where, ...after].join(' AND ')})`
    : `(SELECT * FROM (SELECT * EXCLUDE (filename) FROM read_parquet($files, filename = true)
             WHERE ${where.join(' AND ')} QUALIFY ${DEDUPE_WINDOW})
           ${after.length > 0 ? `WHERE ${after.join(' AND ')}` : ''})`;
  if (!query.includeRetracted) return { sql: rows, values, types };
  return { sql: `(SELECT ${TOMBSTONE(hidden.length > 0 ? `status = 'retracted' OR list_contains($retracted, pkey)` : `status = 'retracted'`)} FROM ${rows})`, values, types };
}

/**
 * Every column, a retracted report's as its tombstone: status `retracted`, title and text "",
 * URLs null; place, time and tags kept. `retracted` is the SQL condition that says which.
 */
export function TOMBSTONE(retracted: string): string {
  const when = (col: string, value: string) => `CASE WHEN ${retracted} THEN ${value} ELSE ${col} END AS ${col}`;
  return `* REPLACE (${when('status', `'retracted'`)}, ${when('title', `''`)}, ${when('text', `''`)}, ${when('url', 'NULL')}, ${when('image_url', 'NULL')})`;
}

const ISO_MS = `strftime(created_at, '%Y-%m-%dT%H:%M:%S.%gZ')`;

/** The report properties in their published order (docs/http.md, "Archived report fields"), as a DuckDB struct (to_json keeps the order). */
const PROPERTIES = `{'pkey': pkey, 'created_at': ${ISO_MS}, 'source': source, 'status': status, 'url': url,
  'image_url': image_url, 'disaster_type': disaster_type, 'report_data': report_data,
  'tags': {'instance_region_code': instance_region_code, 'local_area_id': local_area_id}, 'title': title, 'text': text}`;

/**
 * A text cell, quoted. One that begins with = + - @ tab or carriage return would be read as a
 * formula by spreadsheets (CSV injection): it gets a leading ' inside the quotes, as OWASP
 * advises. Only text columns pass here; lng/lat stay plain numbers.
 */
const csv = (col: string) =>
  `coalesce('"' || CASE WHEN left(${col}::VARCHAR, 1) IN ('=', '+', '-', '@', chr(9), chr(13)) THEN '''' ELSE '' END || replace(${col}::VARCHAR, '"', '""') || '"', '')`;

/** One report serialised in each shape, as a SQL expression over an archive row. */
export const ITEM_SQL: Record<FeatureShape, string> = {
  csv: `concat_ws(',', ${csv('pkey')}, ${ISO_MS}, ${csv('source')}, ${csv('status')},
    ${csv('url')}, ${csv('image_url')}, ${csv('disaster_type')}, ${csv('report_data')}, ${csv('instance_region_code')},
    ${csv('local_area_id')}, ${csv('title')}, ${csv('text')}, to_json(lng)::VARCHAR, to_json(lat)::VARCHAR)`,
  // DuckDB serialises the whole struct in one call: cheaper than concatenating pieces.
  geojson: `to_json({'type': 'Feature', 'geometry': {'type': 'Point', 'coordinates': [lng, lat]}, 'properties': ${PROPERTIES}})::VARCHAR`,
  // What topojson-server makes of a Point feature: {type, coordinates, properties}.
  topojson: `to_json({'type': 'Point', 'coordinates': [lng, lat], 'properties': ${PROPERTIES}})::VARCHAR`,
};

/** The order of every answer: newest first, ties by pkey. */
export const ANSWER_ORDER = 'ORDER BY created_at DESC, pkey DESC';

/** The archive columns researchers get in bulk formats (Parquet and Arrow), in order; then the WKB geometry. */
export const EXPORT_COLUMNS = [
  'pkey',
  'created_at',
  'source',
  'status',
  'url',
  'image_url',
  'disaster_type',
  'report_data',
  'instance_region_code',
  'local_area_id',
  'title',
  'text',
  'lng',
  'lat',
] as const;
