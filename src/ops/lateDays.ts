// Days older than the compaction job's week that reports were written into since it last looked:
// a partner's late posts, a backfill through the feed. Each flush stores a small part into such a
// day, and answers over it read them all until a compaction merges them (a month of such parts
// answered in seconds, not a fraction of one). Found from the change logs written since the last
// look, whose end is kept under jobs/ once the days found are compacted.
import type { ChangeLog } from '../archive/changes.js';
import { listWindowParts } from '../archive/partListing.js';
import type { ObjectStore } from '../store/objectStore.js';
import { DAY_MS, dayStart, LATE_DAYS_READ_KEY } from '../store/layout.js';
import type { Logger } from '../shared/log.js';
import { mapLimit } from './concurrency.js';

export interface LateDaysDeps {
  store: ObjectStore;
  changes: Pick<ChangeLog, 'daysWritten' | 'horizon' | 'settleMs'>;
  log: Pick<Logger, 'warn'>;
}

/**
 * Days merged at most in one run: an import of years in several rounds leaves thousands of days of
 * several parts, and the job's next ticks (the purge among them) wait for this one. The rest are
 * found again by the next run, from the same logs.
 */
export const LATE_DAYS_PER_RUN = 48;

export interface LateDays {
  /** Days (their first instant) before `beforeMs` written into since the last look and holding more than one part, oldest first. */
  days: number[];
  /** Records that the logs up to this look were read (unless days were left for the next run): call once the days are compacted. */
  done(): Promise<void>;
}

/** The days before `beforeMs` to compact now, at most `perRun`; the first look reads the logs of the last `firstLookMs`. */
export async function lateDays(rt: LateDaysDeps, beforeMs: number, nowMs: number, firstLookMs: number, perRun = LATE_DAYS_PER_RUN): Promise<LateDays> {
  const uptoMs = nowMs - rt.changes.settleMs;
  const kept = await rt.store.get(LATE_DAYS_READ_KEY);
  const readUpTo = kept ? Number((JSON.parse(kept.body.toString('utf8')) as { readUpToMs?: unknown }).readUpToMs) : NaN;
  // Not before the oldest log kept: a sync's horizon is where the history still holds.
  const horizon = await rt.changes.horizon();
  const wantedMs = Number.isFinite(readUpTo) ? readUpTo : nowMs - firstLookMs;
  if (wantedMs < horizon) {
    rt.log.warn({ from: new Date(wantedMs).toISOString(), to: new Date(horizon).toISOString() }, 'the change logs of late reports written in this span are pruned: run compact --from --to over the older days written then');
  }
  const fromMs = Math.max(wantedMs, horizon);
  const written = fromMs < uptoMs ? await rt.changes.daysWritten(fromMs, uptoMs) : new Set<number>();
  const candidates = [...written].filter((dayMs) => dayMs < dayStart(beforeMs)).sort((a, b) => a - b);
  const parted = await mapLimit(candidates, 8, async (dayMs) => (await listWindowParts(rt.store, dayMs, dayMs + DAY_MS - 1)).flatMap((h) => h.parts).length > 1);
  const all = candidates.filter((_, i) => parted[i]);
  const days = all.slice(0, perRun);
  return {
    days,
    done: async () => {
      // With days left over, the next run reads the same logs again (the days merged have one part by then).
      if (fromMs < uptoMs && days.length === all.length) await rt.store.put(LATE_DAYS_READ_KEY, JSON.stringify({ v: 1, readUpToMs: uptoMs, readUpTo: new Date(uptoMs).toISOString() }));
    },
  };
}
