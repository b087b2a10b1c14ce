// Writes parts' ready texts (FORMAT.md): a part's reports serialised once, in answer order, by
// the same SQL as DuckDB's answers (a TopoJSON item made of its GeoJSON item's bytes), so an
// answer read from them is byte for byte the one DuckDB would build; several small parts' by one
// set of queries, each part's text the same as built alone.
import fs from 'node:fs/promises';
import { sqlString, type DuckDb } from '../duckdb.js';
import { copyAnswerParquet } from '../answerFormParquet.js';
import { batchMessages, type ArrowDay } from '../arrow.js';
import { arrowDaysOf } from '../arrowDay.js';
import { HOUR_MS } from '../plan.js';
import { partsSql } from '../readRows.js';
import { ANSWER_KEYS, GEOJSON_OVER_TOPOJSON, ITEM_SQL, topojsonOfGeojson } from '../sql.js';
import { ITEM_BYTES, itemColumns, NO_CITY, READY_TEXTS, READY_VERSION, separatorOf, type ReadyHour, type ReadyIndex, type ReadyShape } from './readyFormat.js';
import { gzipMember } from './readyMember.js';

/**
 * The ready texts of one part file. Purged retractions (tombstones in the part) are left out, as
 * answers leave them out. The texts come from the same SQL as DuckDB's answers (TopoJSON from
 * the GeoJSON bytes), so an answer read from them is byte for byte the one DuckDB would build.
 * `scratch`: a local path to build them at (removed before returning).
 */
export async function readyTextsOf(db: DuckDb, partFile: string, scratch: string): Promise<Buffer> {
  return (await readyTextsOfParts(db, [partFile], scratch))[0]!;
}

/**
 * The ready texts of several part files, each exactly what `readyTextsOf` gives for it alone,
 * made by one set of queries over all of their rows: each query has a fixed cost of some
 * milliseconds, most of a small part's texts (a day of a file spread over a year).
 */
export async function readyTextsOfParts(db: DuckDb, partFiles: readonly string[], scratch: string, timings?: ReadyTimings): Promise<Buffer[]> {
  if (partFiles.length === 0) return [];
  const files: ScratchFiles = { parquet: partFiles.map((_, k) => `${scratch}.${k}.parquet`), geojson: `${scratch}.geojson`, csv: `${scratch}.csv` };
  // Each part's rows numbered by the part (by name: a part written before a column was added lacks it).
  const rowsSql = partFiles.map((file, k) => `SELECT ${k} AS part_no, * FROM ${partsSql(sqlString(file))} WHERE status <> 'retracted'`).join(' UNION ALL BY NAME ');
  try {
    return await buildReady(db, rowsSql, partFiles.length, files, timings);
  } finally {
    await Promise.all([...files.parquet, files.geojson, files.csv].map((file) => fs.rm(file, { force: true })));
  }
}

/** Writes the ready texts of one part file to `out` (see readyTextsOf). */
export async function writeReadyTexts(db: DuckDb, partFile: string, out: string): Promise<void> {
  await fs.writeFile(out, await readyTextsOf(db, partFile, out));
}

/** The steps of building ready texts: DuckDB's queries in turn, then this thread's assembly (items, TopoJSON, deflate, index). */
export type ReadyStep = 'rows' | 'parquet' | 'hours' | 'geojson' | 'csv' | 'arrow' | 'assemble';
/** Milliseconds spent in each step, added to by each build given it (the benchmark's probe of where the time goes). */
export type ReadyTimings = Partial<Record<ReadyStep, number>>;

async function timed<T>(timings: ReadyTimings | undefined, step: ReadyStep, work: () => Promise<T>): Promise<T> {
  if (!timings) return work();
  const started = performance.now();
  try {
    return await work();
  } finally {
    timings[step] = (timings[step] ?? 0) + performance.now() - started;
  }
}

const HOUR_SQL = `epoch_ms(created_at) // ${HOUR_MS} * ${HOUR_MS}`;

/**
 * The shapes DuckDB serialises, each report once: GeoJSON and CSV. A TopoJSON item is made of
 * its GeoJSON item's bytes (topojsonOfGeojson), not serialised again.
 */
