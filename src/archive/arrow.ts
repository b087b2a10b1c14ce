// Arrow IPC stream of an archive window: one record batch per UTC day, with the Parquet answer's
// schema (the same columns and types as pyarrow reads them: created_at in microseconds,
// report_data as arrow.json, the WKB geometry). The batches are assembled from buffers DuckDB
// built (arrowDay.ts), not value by value; the writer streams with Node back-pressure.
import { Binary, Field, Float64, Int64, makeData, Message, MessageHeader, RecordBatch, RecordBatchStreamWriter, Schema, Struct, TimestampMicrosecond, Utf8, type Data, type DataType } from 'apache-arrow';
import { wkbPoints } from './geoparquet.js';
import { answerColumns, COLUMNS, pointColumns, type ColumnSpec, type Columns, type Kind, type Placement } from './schema.js';

const isString = (c: ColumnSpec) => c.kind === 'text' || c.kind === 'json';

/** The answer's string columns (text and JSON), in the Parquet answer's order. */
export function stringColumns(table: Columns = COLUMNS): string[] {
  return answerColumns(table)
    .filter(isString)
    .map((c) => c.name);
}

export type StringColumn = Extract<(typeof COLUMNS)[number], { answer: Placement; kind: 'text' | 'json' }>['name'];
export const STRING_COLUMNS = stringColumns() as readonly StringColumn[];

/** A string column as DuckDB gives its text (JSON as its text). */
export function stringSqlOf(name: string, table: Columns = COLUMNS): string {
  return table.find((c) => c.name === name)?.kind === 'json' ? `${name}::VARCHAR` : name;
}

/** A string column as Arrow lays it out: UTF-8 bytes end to end, offsets, and which values are null. */
export interface StringBuffers {
  offsets: Int32Array;
  data: Uint8Array;
  /** Arrow validity bitmap (bit set: a value), undefined when nothing is null. */
  validity: Uint8Array | undefined;
  nullCount: number;
}

/** One UTC day of the window as Arrow buffers, newest first: the time, the point, the strings. */
export interface ArrowDay {
  length: number;
  /** created_at, microseconds since the epoch. */
  createdUs: BigInt64Array;
  lng: Float64Array;
  lat: Float64Array;
  strings: Record<StringColumn, StringBuffers>;
}

const ARROW_TYPE: Record<Kind, () => DataType> = {
  text: () => new Utf8(),
  json: () => new Utf8(),
  timestamp: () => new TimestampMicrosecond('UTC'),
  double: () => new Float64(),
  bigint: () => new Int64(),
};

/** The answer's fields, in the Parquet answer's order: the answered columns, then the WKB geometry. */
export function arrowFields(table: Columns = COLUMNS): Field[] {
  return [
    ...answerColumns(table).map((c) => {
      // Parquet's JSON logical type reads as Arrow's canonical JSON extension.
      const metadata = c.kind === 'json' ? new Map([['ARROW:extension:name', 'arrow.json']]) : undefined;
      // Nullable, as in the Parquet answer (DuckDB writes every column optional).
      return new Field(c.name, ARROW_TYPE[c.kind](), true, metadata);
    }),
    new Field('geometry', new Binary(), true),
  ];
}

const FIELDS = arrowFields();
const [X, Y] = pointColumns();
/** The fixed-width buffers an ArrowDay carries, by column. */
const FIXED: Record<string, (day: ArrowDay) => BigInt64Array | Float64Array> = { created_at: (d) => d.createdUs, [X.name]: (d) => d.lng, [Y.name]: (d) => d.lat };
for (const c of answerColumns()) {
  if (!isString(c) && !FIXED[c.name]) throw new Error(`Arrow days carry no buffer for column ${c.name}`);
}
const SCHEMA = new Schema(FIELDS);

function toBatch(day: ArrowDay): RecordBatch {
  const { length } = day;
  const children: Data[] = FIELDS.map((field) => {
    const name = field.name;
    if (name === 'geometry') {
      const wkb = wkbPoints(day.lng, day.lat);
      return makeData({ type: new Binary(), length, nullCount: 0, valueOffsets: wkb.offsets, data: wkb.data });
    }
    const fixed = FIXED[name];
    if (fixed) {
      const data = fixed(day);
      if (data instanceof BigInt64Array) return makeData({ type: field.type as TimestampMicrosecond, length, nullCount: 0, data });
      return makeData({ type: field.type as Float64, length, nullCount: 0, data });
    }
    const s = day.strings[name as StringColumn];
    return makeData({ type: new Utf8(), length, nullCount: s.nullCount, nullBitmap: s.validity, valueOffsets: s.offsets, data: s.data });
  });
  return new RecordBatch(SCHEMA, makeData({ type: new Struct(FIELDS), length, nullCount: 0, children }));
}

