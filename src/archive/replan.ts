// Days read again from a new listing when a part their plan named is gone from the store.
// Compaction and reprocess delete the parts they replace RETIRE_GRACE_SECONDS after their
// successors are stored (partPublisher.ts): an answer slower than that (a long pull to a slow
// client, a page built while a year is compacted) reaches days it planned before. Their
// successors hold the same reports, so reading them instead gives the answer it would have.
import { partsOf, type DayPlan } from './plan.js';

/** Listings a day's read may be tried on: each retry follows a part gone since the listing before. */
const ATTEMPTS = 3;

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
 * gone. Nothing `read` produced is kept from a failed try: it must not have sent anything.
 */
export async function withReplan<T>(ctx: Replanning, days: readonly DayPlan[], read: (days: readonly DayPlan[]) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await read(days);
    } catch (err) {
      if (ctx.signal?.aborted || attempt >= ATTEMPTS) throw err;
      // The check failing (the store unreachable) leaves the read's own error to answer.
      const again = await ctx.replan(days).catch(() => undefined);
      if (!again) throw err;
      days = again;
    }
  }
}

/** `read(day)`, and again over a new listing of the day if it failed while a part of it is gone. */
export function withDayReplanned<T>(ctx: Replanning, day: DayPlan, read: (day: DayPlan) => Promise<T>): Promise<T> {
  return withReplan(ctx, [day], (days) => read(days[0]!));
}
