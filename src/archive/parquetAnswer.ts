// A window's Parquet answer (GeoParquet: the export columns and a WKB geometry, newest first).
// Unfiltered windows are spliced from row groups stored in the parts' sidecars, copied as they
// are (no report is decoded or encoded again); DuckDB writes only what cannot be copied.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { sqlString } from './duckdb.js';
import { fetchAhead } from './fetchAhead.js';
import { Holds } from './holds.js';
import { DAY_MS } from '../store/layout.js';
import type { ObjectInfo } from '../store/objectStore.js';
import type { WindowContext } from './context.js';
import { GEOMETRY_SQL, geoCopyOption, prepareGeometry } from './geoparquet.js';
import { closeAll, readFooter, rowsOf, schemaOf, spliceParquet, type Footer, type ParquetAnswer } from './parquetSplice.js';
import { isDayClean, partsOf, type DayPlan } from './plan.js';
import { withDayReplanned, withReplan } from './replan.js';
import { isUnfiltered, type WindowQuery } from './query.js';
import { openStoredParquet, type StoredParquet } from './sidecars/index.js';
import { ARCHIVE_TABLE_DDL } from './partColumns.js';
import { EXPORT_COLUMNS, filteredRows } from './sql.js';

/**
 * The window as one GeoParquet answer, newest first, spliced from row groups copied as they
 * are: for each day whose parts' sidecars hold exactly the window's reports of it (one
 * compacted part, or single parts of its hours, every report inside the window, nothing
 * retracted since), the answer-form Parquet stored there; each run of other days (cut by the
 * window, several parts to de-duplicate, a retraction not yet purged, sidecars without it)
 * written by DuckDB in one streaming COPY a month (RUN_DAYS) at most. Filtered windows, syncs
 * and tombstones are such runs. Every answer gets its footer from the splice, whose `geo` bbox
 * comes from the row groups' lng/lat statistics: DuckDB need not scan the rows for it.
 */
export async function windowParquet(ctx: WindowContext, query: WindowQuery, days: readonly DayPlan[], tmpDir: string): Promise<ParquetAnswer> {
  await fs.mkdir(tmpDir, { recursive: true });
  const dir = await fs.mkdtemp(path.join(tmpDir, 'parquet-'));
  const pieces: Footer[] = [];
  try {
    let run: DayPlan[] = [];
    const written = async () => {
      if (run.length === 0) return;
      pieces.push(...(await duckdbRuns(ctx, query, run, dir)));
      run = [];
    };
    const ahead = fetchAhead(ctx, days, copyable(query) ? { shape: 'parquet', filter: query } : undefined);
    for (const [i, day] of days.entries()) {
      ctx.signal?.throwIfAborted();
      ahead.reached(i);
      // Read again over a new listing of the day should a ready text of its be retired meanwhile.
      let planned = day;
      const stored = copyable(query)
        ? await withDayReplanned(ctx, day, (again) => {
            planned = again;
            return storedDay(ctx, query, again);
          })
        : undefined;
      if (!stored) {
        run.push(planned);
        // A month's days at most: a run is held whole, and tried again whole over a new listing
        // should a part of it be retired before it is held (a reprocess retires parts all along).
        if (run.length >= RUN_DAYS) await written();
        continue;
      }
      await written();
      pieces.push(...stored);
    }
    await written();
  } catch (err) {
    await closeAll(pieces.map((p) => p.source.handle));
    throw err;
  } finally {
    // The pieces DuckDB wrote stay readable through their open handles.
    await fs.rm(dir, { recursive: true, force: true });
  }
  const kept = pieces.filter((p) => rowsOf(p) > 0);
  await closeAll(pieces.filter((p) => rowsOf(p) === 0).map((p) => p.source.handle));
  // An empty window: DuckDB's empty file, which carries the schema.
  if (kept.length === 0) return duckdbFile(ctx, query, [], tmpDir);
  const schema = schemaOf(kept[0]!);
  if (kept.some((p) => schemaOf(p) !== schema)) {
    // Sidecars of another schema (an older release's): DuckDB writes the whole window, RUN_DAYS at a time.
    await closeAll(kept.map((p) => p.source.handle));
    const whole = await duckdbRuns(ctx, query, days, tmpDir);
    return whole.length > 0 ? spliceParquet(whole) : duckdbFile(ctx, query, [], tmpDir);
  }
  return spliceParquet(kept);
}

