// A window's Arrow answer: stored record batches of whole hours, and the typed columns DuckDB
// reads for the rest.
import type { WindowContext } from './context.js';
import { HOUR_MS, isClean, isDayClean, partsOf, type DayPlan } from './plan.js';
import { isUnfiltered, type WindowQuery } from './query.js';
import { streamHours, type ReadyFile } from './ready.js';
import { STRING_COLUMNS, stringSqlOf, type ArrowDay, type StringBuffers, type StringColumn } from './arrow.js';
import { candidatesOf, readyRuns, type ReadyRun } from './render.js';
import { ANSWER_ORDER, filteredRows, type Bound } from './sql.js';
import type { DuckDBConnection } from '@duckdb/node-api';

const textOf = (c: StringColumn) => stringSqlOf(c);

/**
 * One UTC day of the window as Arrow record batches, newest first: whole hours held in one
 * sidecar are its ready batches, read as they are (consecutive hours of one sidecar: one
 * range); the other hours (several parts, cut by the window, a retraction since) are built
 * from the buffers DuckDB reads, a run of consecutive hours per query. Filtered windows are
 * built by DuckDB a day at a time.
 */
export async function* arrowDayBatches(ctx: WindowContext, query: WindowQuery, day: DayPlan): AsyncIterable<Uint8Array | ArrowDay> {
  const candidates = candidatesOf(day, query);
  const runs = isUnfiltered(query) ? await readyRuns(ctx, day, candidates, query, 'arrow', '') : new Map<number, ReadyRun>();
  const isReady = (h: number) => runs.has(h) && !runs.get(h)!.selection;
  if (!candidates.some(isReady)) {
    yield await windowArrowDay(ctx, query, day);
    return;
  }
  const partsOfHour = new Map(day.hours.map((h) => [h.hourMs, h]));
  for (let i = 0; i < candidates.length; ) {
    let j = i;
    while (j < candidates.length && isReady(candidates[j]!) === isReady(candidates[i]!)) j++;
    const group = candidates.slice(i, j);
    i = j;
    if (isReady(group[0]!)) {
      // Hours of one sidecar follow each other back to back in it.
      let pending: { ready: ReadyFile; hours: number[] } | undefined;
      const reads: (() => Iterable<Uint8Array>)[] = [];
      for (const hourMs of group) {
        const run = runs.get(hourMs)!;
        if (!run.hour) continue;
        if (pending?.ready === run.ready) pending.hours.push(hourMs);
        else {
          if (pending) reads.push(streamHours(pending.ready, pending.hours, 'arrow', false));
          pending = { ready: run.ready, hours: [hourMs] };
        }
      }
      if (pending) reads.push(streamHours(pending.ready, pending.hours, 'arrow', false));
      for (const read of reads) yield* read();
      continue;
    }
    ctx.signal?.throwIfAborted();
    const hours = group.flatMap((h) => partsOfHour.get(h) ?? []);
    const narrowed = { ...query, startMs: Math.max(query.startMs, group[group.length - 1]!), endMs: Math.min(query.endMs, group[0]! + HOUR_MS - 1) };
    const bound = filteredRows(await ctx.files([...day.whole, ...hours.flatMap((h) => h.parts)]), narrowed, isClean(day.whole, hours));
    yield await ctx.db.withConnection((conn) => arrowDayOf(conn, bound), ctx.signal);
  }
}

/** One UTC day of the window as Arrow buffers. */
export async function windowArrowDay(ctx: WindowContext, query: WindowQuery, day: DayPlan): Promise<ArrowDay> {
  const bound = filteredRows(await ctx.files(partsOf(day)), query, isDayClean(day));
  return ctx.db.withConnection((conn) => arrowDayOf(conn, bound), ctx.signal);
}

/** The rows of `bound` in answer order as Arrow buffers built by DuckDB. */
export async function arrowDayOf(conn: DuckDBConnection, bound: Bound): Promise<ArrowDay> {
  const lengths = STRING_COLUMNS.map((c) => `coalesce(strlen(${textOf(c)}), -1)::INTEGER`);
  const bytes = STRING_COLUMNS.map((c) => `encode(coalesce(string_agg(${textOf(c)}, '' ${ANSWER_ORDER}), ''))`);
  const fixed: { created: BigInt64Array[]; lng: Float64Array[]; lat: Float64Array[]; lens: Int32Array[][] } = { created: [], lng: [], lat: [], lens: STRING_COLUMNS.map(() => []) };
  const result = await conn.stream(`SELECT epoch_us(created_at), lng, lat, ${lengths.join(', ')} FROM ${bound.sql} ${ANSWER_ORDER}`, bound.values, bound.types);
  for await (const chunk of result) {
    // The typed arrays are views on the chunk: copied before it goes.
    const items = (i: number) => (chunk.getColumnVector(i) as unknown as { items: BigInt64Array | Float64Array | Int32Array }).items.slice(0, chunk.rowCount);
    fixed.created.push(items(0) as BigInt64Array);
    fixed.lng.push(items(1) as Float64Array);
    fixed.lat.push(items(2) as Float64Array);
    STRING_COLUMNS.forEach((_, c) => fixed.lens[c]!.push(items(3 + c) as Int32Array));
  }
  const texts = (await conn.runAndReadAll(`SELECT ${bytes.join(', ')} FROM ${bound.sql}`, bound.values, bound.types)).getRowsJS()[0] as Uint8Array[];
  const length = fixed.created.reduce((n, a) => n + a.length, 0);
  const strings = Object.fromEntries(STRING_COLUMNS.map((c, i) => [c, stringBuffers(concat(Int32Array, fixed.lens[i]!, length), texts[i]!)])) as Record<StringColumn, StringBuffers>;
  return { length, createdUs: concat(BigInt64Array, fixed.created, length), lng: concat(Float64Array, fixed.lng, length), lat: concat(Float64Array, fixed.lat, length), strings };
}

function concat<T extends BigInt64Array | Float64Array | Int32Array>(Type: { new (n: number): T }, parts: T[], length: number): T {
  const out = new Type(length);
  let at = 0;
  for (const p of parts) {
    (out as unknown as { set(a: T, at: number): void }).set(p, at);
    at += p.length;
  }
  return out;
}

/** Offsets and validity from byte lengths (-1: null). */
function stringBuffers(lengths: Int32Array, data: Uint8Array): StringBuffers {
  const offsets = new Int32Array(lengths.length + 1);
  let validity: Uint8Array | undefined;
  let nullCount = 0;
  for (let i = 0; i < lengths.length; i++) {
    const n = lengths[i]!;
    if (n < 0) {
      if (!validity) validity = new Uint8Array((lengths.length + 7) >> 3).fill(0xff);
      validity[i >> 3]! &= ~(1 << (i & 7));
      nullCount += 1;
      offsets[i + 1] = offsets[i]!;
    } else offsets[i + 1] = offsets[i]! + n;
  }
  if (offsets[lengths.length] !== data.length) throw new Error(`string bytes (${data.length}) do not match their lengths (${offsets[lengths.length]})`);
  return { offsets, data, validity, nullCount };
}

export type { ArrowDay } from './arrow.js';