const SERIALISED = ['geojson', 'csv'] as const;

/**
 * DuckDB's CSV writer with neither quotes nor escapes writes a one-column row as its bytes and a
 * newline (named, not left to the platform): a raw text writer. Items are written one a line, in
 * answer order, with what their shape's separator has before its newline: an hour's text is then
 * a slice of the file.
 */
const RAW_LINES = "(FORMAT csv, HEADER false, QUOTE '', ESCAPE '', NEW_LINE '\\n')";

/** Every part's rows in turn, each in answer order. */
const PARTS_ORDER = `ORDER BY part_no, ${ANSWER_KEYS}`;

type HourRow = [number, bigint, number, number, number, number, number, bigint, bigint];

/** Where texts are built: each part's answer-form Parquet file, and each serialised shape's items a line. */
type ScratchFiles = { parquet: string[] } & Record<(typeof SERIALISED)[number], string>;

/** One part's share of the queries' results. */
interface PartRows {
  /** Its hours, newest first: hour, count, bbox, oldest and newest time. */
  hours: HourRow[];
  geojson: Lines;
  csv: Lines;
  arrow: ArrowDay;
  parquetFile: string;
}

/** A shape's texts, an hour each, and its items' lengths. */
interface Lines {
  hours: Buffer[];
  lengths: number[];
}

async function buildReady(db: DuckDb, rowsSql: string, partCount: number, files: ScratchFiles, timings: ReadyTimings | undefined): Promise<Buffer[]> {
  const [rows, arrows] = await db.withConnection(async (conn) => {
    try {
      // The parts decoded once: every query below reads them (the Parquet files, each time, cost
      // more than the query).
      await timed(timings, 'rows', () => conn.run(`CREATE OR REPLACE TEMP TABLE ready_rows AS ${rowsSql}`));
      const from = 'FROM ready_rows';
      for (let k = 0; k < partCount; k++) await timed(timings, 'parquet', () => copyAnswerParquet(conn, `(SELECT * ${from} WHERE part_no = ${k})`, files.parquet[k]!));
      const hours = (
        await timed(timings, 'hours', () =>
          conn.runAndReadAll(
            `SELECT part_no::INTEGER, ${HOUR_SQL} AS hour_ms, count(*)::INTEGER AS n, min(lng) AS min_lng, min(lat) AS min_lat, max(lng) AS max_lng, max(lat) AS max_lat,
              min(epoch_ms(created_at)) AS min_ms, max(epoch_ms(created_at)) AS max_ms
            ${from} GROUP BY 1, 2 ORDER BY 1, 2 DESC`,
          ),
        )
      ).getRowsJS() as HourRow[];
      // Each report serialised once as GeoJSON and once as CSV, written one item a line in answer
      // order: joining the items in DuckDB (ordered aggregates, then a copy of each hour's text
      // out of its memory) took longer (docs/performance.md).
      for (const shape of SERIALISED) {
        const line = separatorOf(shape).slice(0, -1);
        await timed(timings, shape, () => conn.run(`COPY (SELECT concat(${ITEM_SQL[shape]}, ${sqlString(line)}) ${from} ${PARTS_ORDER}) TO ${sqlString(files[shape])} ${RAW_LINES}`));
      }
      const counts = new Array<number>(partCount).fill(0);
      for (const [part, , n] of hours) counts[part] = counts[part]! + n;
      return [hours, await timed(timings, 'arrow', () => arrowDaysOf(conn, { sql: `(SELECT * ${from})`, values: {}, types: {} }, PARTS_ORDER, counts))] as const;
    } finally {
      await conn.run('DROP TABLE IF EXISTS ready_rows');
    }
  });
  return timed(timings, 'assemble', () => assemble(rows, arrows, partCount, files));
}

