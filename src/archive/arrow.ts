// Arrow IPC stream of an archive window: one record batch per UTC day, with the Parquet answer's
// schema (the same columns and types as pyarrow reads them: created_at in microseconds,
// report_data as arrow.json, the WKB geometry). The batches are assembled from buffers DuckDB
// built (exports.ts), not value by value; the writer streams with Node back-pressure.
import { PassThrough, Readable, type Duplex } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Binary, Field, Float64, makeData, RecordBatch, RecordBatchStreamWriter, Schema, Struct, TimestampMicrosecond, Utf8, type Data, type DataType } from 'apache-arrow';
import { STRING_COLUMNS, type ArrowDay, type StringColumn } from './exports.js';

/** The answer's fields, in the Parquet answer's order. */
const FIELDS: Field[] = (
  [
    ['pkey', new Utf8()],
    ['created_at', new TimestampMicrosecond('UTC')],
    ['source', new Utf8()],
    ['status', new Utf8()],
    ['url', new Utf8()],
    ['image_url', new Utf8()],
    ['disaster_type', new Utf8()],
    ['report_data', new Utf8()],
    ['instance_region_code', new Utf8()],
    ['local_area_id', new Utf8()],
    ['title', new Utf8()],
    ['text', new Utf8()],
    ['lng', new Float64()],
    ['lat', new Float64()],
    ['geometry', new Binary()],
  ] as [string, DataType][]
).map(([name, type]) => {
  // Parquet's JSON logical type reads as Arrow's canonical JSON extension.
  const metadata = name === 'report_data' ? new Map([['ARROW:extension:name', 'arrow.json']]) : undefined;
  // Nullable, as in the Parquet answer (DuckDB writes every column optional).
  return new Field(name, type, true, metadata);
});
const SCHEMA = new Schema(FIELDS);

/** 21 bytes a point: little-endian byte order, type 1 (Point), x, y (what GEOMETRY_SQL writes). */
function wkbPoints(lng: Float64Array, lat: Float64Array): { offsets: Int32Array; data: Uint8Array } {
  const data = new Uint8Array(lng.length * 21);
  const view = new DataView(data.buffer);
  const offsets = new Int32Array(lng.length + 1);
  for (let i = 0; i < lng.length; i++) {
    const at = i * 21;
    data[at] = 1;
    view.setUint32(at + 1, 1, true);
    view.setFloat64(at + 5, lng[i]!, true);
    view.setFloat64(at + 13, lat[i]!, true);
    offsets[i + 1] = at + 21;
  }
  return { offsets, data };
}

function toBatch(day: ArrowDay): RecordBatch {
  const { length } = day;
  const children: Data[] = FIELDS.map((field) => {
    const name = field.name;
    if (name === 'created_at') return makeData({ type: field.type as TimestampMicrosecond, length, nullCount: 0, data: day.createdUs });
    if (name === 'lng' || name === 'lat') return makeData({ type: new Float64(), length, nullCount: 0, data: day[name] });
    if (name === 'geometry') {
      const wkb = wkbPoints(day.lng, day.lat);
      return makeData({ type: new Binary(), length, nullCount: 0, valueOffsets: wkb.offsets, data: wkb.data });
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

async function* recordBatches(days: AsyncIterable<ArrowDay>): AsyncIterable<RecordBatch> {
  let wrote = false;
  for await (const day of days) {
    if (day.length === 0) continue;
    yield toBatch(day);
    wrote = true;
  }
  // An empty window still carries the schema, so readers know the columns.
  if (!wrote) yield toBatch(EMPTY);
}

/** The IPC stream bytes (Content-Type application/vnd.apache.arrow.stream). */
export function arrowStream(days: AsyncIterable<ArrowDay>): Duplex {
  const writer = RecordBatchStreamWriter.throughNode() as unknown as Duplex;
  const out = new PassThrough();
  // A failed query must fail the response, not leave it hanging.
  pipeline(Readable.from(recordBatches(days)), writer).catch((err: unknown) => out.destroy(err as Error));
  // Arrow's writer, destroyed with an error (as a pipeline does when its reader goes), leaves a
  // rejected read nobody awaits: it is piped by hand, and closed without an error when the
  // reader goes, which also ends the days' reads.
  writer.pipe(out);
  out.once('close', () => {
    if (!writer.destroyed) writer.destroy();
  });
  return out;
}
