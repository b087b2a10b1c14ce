// Days read again from a new listing when a part their plan named is gone from the store.
// Compaction and reprocess delete the parts they replace RETIRE_GRACE_SECONDS after their
// successors are stored (partPublisher.ts): an answer slower than that (a long pull to a slow
// client, a page built while a year is compacted) reaches days it planned before. Their
// successors hold the same reports, so reading them instead gives the answer it would have.
import { partsOf, type DayPlan } from './plan.js';
import { OverloadedError } from '../shared/errors.js';

/**
 * How long a read goes on being tried again while each new listing finds a part of the one
 * before gone. A job retires a day's old parts in the rhythm it wrote their successors (a
 * reprocess, a few hours at a time: seconds for a storm day), so a listing made among those
 * retirements may name parts that go before they are read, again and again: the tries are
 * spread over a job's day. Each try needs parts deleted since the one before, and a job rewrites
 * each hour once, so they end.
 */
const RETRY_FOR_MS = 30_000;
/** The pause before each try after the second, doubling up to MAX_PAUSE_MS (the second try, after a listing that was merely old, is made at once). */
const FIRST_PAUSE_MS = 100;
const MAX_PAUSE_MS = 2_000;

/**
 * The days listed again when a part of theirs is gone from the store, undefined when every one
 * is still there (the read failed for another reason).
 */
export type Replan = (days: readonly DayPlan[]) => Promise<DayPlan[] | undefined>;

/** What a window's reads share that a retry needs (a WindowContext is one). */
interface Replanning {
  replan: Replan;
  signal: AbortSignal | undefined;
}

/**
 * A Replan by `list` (a new plan of the days: one listing, where a HEAD of each part would be
 * hundreds of requests for a year whose read failed for another reason, such as DuckDB out of
 * memory).
 */
export function replanner(list: (days: readonly DayPlan[]) => Promise<DayPlan[]>): Replan {
  return async (days) => {
    const listed = await list(days);
    const present = new Set(listed.flatMap(partsOf).map((p) => p.key));
    if (days.flatMap(partsOf).every((p) => present.has(p.key))) return undefined;
    const byDay = new Map(listed.map((d) => [d.dayMs, d]));
    // A day whose reports are all gone (a purge since) is read as empty.
    return days.map((d) => byDay.get(d.dayMs) ?? { dayMs: d.dayMs, whole: [], hours: [] });
  };
}

/**
 * `read(days)`, and again over a new listing of them if it failed while a part of theirs is
 * gone, for as long as each new listing finds parts gone (RETRY_FOR_MS at most: then an
 * OverloadedError, a 503 asking to try again). Nothing `read` produced is kept from a failed
 * try: it must not have sent anything.
 */
export async function withReplan<T>(ctx: Replanning, days: readonly DayPlan[], read: (days: readonly DayPlan[]) => Promise<T>): Promise<T> {
  let firstFailedMs: number | undefined;
  for (let retry = 0; ; retry++) {
    try {
      return await read(days);
    } catch (err) {
      if (ctx.signal?.aborted) throw err;
      // The check failing (the store unreachable) leaves the read's own error to answer.
      const again = await ctx.replan(days).catch(() => undefined);
      if (!again) throw err;
      firstFailedMs ??= Date.now();
      const pause = retry === 0 ? 0 : Math.min(MAX_PAUSE_MS, FIRST_PAUSE_MS * 2 ** (retry - 1));
      if (Date.now() + pause - firstFailedMs > RETRY_FOR_MS) {
        throw new OverloadedError('The archive was being rewritten (a compaction or reprocess retiring parts) all the while it was read: try again', { cause: err });
      }
      if (pause > 0) {
        // A plain timer (2 s at most), then nothing more for a client that hung up meanwhile.
        await new Promise((resolve) => setTimeout(resolve, pause));
        ctx.signal?.throwIfAborted();
      }
      days = again;
    }
  }
}

/** `read(day)`, and again over a new listing of the day if it failed while a part of it is gone. */
export function withDayReplanned<T>(ctx: Replanning, day: DayPlan, read: (day: DayPlan) => Promise<T>): Promise<T> {
  return withReplan(ctx, [day], (days) => read(days[0]!));
}