/** Each part's ready texts from the queries' results and files. */
async function assemble(rows: readonly HourRow[], arrows: readonly ArrowDay[], partCount: number, files: ScratchFiles): Promise<Buffer[]> {
  // Each hour's text in each shape, and each item's length, then each part's share of them.
  const hourCounts = rows.map((r) => r[2]);
  const geojson = itemsOf(await fs.readFile(files.geojson), 'geojson', hourCounts);
  const csv = itemsOf(await fs.readFile(files.csv), 'csv', hourCounts);
  const parts: PartRows[] = [];
  let hourAt = 0;
  let itemAt = 0;
  for (let k = 0; k < partCount; k++) {
    const hours = [];
    while (hourAt < rows.length && rows[hourAt]![0] === k) hours.push(rows[hourAt++]!);
    const first = hourAt - hours.length;
    const n = arrows[k]!.length;
    const share = (lines: Lines): Lines => ({ hours: lines.hours.slice(first, hourAt), lengths: lines.lengths.slice(itemAt, itemAt + n) });
    parts.push({ hours, geojson: share(geojson), csv: share(csv), arrow: arrows[k]!, parquetFile: files.parquet[k]! });
    itemAt += n;
  }
  const out: Buffer[] = [];
  for (const part of parts) out.push(await readyTextOf(part));
  return out;
}

/** One part's ready texts from its share of the queries' results. */
async function readyTextOf({ hours: rows, geojson, csv, arrow, parquetFile }: PartRows): Promise<Buffer> {
  const shapes = READY_TEXTS.map(({ shape }) => shape);
  const counts = rows.map((r) => r[2]);
  let next = 0;
  const texts: Record<ReadyShape, Uint8Array>[] = counts.map((count, h) => {
    const topojson = topojsonTextOf(geojson.hours[h]!, geojson.lengths.slice(next, (next += count)));
    return { geojson: geojson.hours[h]!, topojson, csv: csv.hours[h]! };
  });
  const lengthsOf: Record<ReadyShape, readonly number[]> = { geojson: geojson.lengths, topojson: geojson.lengths.map((n) => n - GEOJSON_OVER_TOPOJSON), csv: csv.lengths };
  const lengths = shapes.map((shape) => lengthsOf[shape]);
  // Offsets count from the end of the index line. Each hour's section is one gzip member,
  // compressed on the thread pool (both cores), or at once when short (readyMember.ts), sections
  // one after another.
  const body: Uint8Array[] = [];
  let first = 0;
  const hours: ReadyHour[] = rows.map((r) => {
    const hour: ReadyHour = { hourMs: Number(r[1]), count: r[2], first, bbox: [r[3], r[4], r[5], r[6]], minMs: Number(r[7]), maxMs: Number(r[8]), geojson: [0, 0], topojson: [0, 0], csv: [0, 0], arrow: [0, 0] };
    first += r[2];
    return hour;
  });
  const messages = batchMessages(arrow, hours.map((h) => [h.first, h.first + h.count] as const));
  const sections: [ReadyShape | 'arrow', Uint8Array[]][] = [...READY_TEXTS.map(({ shape }): [ReadyShape, Uint8Array[]] => [shape, texts.map((t) => t[shape])]), ['arrow', messages]];
  const members = await Promise.all(sections.map(([, plain]) => Promise.all(plain.map(gzipMember))));
  let at = 0;
  sections.forEach(([shape], s) => {
    members[s]!.forEach((member, i) => {
      hours[i]![shape] = [at, at + member.byteLength];
      body.push(member);
      at += member.byteLength;
    });
  });
  // The per-report index, 8-byte aligned: created_at (µs), lng, lat, each item's end in each
  // shape, its city (an index into `codes`; NO_CITY: none). The Arrow day holds them, in answer
  // order too: its columns, and the city codes' bytes.
  const n = arrow.length;
  const cityCodes = arrow.strings.instance_region_code;
  const cityBytes = Buffer.from(cityCodes.data.buffer, cityCodes.data.byteOffset, cityCodes.data.byteLength);
  const pad = (8 - (at % 8)) % 8;
  body.push(new Uint8Array(pad));
  const itemsAt = at + pad;
  const block = new ArrayBuffer(n * ITEM_BYTES);
  const columns = itemColumns(block, n);
  const { createdUs: created, lng, lat, city } = columns;
  const ends = READY_TEXTS.map(({ shape }) => columns.ends[shape]);
  const codes: string[] = [];
  const codeIndex = new Map<string, number>();
  // Positions in each section's plain text: a separator before every item but the first.
  const separators = READY_TEXTS.map(({ separator }) => separator.length);
  const pos = READY_TEXTS.map((_, s) => -separators[s]!);
  for (let i = 0; i < n; i++) {
    created[i] = Number(arrow.createdUs[i]!);
    lng[i] = arrow.lng[i]!;
    lat[i] = arrow.lat[i]!;
    const isNull = cityCodes.validity !== undefined && (cityCodes.validity[i >> 3]! & (1 << (i & 7))) === 0;
    if (isNull) city[i] = NO_CITY;
    else {
      const code = cityBytes.toString('utf8', cityCodes.offsets[i], cityCodes.offsets[i + 1]);
      let c = codeIndex.get(code);
      if (c === undefined) codeIndex.set(code, (c = codes.push(code) - 1));
      city[i] = c;
    }
    ends.forEach((e, s) => {
      pos[s] = pos[s]! + separators[s]! + lengths[s]![i]!;
      e[i] = pos[s]!;
    });
  }
  if (codes.length >= NO_CITY) throw new Error(`a part holds more than ${NO_CITY - 1} cities`);
  body.push(new Uint8Array(block));
  const parquetAt = itemsAt + block.byteLength;
  const parquet = await fs.readFile(parquetFile);
  body.push(parquet);
  const index: ReadyIndex = { version: READY_VERSION, hours, items: { at: itemsAt, count: n, codes }, parquet: [parquetAt, parquetAt + parquet.byteLength] };
  return Buffer.concat([Buffer.from(`${JSON.stringify(index)}\n`), ...body]);
}

