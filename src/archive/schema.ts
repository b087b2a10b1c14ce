// The archived report's columns, once. Everything that lists them is derived from this table:
// the row type, the parts' DDL and appender (partWriter.ts), the rows read back (readRows.ts), the
// tombstone of a retracted report, every text answer's serialisation and the bulk formats'
// columns (sql.ts), the Arrow schema (arrow.ts), the event Feature (events/feature.ts) and the
// OpenAPI schema of a report's properties. Each derivation takes a table, this one by default,
// so a test can add a column to a copy and see every format carry it.

/** A column's type, and so its DuckDB type, Arrow type, JavaScript value and JSON value. */
export type Kind = 'text' | 'json' | 'timestamp' | 'double' | 'bigint';

/**
 * Where a column goes in a report's answers: a property of its Feature, one of its `tags`, or its
 * point's x or y. Answered columns are also the columns of CSV, Parquet and Arrow, in table order.
 */
export type Placement = 'property' | 'tag' | 'x' | 'y';

export interface ColumnSpec {
  readonly name: string;
  readonly kind: Kind;
  readonly nullable: boolean;
  /** Absent: kept for the operators, in no answer. */
  readonly answer?: Placement;
  /** Cleared when a retracted report becomes a tombstone (to '' or, when nullable, null). */
  readonly personal?: boolean;
  /** Added after parts were first written: older parts lack it (read as null), rows may omit it. */
  readonly later?: boolean;
  /** The values an answer may hold (the OpenAPI enum). */
  readonly values?: readonly string[];
  readonly description: string;
}

export type Columns = readonly ColumnSpec[];

/**
 * In the order of the parts' columns and of the answers. Every reader of parts reads columns by
 * name (readRows.ts, partsSql), so a later column may sit anywhere: its place is its place in
 * the answers.
 */
export const COLUMNS = [
  { name: 'pkey', kind: 'text', nullable: false, answer: 'property', description: 'The report key, fixed at acceptance: `<source>-<key name>-<post_id>` for a report posted with a named key, `<source>-<post_id>` for one posted with none.' },
  { name: 'created_at', kind: 'timestamp', nullable: false, answer: 'property', description: 'ISO 8601 in UTC with milliseconds.' },
  { name: 'source', kind: 'text', nullable: false, answer: 'property', values: ['partner'], description: 'Where the report came from.' },
  {
    name: 'status',
    kind: 'text',
    nullable: false,
    answer: 'property',
    values: ['confirmed', 'retracted'],
    description:
      'confirmed: as accepted. retracted: withdrawn by the partner that posted it (DELETE /feeds/partner/{post_id}) or by the operators; final. Retracted reports are left out of every answer unless include_retracted=true (and in a sync, updated_after, always), where they are tombstones: title and text "", url and image_url null, place and time kept.',
  },
  { name: 'url', kind: 'text', nullable: true, answer: 'property', personal: true, description: "The report's page at the partner." },
  { name: 'image_url', kind: 'text', nullable: true, answer: 'property', personal: true, description: 'A photo of the report.' },
  { name: 'disaster_type', kind: 'text', nullable: false, answer: 'property', values: ['flood'], description: 'What the report is about.' },
  { name: 'report_data', kind: 'json', nullable: true, answer: 'property', description: 'Not typed; null for partner reports.' },
  { name: 'instance_region_code', kind: 'text', nullable: true, answer: 'tag', description: 'Code of the city whose boundary contains the point.' },
  { name: 'local_area_id', kind: 'text', nullable: true, answer: 'tag', description: 'PSGC code (10 digits) of the barangay that contains the point.' },
  {
    name: 'province_code',
    kind: 'text',
    nullable: true,
    answer: 'tag',
    later: true,
    description: "Code (`PH-` and its PSGC code) of the province of the city whose boundary contains the point; for an independent city (Angeles, Cebu City: in no province by PSA's list), the province whose boundary holds it; null where the boundary version has no provinces (the two-city set), no province holds the city, or no city contains the point.",
  },
  {
    name: 'region_code',
    kind: 'text',
    nullable: true,
    answer: 'tag',
    later: true,
    description: 'Code (`PH-` and its PSGC code) of the region of the city whose boundary contains the point; null where the boundary version has no regions (the two-city set) or no city contains the point.',
  },
  { name: 'title', kind: 'text', nullable: false, answer: 'property', personal: true, description: "The report's title." },
  { name: 'text', kind: 'text', nullable: false, answer: 'property', personal: true, description: "The report's text." },
  { name: 'lng', kind: 'double', nullable: false, answer: 'x', description: 'Longitude, WGS 84.' },
  { name: 'lat', kind: 'double', nullable: false, answer: 'y', description: 'Latitude, WGS 84.' },
  { name: 'post_id', kind: 'bigint', nullable: false, description: "The partner's id of the report." },
  { name: 'partner_city', kind: 'text', nullable: false, description: 'The city the partner filed the report under.' },
  { name: 'received_at', kind: 'timestamp', nullable: false, description: 'When the service accepted the report.' },
  { name: 'boundary_version', kind: 'text', nullable: false, description: 'The boundary version the report was tagged with.' },
  { name: 'key_name', kind: 'text', nullable: true, later: true, description: 'The name of the API key that accepted the report; null when none is known (older reports, operators\' imports).' },
] as const satisfies Columns;