const EMPTY: ArrowDay = {
  length: 0,
  createdUs: new BigInt64Array(0),
  lng: new Float64Array(0),
  lat: new Float64Array(0),
  strings: Object.fromEntries(STRING_COLUMNS.map((c) => [c, { offsets: new Int32Array(1), data: new Uint8Array(0), validity: undefined, nullCount: 0 }])) as ArrowDay['strings'],
};

/** The stream's first message: the schema. */
export const SCHEMA_MESSAGE: Uint8Array = (() => {
  const stream = RecordBatchStreamWriter.writeAll([toBatch(EMPTY)]).toUint8Array(true);
  // A message: 0xFFFFFFFF, the metadata's length, the metadata (a schema has no body).
  const metadata = new DataView(stream.buffer, stream.byteOffset).getInt32(4, true);
  return stream.slice(0, 8 + metadata);
})();

/** The end-of-stream marker. */
export const END_OF_STREAM = new Uint8Array([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);

/** One record batch as its IPC message bytes: what follows the schema in a stream. */
function batchMessage(day: ArrowDay, from = 0, to = day.length): Uint8Array {
  let batch = toBatch(day);
  if (from !== 0 || to !== day.length) batch = batch.slice(from, to);
  const stream = RecordBatchStreamWriter.writeAll([batch]).toUint8Array(true);
  return stream.slice(SCHEMA_MESSAGE.byteLength, stream.byteLength - END_OF_STREAM.byteLength);
}

/**
 * Several slices of one day as record batch messages, one per [from, to) range: the day is made
 * a batch once and the slices written as one stream, then cut at message boundaries. (A writer
 * per slice re-encodes the schema each time: most of a busy part's flush time.)
 */
export function batchMessages(day: ArrowDay, ranges: readonly (readonly [number, number])[]): Uint8Array[] {
  if (ranges.length === 0) return [];
  const batch = toBatch(day);
  const stream = RecordBatchStreamWriter.writeAll(ranges.map(([from, to]) => batch.slice(from, to))).toUint8Array(true);
  const view = new DataView(stream.buffer, stream.byteOffset, stream.byteLength);
  const out: Uint8Array[] = [];
  let start = SCHEMA_MESSAGE.byteLength;
  let at = start;
  while (out.length < ranges.length) {
    // A message: 0xFFFFFFFF, the metadata's length (padded), the metadata, then its body.
    const metadataLength = view.getInt32(at + 4, true);
    const message = Message.decode(stream.subarray(at + 8, at + 8 + metadataLength));
    at += 8 + metadataLength + message.bodyLength;
    // Anything before a record batch (dictionaries) belongs with it, as batchMessage keeps it.
    if (message.headerType !== MessageHeader.RecordBatch) continue;
    out.push(stream.slice(start, at));
    start = at;
  }
  return out;
}

/**
 * The IPC stream bytes (Content-Type application/vnd.apache.arrow.stream): the schema, the
 * record batches (messages ready in the sidecars, or built from the days DuckDB reads), the end.
 * `isStored`: a batch message as stored (never empty), passed on as it is.
 */
export async function* arrowStream<S extends object>(batches: AsyncIterable<Uint8Array | ArrowDay | S>, isStored: (batch: unknown) => batch is S): AsyncIterable<Uint8Array | S> {
  yield SCHEMA_MESSAGE;
  let wrote = false;
  for await (const batch of batches) {
    if (isStored(batch)) yield batch;
    else if (batch instanceof Uint8Array) {
      if (batch.byteLength === 0) continue;
      yield batch;
    } else {
      if ((batch as ArrowDay).length === 0) continue;
      yield batchMessage(batch as ArrowDay);
    }
    wrote = true;
  }
  // An empty window still carries the schema and one empty batch, as it always has.
  if (!wrote) yield batchMessage(EMPTY);
  yield END_OF_STREAM;
}
