// Arrow IPC stream of an archive window: one record batch per UTC day, built with apache-arrow
// from DuckDB's columns, with the Parquet answer's schema (the same columns and types as pyarrow
// reads them: created_at in microseconds, report_data as arrow.json, the WKB geometry); the
// writer streams with Node back-pressure.
import { PassThrough, Readable, type Duplex } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  Binary,
  Field,
  Float64,
  makeData,
  RecordBatch,
  RecordBatchStreamWriter,
  Schema,
  Struct,
  TimestampMicrosecond,
  Utf8,
  vectorFromArray,
  type DataType,
} from 'apache-arrow';
import type { ExportColumns as ArrowColumns } from './exports.js';

const STRINGS = ['pkey', 'source', 'status', 'url', 'image_url', 'disaster_type', 'report_data', 'instance_region_code', 'local_area_id', 'title', 'text'] as const;

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

function toBatch(c: ArrowColumns): RecordBatch {
  const length = c.pkey.length;
  const created = BigInt64Array.from(c.created_at as bigint[]);
  const children = FIELDS.map((field) => {
    const name = field.name as keyof ArrowColumns;
    if (name === 'created_at') return makeData({ type: field.type as TimestampMicrosecond, length, nullCount: 0, data: created });
    if ((STRINGS as readonly string[]).includes(name)) return vectorFromArray(c[name] as (string | null)[], new Utf8()).data[0]!;
    if (name === 'geometry') return vectorFromArray(c.geometry as (Uint8Array | null)[], new Binary()).data[0]!;
    return vectorFromArray(c[name] as number[], new Float64()).data[0]!;
  });
  return new RecordBatch(SCHEMA, makeData({ type: new Struct(FIELDS), length, nullCount: 0, children }));
}

const EMPTY = Object.fromEntries(FIELDS.map((f) => [f.name, []])) as unknown as ArrowColumns;

async function* recordBatches(days: AsyncIterable<ArrowColumns>): AsyncIterable<RecordBatch> {
  let wrote = false;
  for await (const day of days) {
    if (day.pkey.length === 0) continue;
    yield toBatch(day);
    wrote = true;
  }
  // An empty window still carries the schema, so readers know the columns.
  if (!wrote) yield toBatch(EMPTY);
}

/** The IPC stream bytes (Content-Type application/vnd.apache.arrow.stream). */
export function arrowStream(days: AsyncIterable<ArrowColumns>): Duplex {
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
