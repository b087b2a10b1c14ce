// Days older than the compaction job's week that reports were written into since it last looked:
// a partner's late posts, a backfill through the feed. Each flush stores a small part into such a
// day, and answers over it read them all until a compaction merges them (a month of such parts
// answered in seconds, not a fraction of one). Found from the change logs written since the last
// look, whose end is kept under jobs/ once the days found are compacted.
import type { ChangeLog } from '../archive/changes.js';
import { listWindowParts } from '../archive/partListing.js';
import type { ObjectStore } from '../store/objectStore.js';
import { DAY_MS, dayStart, LATE_DAYS_READ_KEY } from '../store/layout.js';

export interface LateDaysDeps {
  store: ObjectStore;
  changes: Pick<ChangeLog, 'daysWritten' | 'horizon' | 'settleMs'>;
}

export interface LateDays {
  /** Days (their first instant) before `beforeMs` written into since the last look and holding more than one part, oldest first. */
  days: number[];
  /** Records that the logs up to this look were read: call once the days are compacted. */
  done(): Promise<void>;
}

/** The days before `beforeMs` to compact now; the first look reads the logs of the last `firstLookMs`. */
export async function lateDays(rt: LateDaysDeps, beforeMs: number, nowMs: number, firstLookMs: number): Promise<LateDays> {
  const uptoMs = nowMs - rt.changes.settleMs;
  const kept = await rt.store.get(LATE_DAYS_READ_KEY);
  const readUpTo = kept ? Number((JSON.parse(kept.body.toString('utf8')) as { readUpToMs?: unknown }).readUpToMs) : NaN;
  // Not before the oldest log kept: a sync's horizon is where the history still holds.
  const fromMs = Math.max(Number.isFinite(readUpTo) ? readUpTo : nowMs - firstLookMs, await rt.changes.horizon());
  const written = fromMs < uptoMs ? await rt.changes.daysWritten(fromMs, uptoMs) : new Set<number>();
  const candidates = [...written].filter((dayMs) => dayMs < dayStart(beforeMs)).sort((a, b) => a - b);
  const days: number[] = [];
  for (const dayMs of candidates) {
    const parts = (await listWindowParts(rt.store, dayMs, dayMs + DAY_MS - 1)).flatMap((h) => h.parts);
    if (parts.length > 1) days.push(dayMs);
  }
  return {
    days,
    done: async () => {
      if (fromMs < uptoMs) await rt.store.put(LATE_DAYS_READ_KEY, JSON.stringify({ v: 1, readUpToMs: uptoMs, readUpTo: new Date(uptoMs).toISOString() }));
    },
  };
}