type Table = typeof COLUMNS;

/** A column's field in a row: timestamps are epoch milliseconds, named `<column>_ms`. */
type RowKey<C extends ColumnSpec> = C extends { kind: 'timestamp' } ? `${C['name']}_ms` : C['name'];
type RowValue<C extends ColumnSpec> = (C extends { kind: 'timestamp' | 'double' | 'bigint' } ? number : string) | (C extends { nullable: true } ? null : never);
type Flat<T> = { [K in keyof T]: T[K] };

/** A row of a table: JSON columns as JSON text; later columns optional (rows written before them). */
export type RowOf<T extends Columns> = Flat<
  { [C in T[number] as C extends { later: true } ? never : RowKey<C>]: RowValue<C> } & {
    [C in T[number] as C extends { later: true } ? RowKey<C> : never]?: RowValue<C>;
  }
>;

/** One archived report. */
export type ArchiveRow = RowOf<Table>;

type PropertyValue<C extends ColumnSpec> = C extends { kind: 'json' }
  ? unknown
  : (C extends { kind: 'double' | 'bigint' } ? number : string) | (C extends { nullable: true } ? null : never);

/** A report's GeoJSON properties, its tags as an object of their own. */
export type PropertiesOf<T extends Columns> = Flat<
  { [C in T[number] as C extends { answer: 'property' } ? C['name'] : never]: PropertyValue<C> } & {
    tags: { [C in T[number] as C extends { answer: 'tag' } ? C['name'] : never]: PropertyValue<C> };
  }
>;

export type ReportProperties = PropertiesOf<Table>;

/** The table, once its names are checked to be plain identifiers (they are written into SQL and generated code). */
export function checkedNames<T extends Columns>(table: T): T {
  for (const c of table) if (!/^[a-z][a-z0-9_]*$/.test(c.name)) throw new Error(`not a column name: ${JSON.stringify(c.name)}`);
  return table;
}

export function rowKeyOf(c: ColumnSpec): string {
  return c.kind === 'timestamp' ? `${c.name}_ms` : c.name;
}

const SQL_TYPE: Record<Kind, string> = { text: 'VARCHAR', json: 'JSON', timestamp: 'TIMESTAMPTZ', double: 'DOUBLE', bigint: 'BIGINT' };

export function sqlTypeOf(c: ColumnSpec): string {
  return SQL_TYPE[c.kind];
}

/** The columns parts are written with now, in order. */
export function partColumns(table: Columns = COLUMNS): string[] {
  return table.map((c) => c.name);
}

/** The columns added later (see ColumnSpec.later). */
export function laterColumns(table: Columns = COLUMNS): ColumnSpec[] {
  return table.filter((c) => c.later);
}

/** The columns of the answers, in order: CSV, Parquet and Arrow (before the WKB geometry). */
export function answerColumns(table: Columns = COLUMNS): ColumnSpec[] {
  return table.filter((c) => c.answer !== undefined);
}

/** The part table's DuckDB DDL: `(name TYPE [NOT NULL], …)`. */
export function tableDdl(table: Columns = COLUMNS): string {
  return `(\n${table.map((c) => `  ${c.name} ${sqlTypeOf(c)}${c.nullable ? '' : ' NOT NULL'}`).join(',\n')}\n)`;
}

