// Writes a part's ready texts (FORMAT.md): its reports serialised once, in answer order, by the
// same SQL as DuckDB's answers, so an answer read from them is byte for byte the one DuckDB
// would build.
import fs from 'node:fs/promises';
import { sqlString, type DuckDb } from '../duckdb.js';
import { copyAnswerParquet } from '../answerFormParquet.js';
import { batchMessages } from '../arrow.js';
import { arrowDayOf } from '../arrowDay.js';
import { HOUR_MS } from '../plan.js';
import { partsSql } from '../readRows.js';
import { ITEM_SQL } from '../sql.js';
import { ITEM_BYTES, itemColumns, NO_CITY, READY_TEXTS, READY_VERSION, type ReadyHour, type ReadyIndex } from './readyFormat.js';

/**
 * Writes the ready texts of one part file. Purged retractions (tombstones in the part) are left
 * out, as answers leave them out. The texts come from the same SQL as DuckDB's answers, so an
 * answer read from them is byte for byte the one DuckDB would build.
 */
export async function writeReadyTexts(db: DuckDb, partFile: string, out: string): Promise<void> {
  const from = `FROM ${partsSql(sqlString(partFile))} WHERE status <> 'retracted'`;
  const answerParquet = `${out}.parquet`;
  try {
    await writeReady(db, from, answerParquet, out);
  } finally {
    await fs.rm(answerParquet, { force: true });
  }
}

async function writeReady(db: DuckDb, from: string, answerParquet: string, out: string): Promise<void> {
  const texts = READY_TEXTS.map(({ shape, separator }) => `encode(string_agg(${ITEM_SQL[shape]}, ${sqlString(separator)} ORDER BY created_at DESC, pkey DESC)) AS ${shape}`);
  const [rows, items, arrow] = await db.withConnection(async (conn) => {
    await copyAnswerParquet(conn, `(SELECT * ${from})`, answerParquet);
    const hours = await conn.runAndReadAll(
      `SELECT epoch_ms(created_at) // ${HOUR_MS} * ${HOUR_MS} AS hour_ms, count(*)::INTEGER AS n,
          min(lng) AS min_lng, min(lat) AS min_lat, max(lng) AS max_lng, max(lat) AS max_lat,
          min(epoch_ms(created_at)) AS min_ms, max(epoch_ms(created_at)) AS max_ms, ${texts.join(', ')}
        ${from} GROUP BY 1 ORDER BY 1 DESC`,
    );
    // Each report's sort key, place, city and byte lengths, in answer order (strlen: bytes).
    const each = await conn.runAndReadAll(
      `SELECT epoch_us(created_at)::DOUBLE, lng, lat, instance_region_code, ${READY_TEXTS.map(({ shape }) => `strlen(${ITEM_SQL[shape]})::INTEGER`).join(', ')}
        ${from} ORDER BY created_at DESC, pkey DESC`,
    );
    return [
      hours.getRowsJS() as [bigint, number, number, number, number, number, bigint, bigint, Uint8Array, Uint8Array, Uint8Array][],
      each.getRowsJS() as [number, number, number, string | null, number, number, number][],
      await arrowDayOf(conn, { sql: `(SELECT * ${from})`, values: {}, types: {} }),
    ] as const;
  });
  // Offsets count from the end of the index line.
  const body: Uint8Array[] = [];
  let first = 0;
  const hours: ReadyHour[] = rows.map((r) => {
    const hour: ReadyHour = { hourMs: Number(r[0]), count: r[1], first, bbox: [r[2], r[3], r[4], r[5]], minMs: Number(r[6]), maxMs: Number(r[7]), geojson: [0, 0], topojson: [0, 0], csv: [0, 0], arrow: [0, 0] };
    first += r[1];
    return hour;
  });
  let at = 0;
  const starts = READY_TEXTS.map(({ shape, separator }, s) => {
    // Sections start 8-byte aligned (the Arrow messages must be).
    const pad = (8 - (at % 8)) % 8;
    body.push(new Uint8Array(pad));
    at += pad;
    const start = at;
    rows.forEach((r, i) => {
      if (i > 0) {
        body.push(Buffer.from(separator));
        at += 1;
      }
      const text = r[8 + s] as Uint8Array;
      hours[i]![shape] = [at, at + text.byteLength];
      body.push(text);
      at += text.byteLength;
    });
    return start;
  });
  // Each hour's Arrow record batch, hours back to back (8-byte aligned, as IPC messages are).
  const messages = batchMessages(arrow, hours.map((h) => [h.first, h.first + h.count] as const));
  for (const [i, hour] of hours.entries()) {
    const message = messages[i]!;
    hour.arrow = [at, at + message.byteLength];
    body.push(message);
    at += message.byteLength;
  }
  // The per-report index, 8-byte aligned: created_at (µs), lng, lat, each item's end in each
  // shape, its city (an index into `codes`; NO_CITY: none).
  const n = items.length;
  const pad = (8 - (at % 8)) % 8;
  body.push(new Uint8Array(pad));
  const itemsAt = at + pad;
  const block = new ArrayBuffer(n * ITEM_BYTES);
  const columns = itemColumns(block, n);
  const { createdUs: created, lng, lat, city } = columns;
  const ends = READY_TEXTS.map(({ shape }) => columns.ends[shape]);
  const codes: string[] = [];
  const codeIndex = new Map<string, number>();
  const pos = starts.map((start) => start - 1);
  items.forEach((r, i) => {
    created[i] = r[0];
    lng[i] = r[1];
    lat[i] = r[2];
    if (r[3] === null) city[i] = NO_CITY;
    else {
      let c = codeIndex.get(r[3]);
      if (c === undefined) codeIndex.set(r[3], (c = codes.push(r[3]) - 1));
      city[i] = c;
    }
    ends.forEach((e, s) => {
      // One separator before every item but the first (also between hours).
      pos[s] = pos[s]! + 1 + (r[4 + s] as number);
      e[i] = pos[s]!;
    });
  });
  if (codes.length >= NO_CITY) throw new Error(`a part holds more than ${NO_CITY - 1} cities`);
  body.push(new Uint8Array(block));
  const parquetAt = itemsAt + block.byteLength;
  const parquet = await fs.readFile(answerParquet);
  body.push(parquet);
  const index: ReadyIndex = { version: READY_VERSION, hours, items: { at: itemsAt, count: n, codes }, parquet: [parquetAt, parquetAt + parquet.byteLength] };
  // One write: given the pieces, writeFile awaits a write per piece (thousands for a busy part).
  await fs.writeFile(out, Buffer.concat([Buffer.from(`${JSON.stringify(index)}\n`), ...body]));
}
