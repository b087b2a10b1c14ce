// Fetches the ready texts of the days ahead of the one an answer is at. On S3 a GET waits 20–50
// ms for its first byte, and a ready text is two (its index, then the sections the answer
// reads): one day at a time left the wire idle most of a cold window (a year took ten times as
// long as from local disk). Fetches only: nothing is read into memory, and the part cache
// bounds what the copies take on disk (a day's one format is well under a megabyte).
import type { WindowContext } from './context.js';
import { partsOf, type DayPlan } from './plan.js';
import type { ReadyWant } from './sidecars/index.js';

/** Days whose ready texts are being fetched at once, ahead of the one the answer is at. */
export const FETCH_AHEAD = 24;

/**
 * Starts fetching the first days' ready texts; `reached(i)`: the answer is at day i, so day
 * i + `ahead` is fetched next. `want` undefined: the answer reads no ready texts.
 */
export function fetchAhead(ctx: WindowContext, days: readonly DayPlan[], want: ReadyWant | undefined, ahead = FETCH_AHEAD): { reached(i: number): void } {
  const fetch = (i: number) => {
    // Handled here: a day whose fetch fails fails when the answer reads it, not before.
    if (want && i < days.length) ctx.readyFiles(partsOf(days[i]!), want).catch(() => undefined);
  };
  for (let i = 0; i < Math.min(ahead, days.length); i++) fetch(i);
  return { reached: (i) => fetch(i + ahead) };
}
