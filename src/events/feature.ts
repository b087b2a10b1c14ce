// An archived report as the GeoJSON Feature the archive answers with (docs/http.md, "Archived
// report fields"), which is what webhooks, the live stream and SNS carry. Built from the table of
// columns in the order of the answers' SQL (sql.ts, propertiesSql), so its properties serialise to
// the same bytes.
import type { Feature, Point } from 'geojson';
import { COLUMNS, pointColumns, propertyLayout, rowKeyOf, type ArchiveRow, type ColumnSpec, type Columns, type ReportProperties } from '../archive/schema.js';

export type { ReportProperties } from '../archive/schema.js';

export type ReportFeature = Feature<Point, ReportProperties>;

type Row = Record<string, unknown>;

/** A column's property value from a row: timestamps as answers write them, JSON parsed. */
function valueOf(c: ColumnSpec): (row: Row) => unknown {
  const key = rowKeyOf(c);
  if (c.kind === 'timestamp') return (row) => (row[key] === null ? null : new Date(row[key] as number).toISOString());
  if (c.kind === 'json') return (row) => (row[key] === null ? null : (JSON.parse(row[key] as string) as unknown));
  return (row) => row[key];
}

/** The Feature builder of a table. */
export function featureBuilder(table: Columns = COLUMNS): (row: object) => Feature<Point, Record<string, unknown>> {
  const [x, y] = pointColumns(table).map(rowKeyOf) as [string, string];
  const entries = propertyLayout(table).map((e) =>
    'column' in e
      ? ([e.column.name, valueOf(e.column)] as const)
      : ([e.group, ((values) => (row: Row) => Object.fromEntries(values.map(([name, of]) => [name, of(row)])))(e.columns.map((c) => [c.name, valueOf(c)] as const))] as const),
  );
  return (input) => {
    const row = input as Row;
    const properties: Record<string, unknown> = {};
    for (const [name, of] of entries) properties[name] = of(row);
    return { type: 'Feature', geometry: { type: 'Point', coordinates: [row[x] as number, row[y] as number] }, properties };
  };
}

const build = featureBuilder();

export function featureOf(row: ArchiveRow): ReportFeature {
  return build(row) as ReportFeature;
}