/** What a personal column becomes in a tombstone: null, or an empty text where it cannot be null. */
const clearedValue = (c: ColumnSpec) => (c.nullable ? null : '');
const clearedSql = (c: ColumnSpec) => (c.nullable ? 'NULL' : `''`);

/**
 * Every column, a retracted report's as its tombstone: status `retracted`, personal columns
 * cleared; place, time and tags kept. `retracted` is the SQL condition that says which.
 */
export function tombstoneSql(retracted: string, table: Columns = COLUMNS): string {
  const when = (col: string, value: string) => `CASE WHEN ${retracted} THEN ${value} ELSE ${col} END AS ${col}`;
  const cleared = table.filter((c) => c.personal).map((c) => when(c.name, clearedSql(c)));
  return `* REPLACE (${[when('status', `'retracted'`), ...cleared].join(', ')})`;
}

/** SQL true for a row that is not yet its tombstone (not retracted, or a personal column not cleared). */
export function notTombstoneSql(table: Columns = COLUMNS): string {
  const kept = table.filter((c) => c.personal).map((c) => (c.nullable ? `${c.name} IS NOT NULL` : `${c.name} <> ''`));
  return `(${[`status <> 'retracted'`, ...kept].join(' OR ')})`;
}

/** A row as its tombstone (see tombstoneSql). */
export function tombstoneRow<R extends object>(row: R, table: Columns = COLUMNS): R {
  const out: Record<string, unknown> = { ...row, status: 'retracted' };
  for (const c of table) if (c.personal) out[rowKeyOf(c)] = clearedValue(c);
  return out as R;
}

/**
 * A retracted report's properties in their published order, as its tombstone answers them:
 * status `retracted`, personal properties cleared, the rest from `kept` (null where absent).
 */
export function tombstoneProperties(kept: Partial<ReportProperties>, table: Columns = COLUMNS): ReportProperties {
  const from = kept as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const e of propertyLayout(table)) {
    if ('group' in e) out[e.group] = from[e.group] ?? Object.fromEntries(e.columns.map((c) => [c.name, null]));
    else if (e.column.name === 'status') out.status = 'retracted';
    else out[e.column.name] = e.column.personal ? clearedValue(e.column) : (from[e.column.name] ?? null);
  }
  return out as ReportProperties;
}

/** The properties of a report's Feature in their published order: a column, or the tags where the first of them is. */
export type PropertyEntry = { column: ColumnSpec } | { group: 'tags'; columns: ColumnSpec[] };

export function propertyLayout(table: Columns = COLUMNS): PropertyEntry[] {
  const out: PropertyEntry[] = [];
  let tags: ColumnSpec[] | undefined;
  for (const c of table) {
    if (c.answer === 'property') out.push({ column: c });
    else if (c.answer === 'tag') {
      if (!tags) out.push({ group: 'tags', columns: (tags = []) });
      tags.push(c);
    }
  }
  return out;
}

/** The point's x and y columns. */
export function pointColumns(table: Columns = COLUMNS): [ColumnSpec, ColumnSpec] {
  const x = table.find((c) => c.answer === 'x');
  const y = table.find((c) => c.answer === 'y');
  if (!x || !y) throw new Error('the table has no point (x and y columns)');
  return [x, y];
}

/** A column's JSON Schema (OpenAPI 3.1) as an answer property. */
function propertySchema(c: ColumnSpec): Record<string, unknown> {
  const base = c.kind === 'json' ? undefined : c.kind === 'double' ? 'number' : c.kind === 'bigint' ? 'integer' : 'string';
  return {
    ...(base && { type: c.nullable ? [base, 'null'] : base }),
    ...(c.kind === 'timestamp' && { format: 'date-time' }),
    ...(c.values && { enum: [...c.values] }),
    description: c.description,
  };
}

/** The JSON Schema of a report's properties, as the OpenAPI documents publish it. */
export function reportPropertiesSchema(table: Columns = COLUMNS): Record<string, unknown> {
  const layout = propertyLayout(table);
  const object = (properties: [string, unknown][]) => ({
    type: 'object',
    additionalProperties: false,
    required: properties.map(([name]) => name),
    properties: Object.fromEntries(properties),
  });
  return object(layout.map((e) => ('column' in e ? [e.column.name, propertySchema(e.column)] : [e.group, object(e.columns.map((c) => [c.name, propertySchema(c)]))])));
}