/** Days DuckDB writes into one piece at most. */
const RUN_DAYS = 31;

/** Whether stored row groups can answer the query: whole reports, no filter but the window. */
const copyable = (query: WindowQuery) => isUnfiltered(query) && !query.includeRetracted;

/**
 * The answer-form Parquet of a day from its sidecars, when they hold exactly the window's
 * reports of that day (one part per hour or one compacted part, nothing retracted since, every
 * report inside the window); undefined otherwise.
 */
async function storedDay(ctx: WindowContext, query: WindowQuery, day: DayPlan): Promise<Footer[] | undefined> {
  const sources = day.whole.length === 1 && day.hours.length === 0 ? day.whole : day.whole.length === 0 && day.hours.every((h) => h.parts.length === 1) ? day.hours.map((h) => h.parts[0]!) : undefined;
  if (!sources || (query.retracted ?? []).some((r) => r.createdMs >= day.dayMs && r.createdMs < day.dayMs + DAY_MS)) return undefined;
  // Held until each file is open: its handle then reads it, whatever the cache does.
  const holds = new Holds();
  const opened: StoredParquet[] = [];
  try {
    const files = await ctx.readyFiles(sources, { shape: 'parquet', filter: query }, holds);
    if (files.some((f) => f === undefined)) return undefined;
    for (const file of files) {
      const stored = await openStoredParquet(file!, query.startMs, query.endMs);
      if (!stored) {
        await closeAll(opened.map((o) => o.handle));
        return undefined;
      }
      opened.push(stored);
    }
    return await Promise.all(opened.map((stored) => readFooter(stored)));
  } catch (err) {
    await closeAll(opened.map((o) => o.handle));
    throw err;
  } finally {
    holds.release();
  }
}

/**
 * The days written by DuckDB RUN_DAYS at a time, each tried again alone over a new listing of
 * its days should a part of theirs be retired before it is held; the pieces that hold reports,
 * open for reading.
 */
async function duckdbRuns(ctx: WindowContext, query: WindowQuery, days: readonly DayPlan[], tmpDir: string): Promise<Footer[]> {
  const dir = await fs.mkdtemp(path.join(tmpDir, 'parquet-'));
  const pieces: Footer[] = [];
  try {
    for (let i = 0; i < days.length; i += RUN_DAYS) {
      const out = path.join(dir, `${pieces.length}.parquet`);
      pieces.push(await withReplan(ctx, days.slice(i, i + RUN_DAYS), (run) => duckdbPiece(ctx, query, run, out)));
    }
  } catch (err) {
    await closeAll(pieces.map((p) => p.source.handle));
    throw err;
  } finally {
    // The pieces stay readable through their open handles.
    await fs.rm(dir, { recursive: true, force: true });
  }
  await closeAll(pieces.filter((p) => rowsOf(p) === 0).map((p) => p.source.handle));
  return pieces.filter((p) => rowsOf(p) > 0);
}

/** Days of the window as one GeoParquet file written by DuckDB, open for reading. */
async function duckdbPiece(ctx: WindowContext, query: WindowQuery, days: readonly DayPlan[], out: string): Promise<Footer> {
  await writeWindowParquet(ctx, query, days, out);
  const handle = await fs.open(out, 'r');
  try {
    return await readFooter({ handle, offset: 0, length: (await handle.stat()).size });
  } catch (err) {
    await handle.close();
    throw err;
  }
}

/** The window written whole by DuckDB, as an answer. */
async function duckdbFile(ctx: WindowContext, query: WindowQuery, days: readonly DayPlan[], tmpDir: string): Promise<ParquetAnswer> {
  const out = path.join(tmpDir, `${randomUUID()}.parquet`);
  try {
    const piece = await duckdbPiece(ctx, query, days, out);
    // Its footer from the splice (the `geo` metadata); an empty file carries its own.
    return rowsOf(piece) > 0 ? spliceParquet([piece]) : wholeAnswer(piece);
  } finally {
    // Read through its open handle.
    await fs.rm(out, { force: true });
  }
}

