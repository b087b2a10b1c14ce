// A window's Arrow answer: stored record batches of whole hours, and the typed columns DuckDB
// reads for the rest.
import type { WindowContext } from './context.js';
import { Holds } from './holds.js';
import { HOUR_MS, isClean, isDayClean, partsOf, type DayPlan } from './plan.js';
import { isUnfiltered, type WindowQuery } from './query.js';
import type { ArrowDay } from './arrow.js';
import { arrowDayOf } from './arrowDay.js';
import { readyReads, type ReadyRun, type StoredSection } from './sidecars/index.js';
import { candidatesOf, readyRuns } from './render.js';
import { filteredRows } from './sql.js';
import { withDayReplanned } from './replan.js';

/**
 * One UTC day of the window as Arrow record batches, newest first: whole hours held in one
 * sidecar are its ready batches, read as they are (consecutive hours of one sidecar: one
 * range); the other hours (several parts, cut by the window, a retraction since) are built
 * from the buffers DuckDB reads, a run of consecutive hours per query. Filtered windows are
 * built by DuckDB a day at a time. The whole day is prepared before its first batch is given,
 * so a day whose parts are gone since the window was planned is read again (replan.ts).
 */
export async function* arrowDayBatches(ctx: WindowContext, query: WindowQuery, planned: DayPlan): AsyncIterable<Uint8Array | ArrowDay | StoredSection> {
  // The day's ready texts and parts are held until its batches have been read.
  const holds = new Holds();
  try {
    const pieces = await withDayReplanned(ctx, planned, (day) => arrowDayPieces(ctx, query, day, holds));
    for (const piece of pieces) {
      if (typeof piece === 'function') yield* piece();
      else yield piece;
    }
  } finally {
    holds.release();
  }
}

/** DuckDB's buffers of some hours, or a read of ready batches to make when they are sent. */
type Piece = ArrowDay | (() => Iterable<Uint8Array | StoredSection>);

/** A day's pieces in answer order: DuckDB's buffers, and reads of ready batches to make when they are sent. */
async function arrowDayPieces(ctx: WindowContext, query: WindowQuery, day: DayPlan, holds: Holds): Promise<Piece[]> {
  const candidates = candidatesOf(day, query);
  const runs = isUnfiltered(query) ? await readyRuns(ctx, day, candidates, query, 'arrow', '', holds) : new Map<number, ReadyRun>();
  const isReady = (h: number) => runs.get(h)?.whole === true;
  if (!candidates.some(isReady)) return [await windowArrowDay(ctx, query, day, holds)];
  const partsOfHour = new Map(day.hours.map((h) => [h.hourMs, h]));
  const pieces: Piece[] = [];
  for (let i = 0; i < candidates.length; ) {
    let j = i;
    while (j < candidates.length && isReady(candidates[j]!) === isReady(candidates[i]!)) j++;
    const group = candidates.slice(i, j);
    i = j;
    if (isReady(group[0]!)) {
      // Hours of one sidecar follow each other back to back in it: one read.
      pieces.push(...readyReads(group.map((h) => runs.get(h)!), 'arrow'));
      continue;
    }
    ctx.signal?.throwIfAborted();
    const hours = group.flatMap((h) => partsOfHour.get(h) ?? []);
    const narrowed = { ...query, startMs: Math.max(query.startMs, group[group.length - 1]!), endMs: Math.min(query.endMs, group[0]! + HOUR_MS - 1) };
    const bound = filteredRows(await ctx.files([...day.whole, ...hours.flatMap((h) => h.parts)], holds), narrowed, isClean(day.whole, hours));
    pieces.push(await ctx.db.withMemory((conn) => arrowDayOf(conn, bound), ctx.signal));
  }
  return pieces;
}

/** One UTC day of the window as Arrow buffers, its parts held for `holds`. */
async function windowArrowDay(ctx: WindowContext, query: WindowQuery, day: DayPlan, holds: Holds): Promise<ArrowDay> {
  const bound = filteredRows(await ctx.files(partsOf(day), holds), query, isDayClean(day));
  return ctx.db.withMemory((conn) => arrowDayOf(conn, bound), ctx.signal);
}

export type { ArrowDay } from './arrow.js';
