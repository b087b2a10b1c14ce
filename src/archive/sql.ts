// The SQL a window runs over its parts: the filtered, de-duplicated rows (with bound
// parameters), and how each report is serialised in each text shape.
import { DOUBLE, LIST, TIMESTAMPTZ, VARCHAR, listValue, timestampTZValue, type DuckDBType, type DuckDBValue } from '@duckdb/node-api';
import type { RetractedReport, WindowQuery } from './query.js';
import { DEDUPE_WINDOW, partsSql } from './readRows.js';
import { answerColumns, COLUMNS, pointColumns, propertyLayout, tombstoneSql, type Columns, type ColumnSpec } from './schema.js';

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
 * de-duplicate. `limit`: only the first `limit` rows in the answer's order (a page).
 */
export function filteredRows(files: readonly string[], query: WindowQuery, clean = false, limit?: number): Bound {
  // Every copy of a report shares its created_at, place and received_at, so those filters
  // can run before de-duplication (and reach the Parquet row groups); the tags may differ
  // between copies (reprocessing), so the admin filter runs after it.
  const where = ['created_at BETWEEN $start AND $end'];
  const after: string[] = [];
  const values: Record<string, DuckDBValue> = { files: listValue([...files]), start: micros(query.startMs), end: micros(query.endMs) };
  const types: Record<string, DuckDBType> = { files: LIST(VARCHAR), start: TIMESTAMPTZ, end: TIMESTAMPTZ };
  if (query.admin !== undefined) {
    // A sync's reports a re-tag moved out of the area come too: its mirror learns they left.
    const movedOut = ofTime(query.movedOut ?? [], query);
    if (movedOut.length > 0) {
      after.push('(list_contains($admin, instance_region_code) OR pkey IN (SELECT unnest($movedOut)))');
      values.movedOut = listValue(movedOut);
      types.movedOut = LIST(VARCHAR);
    } else after.push('list_contains($admin, instance_region_code)');
    values.admin = listValue([...query.admin]);
    types.admin = LIST(VARCHAR);
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
    // A sync may name hundreds of thousands: a hash join, where list_contains searches the list
    // for each row (200,000 changes took 24 s to count, growing with their square). A join
    // does not keep the files' order, so the rows are put back in the answer's order (below).
    where.push('pkey IN (SELECT unnest($changed))');
    values.changed = listValue(ofTime(query.changed, query));
    types.changed = LIST(VARCHAR);
  }
  // A sync's pages hold its changes up to the first page's watermark, whenever each report was
  // received: bounded by received_at too, pages after the first (bound at that watermark, the
  // first at its own instant) dropped a report whose change was logged by a host whose clock runs
  // behind the API's.
  const receivedBefore = query.changed !== undefined ? undefined : (query.after?.receivedBeforeMs ?? query.receivedBeforeMs);
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
  const hidden = ofTime(query.retracted ?? [], query);
  if (hidden.length > 0) {
    values.retracted = listValue(hidden);
    types.retracted = LIST(VARCHAR);
  }
  if (!query.includeRetracted) {
    if (hidden.length > 0) where.push('NOT list_contains($retracted, pkey)');
    after.push(`status <> 'retracted'`);
  }
  const afterClause = after.length > 0 ? `WHERE ${after.join(' AND ')}` : '';
  let rows: string;
  if (clean) {
    rows = `(SELECT * FROM ${PARTS} WHERE ${[...where, ...after].join(' AND ')})`;
    if (limit !== undefined) rows = `(SELECT * FROM ${rows} ${ANSWER_ORDER} LIMIT ${limit})`;
    else if (query.changed !== undefined) rows = `(SELECT * FROM ${rows} ${ANSWER_ORDER})`;
  } else if (limit === undefined) {
    rows = `(SELECT * FROM (SELECT * EXCLUDE (filename) FROM ${NAMED_PARTS}
             WHERE ${where.join(' AND ')} QUALIFY ${DEDUPE_WINDOW})
           ${afterClause})`;
  } else {
    // A page of a storm hour: de-duplicating every column of every copy would hold the whole
    // hour in memory for `limit` rows. The page's copies are chosen on the few columns the
    // filters and the order read, then only those rows are read whole.
    const keys = `SELECT filename, pkey FROM (SELECT filename, pkey, created_at, status, instance_region_code
             FROM ${NAMED_PARTS} WHERE ${where.join(' AND ')} QUALIFY ${DEDUPE_WINDOW})
           ${afterClause} ${ANSWER_ORDER} LIMIT ${limit}`;
    rows = `(SELECT r.* EXCLUDE (filename)
             FROM (SELECT * FROM ${NAMED_PARTS} WHERE ${where.join(' AND ')}) r
             SEMI JOIN (${keys}) k ON r.filename = k.filename AND r.pkey = k.pkey)`;
  }
  if (!query.includeRetracted) return { sql: rows, values, types };
  return { sql: `(SELECT ${TOMBSTONE(hidden.length > 0 ? `status = 'retracted' OR list_contains($retracted, pkey)` : `status = 'retracted'`)} FROM ${rows})`, values, types };
}

