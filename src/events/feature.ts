// An archived report as the GeoJSON Feature the archive answers with (docs/http.md, "Archived
// report fields"), which is what webhooks, the live stream and SNS carry. Built from the table of
// columns in the order of the answers' SQL (sql.ts, propertiesSql), so its properties serialise to
// the same bytes.
import type { Feature, Point } from 'geojson';
import { checkedNames, COLUMNS, pointColumns, propertyLayout, rowKeyOf, type ArchiveRow, type ColumnSpec, type Columns, type ReportProperties } from '../archive/schema.js';

export type { ReportProperties } from '../archive/schema.js';

export type ReportFeature = Feature<Point, ReportProperties>;

const key = (name: string) => JSON.stringify(name);

/** A column's property value from row `r`, as code: timestamps as answers write them, JSON parsed. */
function valueCode(c: ColumnSpec): string {
  // A later column is absent from rows made before it: null, as answers read it.
  const value = c.later ? `(r[${key(rowKeyOf(c))}] ?? null)` : `r[${key(rowKeyOf(c))}]`;
  if (c.kind === 'timestamp') return `(${value} === null ? null : new Date(${value}).toISOString())`;
  if (c.kind === 'json') return `(${value} === null ? null : JSON.parse(${value}))`;
  return value;
}

/**
 * The Feature builder of a table, compiled from it into one object literal: properties in the
 * order of the answers' SQL (a loop over the columns made the event log's work twice as slow).
 */
export function featureBuilder(table: Columns = COLUMNS): (row: object) => Feature<Point, Record<string, unknown>> {
  const [x, y] = pointColumns(checkedNames(table)).map((c) => `r[${key(rowKeyOf(c))}]`);
  const properties = propertyLayout(table).map((e) =>
    'column' in e ? `${key(e.column.name)}: ${valueCode(e.column)}` : `${key(e.group)}: { ${e.columns.map((c) => `${key(c.name)}: ${valueCode(c)}`).join(', ')} }`,
  );
  return new Function(`return (r) => ({ type: 'Feature', geometry: { type: 'Point', coordinates: [${x}, ${y}] }, properties: { ${properties.join(', ')} } });`)() as (
    row: object,
  ) => Feature<Point, Record<string, unknown>>;
}
const build = featureBuilder();

export function featureOf(row: ArchiveRow): ReportFeature {
  return build(row) as ReportFeature;
}