const NEWLINE = 0x0a;
const QUOTE = 0x22;

/**
 * A serialised shape's lines (SERIALISED) as its hours' texts (`counts` items each, newest hour
 * first) and its items' lengths. A JSON item holds no raw newline (to_json escapes them), so a
 * newline ends it; a CSV item ends at a newline outside quotes (a quoted cell may hold newlines).
 */
function itemsOf(lines: Buffer, shape: (typeof SERIALISED)[number], counts: readonly number[]): Lines {
  const before = separatorOf(shape).length - 1;
  const hours: Buffer[] = [];
  const lengths: number[] = [];
  let at = 0;
  for (const count of counts) {
    const start = at;
    let end = at;
    for (let k = 0; k < count; k++) {
      const newline = shape === 'csv' ? csvLineEnd(lines, at) : lines.indexOf(NEWLINE, at);
      if (newline < 0) break;
      end = newline - before;
      lengths.push(end - at);
      at = newline + 1;
    }
    hours.push(lines.subarray(start, end));
  }
  if (at !== lines.length || lengths.length !== counts.reduce((a, b) => a + b, 0)) throw new Error(`ready texts: the ${shape} lines written are not the part's reports`);
  return { hours, lengths };
}

/**
 * The newline that ends the CSV item at `from`: the first outside quotes. A cell's own quotes are
 * doubled, so each one opens or closes a quoted run.
 */
function csvLineEnd(text: Uint8Array, from: number): number {
  let quoted = false;
  for (let i = from; i < text.length; i++) {
    const b = text[i];
    if (b === QUOTE) quoted = !quoted;
    else if (b === NEWLINE && !quoted) return i;
  }
  return -1;
}

/** An hour's TopoJSON text: its GeoJSON items (of `lengths` bytes, joined by GeoJSON's separator) made TopoJSON items, joined by TopoJSON's. */
function topojsonTextOf(text: Buffer, lengths: readonly number[]): Buffer {
  const between = Buffer.from(separatorOf('topojson'));
  const geojsonBetween = Buffer.byteLength(separatorOf('geojson'));
  const out = Buffer.allocUnsafe(text.length - lengths.length * GEOJSON_OVER_TOPOJSON - (lengths.length - 1) * (geojsonBetween - between.length));
  let from = 0;
  let at = 0;
  lengths.forEach((n, i) => {
    if (i > 0) {
      at += between.copy(out, at);
      from += geojsonBetween;
    }
    at = topojsonOfGeojson(text, from, from + n, out, at);
    from += n;
  });
  return out;
}