/**
 * The pkeys of those reports within the query's time: no other row is read, and a slice of an
 * hour binds its own few, not the window's (a list is bound, and searched, once a query).
 */
function ofTime(reports: readonly RetractedReport[], query: WindowQuery): string[] {
  return reports.flatMap((r) => (r.createdMs >= query.startMs && r.createdMs <= query.endMs ? [r.pkey] : []));
}

/** The window's part files (bound as $files), older ones' later columns null; and with each row's file name. */
const PARTS = partsSql('$files');
const NAMED_PARTS = partsSql('$files', true);

/** A retracted report's columns as its tombstone (schema.ts); `retracted` is the SQL condition that says which. */
export const TOMBSTONE = (retracted: string): string => tombstoneSql(retracted);

/** A timestamp column as answers write it: ISO 8601 in UTC with milliseconds. */
const isoMs = (col: string) => `strftime(${col}, '%Y-%m-%dT%H:%M:%S.%gZ')`;

/** A column's value in a report's properties, as SQL. */
const propertySql = (c: ColumnSpec) => (c.kind === 'timestamp' ? isoMs(c.name) : c.name);

/** The report properties in their published order (docs/http.md, "Archived report fields"), as a DuckDB struct (to_json keeps the order). */
export function propertiesSql(table: Columns = COLUMNS): string {
  const field = (c: ColumnSpec) => `'${c.name}': ${propertySql(c)}`;
  return `{${propertyLayout(table)
    .map((e) => ('column' in e ? field(e.column) : `'${e.group}': {${e.columns.map(field).join(', ')}}`))
    .join(', ')}}`;
}

/**
 * A text cell, quoted. One that begins with = + - @ tab or carriage return would be read as a
 * formula by spreadsheets (CSV injection): it gets a leading ' inside the quotes, as OWASP
 * advises. Only text columns pass here; numbers and times stay plain. A null is an empty cell.
 * (One concat, and replace only where there is a quote: half the time of chained ||.)
 */
const csvText = (col: string) => {
  const text = `${col}::VARCHAR`;
  return `CASE WHEN ${col} IS NULL THEN '' ELSE concat(CASE WHEN ascii(${text}) IN (61, 43, 45, 64, 9, 13) THEN '"''' ELSE '"' END, CASE WHEN contains(${text}, '"') THEN replace(${text}, '"', '""') ELSE ${text} END, '"') END`;
};

/** A column's CSV cell; a null is an empty cell (concat_ws would drop it). */
function csvCell(c: ColumnSpec): string {
  if (c.kind === 'text' || c.kind === 'json') return csvText(c.name);
  const plain = c.kind === 'timestamp' ? isoMs(c.name) : `to_json(${c.name})::VARCHAR`;
  return c.nullable ? `coalesce(${plain}, '')` : plain;
}

/** What the GeoJSON and TopoJSON items share: a report's coordinates and properties, each as JSON text. */
interface ItemPieces {
  coordinates: string;
  properties: string;
}

