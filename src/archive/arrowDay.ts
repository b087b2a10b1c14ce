// A window's rows as Arrow buffers built by DuckDB: typed arrays for the fixed-width columns, and
// every string value in one text, not value by value.
import type { DuckDBConnection } from '@duckdb/node-api';
import { STRING_COLUMNS, stringSqlOf, type ArrowDay, type StringBuffers, type StringColumn } from './arrow.js';
import { rowsWithBytesOf } from './duckdb.js';
import { ANSWER_ORDER, type Bound } from './sql.js';

const textOf = (c: StringColumn) => stringSqlOf(c);

/** The rows of `bound` in answer order as Arrow buffers built by DuckDB. */
export async function arrowDayOf(conn: DuckDBConnection, bound: Bound): Promise<ArrowDay> {
  return (await arrowDaysOf(conn, bound, ANSWER_ORDER))[0]!;
}

/**
 * The rows of `bound` in `order` as Arrow buffers built by DuckDB, cut into consecutive days of
 * `counts` rows each (one of every row when absent): several parts' rows, read by one pair of
 * queries (each query has a fixed cost of some milliseconds).
 */
export async function arrowDaysOf(conn: DuckDBConnection, bound: Bound, order: string, counts?: readonly number[]): Promise<ArrowDay[]> {
  const lengthsSql = STRING_COLUMNS.map((c) => `coalesce(strlen(${textOf(c)}), -1)::INTEGER`);
  // Each row's strings end to end (concat skips nulls), rows in order: one ordered aggregate,
  // where one for each column cost about twice as much.
  const rowsText = `encode(coalesce(string_agg(concat(${STRING_COLUMNS.map(textOf).join(', ')}), '' ${order}), ''))`;
  const fixed: { created: BigInt64Array[]; lng: Float64Array[]; lat: Float64Array[]; lens: Int32Array[][] } = { created: [], lng: [], lat: [], lens: STRING_COLUMNS.map(() => []) };
  const result = await conn.stream(`SELECT epoch_us(created_at), lng, lat, ${lengthsSql.join(', ')} FROM ${bound.sql} ${order}`, bound.values, bound.types);
  for await (const chunk of result) {
    // The typed arrays are views on the chunk: copied before it goes.
    const items = (i: number) => (chunk.getColumnVector(i) as unknown as { items: BigInt64Array | Float64Array | Int32Array }).items.slice(0, chunk.rowCount);
    fixed.created.push(items(0) as BigInt64Array);
    fixed.lng.push(items(1) as Float64Array);
    fixed.lat.push(items(2) as Float64Array);
    STRING_COLUMNS.forEach((_, c) => fixed.lens[c]!.push(items(3 + c) as Int32Array));
  }
  const text = (await rowsWithBytesOf(conn, `SELECT ${rowsText} FROM ${bound.sql}`, bound.values, bound.types))[0]![0] as Uint8Array;
  const length = fixed.created.reduce((n, a) => n + a.length, 0);
  const lengths = fixed.lens.map((lens) => concat(Int32Array, lens, length));
  const data = columnsOf(text, lengths);
  const createdUs = concat(BigInt64Array, fixed.created, length);
  const lng = concat(Float64Array, fixed.lng, length);
  const lat = concat(Float64Array, fixed.lat, length);
  const cuts = counts ?? [length];
  if (cuts.reduce((n, c) => n + c, 0) !== length) throw new Error(`Arrow rows (${length}) do not match the days' counts (${cuts.join(', ')})`);
  if (cuts.length === 1) return [{ length, createdUs, lng, lat, strings: stringsOf(lengths, data) }];
  // Each day its own copy of its rows, as one day read alone would have.
  const bytesAt = new Array<number>(lengths.length).fill(0);
  let from = 0;
  return cuts.map((n) => {
    const to = from + n;
    const dayLengths = lengths.map((lens) => lens.slice(from, to));
    const dayData = dayLengths.map((lens, c) => {
      const bytes = lens.reduce((sum, k) => sum + Math.max(0, k), 0);
      const out = data[c]!.slice(bytesAt[c], bytesAt[c]! + bytes);
      bytesAt[c] = bytesAt[c]! + bytes;
      return out;
    });
    const day: ArrowDay = { length: n, createdUs: createdUs.slice(from, to), lng: lng.slice(from, to), lat: lat.slice(from, to), strings: stringsOf(dayLengths, dayData) };
    from = to;
    return day;
  });
}

function stringsOf(lengths: readonly Int32Array[], data: readonly Uint8Array[]): Record<StringColumn, StringBuffers> {
  return Object.fromEntries(STRING_COLUMNS.map((c, i) => [c, stringBuffers(lengths[i]!, data[i]!)])) as Record<StringColumn, StringBuffers>;
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

/**
 * Each column's bytes end to end, out of the rows' text (each row's values in column order), given
 * every value's byte length (-1: null, no bytes).
 */
function columnsOf(text: Uint8Array, lengths: readonly Int32Array[]): Uint8Array[] {
  const data = lengths.map((lens) => new Uint8Array(lens.reduce((sum, n) => sum + Math.max(0, n), 0)));
  const total = data.reduce((sum, d) => sum + d.length, 0);
  if (total !== text.length) throw new Error(`string bytes (${text.length}) do not match their lengths (${total})`);
  const at = new Int32Array(lengths.length);
  const rows = lengths[0]?.length ?? 0;
  let from = 0;
  for (let i = 0; i < rows; i++) {
    for (let c = 0; c < lengths.length; c++) {
      const n = lengths[c]![i]!;
      if (n <= 0) continue;
      const out = data[c]!;
      let to = at[c]!;
      // Most values are a few bytes: a loop, not a call, for them.
      if (n < 64) for (let k = 0; k < n; k++) out[to++] = text[from + k]!;
      else {
        out.set(text.subarray(from, from + n), to);
        to += n;
      }
      at[c] = to;
      from += n;
    }
  }
  return data;
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