/** A whole file, sent as it is. */
function wholeAnswer(piece: Footer): ParquetAnswer {
  const { handle, length } = piece.source;
  return {
    size: length,
    async *chunks() {
      try {
        for await (const chunk of handle.createReadStream({ start: 0, autoClose: false, highWaterMark: 1 << 20 })) yield chunk as Buffer;
      } finally {
        await handle.close().catch(() => undefined);
      }
    },
    close: () => handle.close().catch(() => undefined),
  };
}

/**
 * Writes the window as one Parquet file (archive columns, newest first), by one streaming
 * COPY over the window's files in answer order. Hours with a single part are read as they
 * are (each part is de-duplicated and sorted newest first); an hour with several parts is
 * first merged into a de-duplicated, sorted segment, as is a compacted day with late hour parts
 * beside it. Memory stays bounded however long the window: nothing is sorted beyond one day.
 */
async function writeWindowParquet(ctx: WindowContext, query: WindowQuery, days: readonly DayPlan[], out: string): Promise<void> {
  const segmentDir = `${out}.segments`;
  // Every part held from the start until the one COPY over them all is done: one retired while
  // the days before it are merged stays readable (a reprocess retires parts all along, and parts
  // held as their day came were gone by then).
  const holds = new Holds();
  await fs.mkdir(segmentDir, { recursive: true });
  try {
    const all = days.flatMap(partsOf);
    const indexOf = new Map(all.map((p, i) => [p, i]));
    const held = await ctx.files(all, holds);
    const files = (parts: readonly ObjectInfo[]) => parts.map((p) => held[indexOf.get(p)!]!);
    const segments: string[] = [];
    const merge = async (parts: ObjectInfo[]) => {
      const segment = path.join(segmentDir, `${String(segments.length).padStart(6, '0')}.parquet`);
      const bound = filteredRows(files(parts), query);
      await ctx.db.withMemory(
        (conn) => conn.run(`COPY (SELECT * FROM ${bound.sql} ORDER BY created_at DESC, pkey DESC) TO ${sqlString(segment)} (FORMAT parquet, COMPRESSION zstd)`, bound.values, bound.types),
        ctx.signal,
      );
      segments.push(segment);
    };
    for (const day of days) {
      ctx.signal?.throwIfAborted();
      if (day.whole.length > 0) {
        if (isDayClean(day)) segments.push(...files(day.whole));
        else await merge(partsOf(day));
        continue;
      }
      for (const hour of day.hours) {
        if (hour.parts.length === 1) segments.push(...files(hour.parts));
        else await merge(hour.parts);
      }
    }
    await ctx.db.withMemory(async (conn) => {
      // GeoParquet: a WKB geometry column after the archive columns, and the `geo` file metadata.
      await prepareGeometry(conn);
      if (segments.length === 0) {
        await conn.run(`CREATE OR REPLACE TEMP TABLE "empty" ${ARCHIVE_TABLE_DDL}`);
        await conn.run(`COPY (SELECT ${EXPORT_COLUMNS.join(', ')}, ${GEOMETRY_SQL} FROM "empty") TO ${sqlString(out)} (FORMAT parquet, COMPRESSION zstd, ${geoCopyOption(undefined)})`);
        return;
      }
      // preserve_insertion_order (DuckDB's default) keeps the files' order and their rows' order.
      await conn.run('SET preserve_insertion_order = true');
      const bound = filteredRows(segments, query, true);
      // Row groups of half DuckDB's default: its order-preserving writer then keeps both
      // threads busy (a year: 1.7 s instead of 2.2 s, for 8% more bytes). No `geo` metadata:
      // the splice writes it.
      await conn.run(
        `COPY (SELECT ${EXPORT_COLUMNS.join(', ')}, ${GEOMETRY_SQL} FROM ${bound.sql}) TO ${sqlString(out)} (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 61440)`,
        bound.values,
        bound.types,
      );
    }, ctx.signal);
  } finally {
    holds.release();
    await fs.rm(segmentDir, { recursive: true, force: true });
  }
}