/** The shared pieces of a report as SQL expressions over an archive row. */
function itemPiecesSql(table: Columns): ItemPieces {
  const [x, y] = pointColumns(table);
  return { coordinates: `to_json([${x.name}, ${y.name}])::VARCHAR`, properties: `to_json(${propertiesSql(table)})::VARCHAR` };
}

/**
 * The JSON items around their pieces: the text before the coordinates, between them and the
 * properties, and after; with the pieces, what to_json makes of the whole object. A GeoJSON
 * item is its TopoJSON item with the Feature around the geometry: the first text longer, and a
 * `}` closing the geometry before the second (topojsonOfGeojson relies on it).
 */
const JSON_ITEM = {
  // What topojson-server makes of a Point feature: {type, coordinates, properties}.
  topojson: ['{"type":"Point","coordinates":', ',"properties":', '}'],
  geojson: ['{"type":"Feature","geometry":{"type":"Point","coordinates":', '},"properties":', '}'],
} as const;

/** A GeoJSON item is its TopoJSON item and this many bytes more (the Feature around the geometry). */
export const GEOJSON_OVER_TOPOJSON = JSON_ITEM.geojson.join('').length - JSON_ITEM.topojson.join('').length;

/** A report's JSON item in `shape` from its pieces (SQL expressions that are never null). */
function jsonItemSql(shape: 'geojson' | 'topojson', pieces: ItemPieces): string {
  const [open, middle, close] = JSON_ITEM[shape];
  return `concat('${open}', ${pieces.coordinates}, '${middle}', ${pieces.properties}, '${close}')`;
}

const GEOJSON_OPEN = Buffer.from(JSON_ITEM.geojson[0]);
const TOPOJSON_OPEN = Buffer.from(JSON_ITEM.topojson[0]);
const CLOSE_BRACKET = 0x5d;

/**
 * A report's TopoJSON item, from its GeoJSON item's bytes (as ITEM_SQL.geojson makes them) at
 * [start, end) of `text`, copied into `out` at `at`; returns where it ends. Its coordinates are
 * a JSON array of two numbers, so the first `]` closes them; the `}` after it closes the
 * geometry, and what follows is the same in both shapes. (The ready texts serialise each report
 * once, as GeoJSON: a second text of every report in the query cost a third of its time.)
 */
export function topojsonOfGeojson(text: Buffer, start: number, end: number, out: Buffer, at: number): number {
  const coordinates = start + GEOJSON_OPEN.length;
  const coordinatesEnd = text.indexOf(CLOSE_BRACKET, coordinates) + 1;
  at += TOPOJSON_OPEN.copy(out, at);
  at += text.copy(out, at, coordinates, coordinatesEnd);
  return at + text.copy(out, at, coordinatesEnd + 1, end);
}

/** A report's CSV line (without its newline). */
function csvItemSql(table: Columns = COLUMNS): string {
  return `concat_ws(',', ${answerColumns(table).map(csvCell).join(', ')})`;
}

/** One report serialised in each shape, as a SQL expression over an archive row. */
export function itemSql(table: Columns = COLUMNS): Record<FeatureShape, string> {
  const pieces = itemPiecesSql(table);
  return { csv: csvItemSql(table), geojson: jsonItemSql('geojson', pieces), topojson: jsonItemSql('topojson', pieces) };
}

/** One report serialised in each shape, as a SQL expression over an archive row. */
export const ITEM_SQL: Record<FeatureShape, string> = itemSql();

/** The CSV answer's header line (without its newline). */
export function csvHeader(table: Columns = COLUMNS): string {
  return answerColumns(table)
    .map((c) => c.name)
    .join(',');
}

/** The order of every answer: newest first, ties by pkey. */
export const ANSWER_KEYS = 'created_at DESC, pkey DESC';
export const ANSWER_ORDER = `ORDER BY ${ANSWER_KEYS}`;

/** The archive columns researchers get in bulk formats (Parquet and Arrow), in order; then the WKB geometry. */
export const EXPORT_COLUMNS: readonly string[] = answerColumns().map((c) => c.name);
