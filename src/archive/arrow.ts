// Arrow IPC stream of an archive window: one record batch per UTC day,
// built with apache-arrow from DuckDB's columns; the writer streams with
// Node back-pressure.
import { Readable, type Duplex } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Float64, RecordBatch, RecordBatchStreamWriter, Table, TimestampMillisecond, Utf8, vectorFromArray } from 'apache-arrow';
import type { EXPORT_COLUMNS } from './reader.js';

type Columns = Record<(typeof EXPORT_COLUMNS)[number], unknown[]>;

const strings = (values: unknown[]) => vectorFromArray(values as (string | null)[], new Utf8());

function toTable(c: Columns): Table {
  return new Table({
    pkey: strings(c.pkey),
    created_at: vectorFromArray((c.created_at as (number | bigint)[]).map(Number), new TimestampMillisecond('UTC')),
    source: strings(c.source),
    status: strings(c.status),
    url: strings(c.url),
    image_url: strings(c.image_url),
    disaster_type: strings(c.disaster_type),
    report_data: strings(c.report_data),
    instance_region_code: strings(c.instance_region_code),
    local_area_id: strings(c.local_area_id),
    title: strings(c.title),
    text: strings(c.text),
    lng: vectorFromArray(c.lng as number[], new Float64()),
    lat: vectorFromArray(c.lat as number[], new Float64()),
  });
}

const EMPTY: Columns = {
  pkey: [], created_at: [], source: [], status: [], url: [], image_url: [], disaster_type: [], report_data: [],
  instance_region_code: [], local_area_id: [], title: [], text: [], lng: [], lat: [],
};

async function* recordBatches(days: AsyncIterable<Columns>): AsyncIterable<RecordBatch> {
  let wrote = false;
  for await (const day of days) {
    if (day.pkey.length === 0) continue;
    yield* toTable(day).batches;
    wrote = true;
  }
  // An empty window still carries the schema, so readers know the columns.
  if (!wrote) yield* toTable(EMPTY).batches;
}

/** The IPC stream bytes (Content-Type application/vnd.apache.arrow.stream). */
export function arrowStream(days: AsyncIterable<Columns>): Duplex {
  const writer = RecordBatchStreamWriter.throughNode() as unknown as Duplex;
  // A failed query must fail the response, not leave it hanging.
  pipeline(Readable.from(recordBatches(days)), writer).catch((err: unknown) => writer.destroy(err as Error));
  return writer;
}
