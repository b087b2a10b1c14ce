// Hourly: merge each closed day's parts into one de-duplicated file, and the
// closed hours of the current day hour by hour, over the last week; then rewrite the parts that
// still hold retracted reports without their personal fields (so a retraction is purged within
// the hour); delete the change logs older than SYNC_RETENTION_DAYS; and merge the older days
// reports were written into since the last run (lateDays.ts).
import type { ChangeLog } from '../src/archive/changes.js';
import { DamagedPartsError } from '../src/archive/partSeal.js';
import { lateDays } from '../src/ops/lateDays.js';
import { DAY_MS } from '../src/store/layout.js';
import type { Config } from '../src/shared/config.js';
import { closedBefore, compact, CompactionLockLostError, CompactionRunningError, type CompactDeps } from '../src/ops/compact.js';
import { purgeRetracted, PurgeLockLostError, PurgeRunningError, type PurgeDeps } from '../src/ops/purge.js';
import type { JobDefinition } from './job.js';

/** Compaction looks back this far; older days were compacted by earlier runs (backfills: run `compact` by hand). */
const LOOKBACK_MS = 7 * 86_400_000;
/** The first run's look at the change logs for late reports (later runs read from where the last left off): a week's logs are 20,000 GETs on S3. */
const FIRST_LATE_LOOK_MS = 2 * 3_600_000;

export type CompactionDeps = CompactDeps &
  PurgeDeps & {
    changes: Pick<ChangeLog, 'prune' | 'daysWritten' | 'horizon' | 'settleMs'>;
    config: Pick<Config, 'dataDir' | 'flushIntervalSeconds'>;
  };

export const compaction: JobDefinition<CompactionDeps> = {
  name: 'compaction',
  schedule: (config) => config.schedules.compact,
  run: async (rt) => {
    const now = Date.now();
    // One compacting by hand meanwhile (or another scheduler's, its lease lapsed) merges these days: this tick passes them by.
    // A run that lost its lock part-way failed; one that never took it passes the tick by.
    const passedBy = (err: unknown) => {
      if (err instanceof CompactionRunningError && !(err instanceof CompactionLockLostError)) return { skipped: err.message };
      throw err;
    };
    // A damaged part (partSeal.ts) fails the run, but only once the rest is done: compaction and
    // the purge each leave its day as it is, and the other days, the pruning and the late days go on.
    const damaged: DamagedPartsError['parts'][number][] = [];
    const noted = <T>(err: unknown, instead: T): T => {
      if (!(err instanceof DamagedPartsError)) throw err;
      damaged.push(...err.parts);
      return instead;
    };
    const compacted = await compact(rt, { fromMs: now - LOOKBACK_MS, toMs: now, closedBeforeMs: closedBefore(rt, now) })
      .catch(passedBy)
      .catch((err: unknown) => noted(err, { damagedParts: true }));
    // Likewise a purge running meanwhile (after a compaction by hand) purges what this one would.
    const purge = await purgeRetracted(rt).catch((err: unknown) => {
      if (err instanceof PurgeRunningError && !(err instanceof PurgeLockLostError)) return { skipped: err.message };
      return noted(err, { damagedParts: true });
    });
    const changeLogs = await rt.changes.prune();
    // Last, so a day that fails to merge never holds the purge back: the older days written into
    // since the last run, looked for again next time unless all are merged.
    const late = 'skipped' in compacted ? undefined : await lateDays(rt, now - LOOKBACK_MS, now, FIRST_LATE_LOOK_MS);
    let lateDaysCompacted = 0;
    let lateDaysPassedBy = false;
    for (const dayMs of late?.days ?? []) {
      const day = new Date(dayMs).toISOString().slice(0, 10);
      // A day that fails is logged and left (compact by hand), never holding the others back.
      const merged = await compact(rt, { fromMs: dayMs, toMs: dayMs + DAY_MS - 1, closedBeforeMs: closedBefore(rt, now) })
        .catch(passedBy)
        .catch((err: unknown) => {
          rt.log.warn({ err, day }, `a day late reports were written into could not be merged: run compact --from ${day} --to ${day}`);
          return { daysCompacted: 0 };
        });
      if ('skipped' in merged) {
        lateDaysPassedBy = true;
        break;
      }
      lateDaysCompacted += merged.daysCompacted;
    }
    if (late && !lateDaysPassedBy) await late.done();
    if (damaged.length > 0) throw new DamagedPartsError(damaged);
    return { ...compacted, purge, changeLogs, ...(late && { lateDays: late.days.map((d) => new Date(d).toISOString().slice(0, 10)), lateDaysCompacted }) };
  },
};
