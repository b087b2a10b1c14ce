// Monthly: releases (src/releases/FORMAT.md) of the month just closed, of every month of the year
// before not released yet (a tick the scheduler missed, or a month that failed, is made up next time),
// and again of every period released in the year before (a retraction purged since makes a new
// revision of each release that held it; the same reports make none). A day after the month ends
// by default, so reports that come in late and the day's compaction are in.
import { manifests, NothingToReleaseError, release, ReleaseRunningError, type ReleaseDeps, type ReleaseResult } from '../src/ops/release.js';
import { parsePeriod } from '../src/releases/layout.js';
import { RELEASE_SINCE_KEY } from '../src/store/layout.js';
import type { JobDefinition } from './job.js';

export type ReleaseJobDeps = ReleaseDeps;

/** The UTC month before the one `nowMs` falls in: `2026-10`. */
export function lastMonth(nowMs: number): string {
  return monthOf(nowMs, -1);
}

/** How far back a released period is released again, to honour retractions purged since. */
const AGAIN_WITHIN_MS = 366 * 86_400_000;

/**
 * The periods a run at `nowMs` releases, oldest first: every month of the year before, from the
 * first month ever released on or the first month the job ever set out to release (`since`;
 * the month just closed when neither is known), whether released already or not (a tick missed,
 * or a month that failed in one, the job's very first among them, is made up), and every period
 * already released that ended within the year before.
 */
export function periodsToRelease(released: readonly string[], nowMs: number, since?: string): string[] {
  const closed = lastMonth(nowMs);
  const months = [...released.filter((p) => p.length === 7 && p <= closed), ...(since !== undefined && since <= closed ? [since] : [])].sort();
  const from = months.length > 0 ? months[0]! : closed;
  const out = new Set<string>();
  for (let back = 12; back >= 1; back--) {
    const month = monthOf(nowMs, -back);
    if (month >= from) out.add(month);
  }
  for (const period of released) {
    const endMs = parsePeriod(period)?.endMs;
    if (endMs !== undefined && endMs < nowMs && nowMs - endMs <= AGAIN_WITHIN_MS) out.add(period);
  }
  return [...out].sort();
}

export const releaseJob: JobDefinition<ReleaseJobDeps> = {
  name: 'release',
  schedule: (config) => config.schedules.release,
  run: async (rt) => {
    const now = Date.now();
    const periods = periodsToRelease([...new Set((await manifests(rt.store)).map((m) => m.period))], now, await firstMonthSetOut(rt.store, lastMonth(now)));
    const made: ReleaseResult[] = [];
    const empty: string[] = [];
    const running: string[] = [];
    const failed: { period: string; error: string }[] = [];
    // Each period on its own: one that fails leaves the others be.
    for (const period of periods) {
      try {
        made.push(await release(rt, period));
      } catch (err) {
        // A month before the archive's first report: no release, and no failure either.
        if (err instanceof NothingToReleaseError) empty.push(period);
        // Another run (by hand, say) is making it: left to that run (and released again next month).
        else if (err instanceof ReleaseRunningError) running.push(period);
        else failed.push({ period, error: err instanceof Error ? err.message : String(err) });
      }
    }
    if (failed.length > 0) throw new Error(`releases failed: ${failed.map((f) => `${f.period}: ${f.error}`).join('; ')} (made: ${made.map((m) => m.release).join(', ') || 'none'})`);
    return { releases: made.map((m) => ({ release: m.release, created: m.created, reports: m.reports })), empty, running };
  },
};

/**
 * The first month the job ever set out to release, written by its first run before it tries
 * (created if absent, never changed): a first month that failed is made up like any other.
 */
async function firstMonthSetOut(store: ReleaseDeps['store'], month: string): Promise<string | undefined> {
  if (await store.putIfAbsent(RELEASE_SINCE_KEY, JSON.stringify({ month }))) return month;
  const got = await store.get(RELEASE_SINCE_KEY);
  const since = got && (JSON.parse(got.body.toString('utf8')) as { month?: unknown }).month;
  return typeof since === 'string' && parsePeriod(since)?.months.length === 1 ? since : undefined;
}

/** The UTC month `delta` months from the one `nowMs` falls in. */
function monthOf(nowMs: number, delta: number): string {
  const d = new Date(nowMs);
  const month = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + delta, 1));
  return `${month.getUTCFullYear()}-${String(month.getUTCMonth() + 1).padStart(2, '0')}`;
}
