// Hourly: merge each closed day's parts into one de-duplicated file, and the
// closed hours of the current day hour by hour; then rewrite the parts that still hold
// retracted reports without their personal fields (so a retraction is purged within the hour);
// and delete the change logs older than SYNC_RETENTION_DAYS.
import type { ChangeLog } from '../src/archive/changes.js';
import type { Config } from '../src/shared/config.js';
import { closedBefore, compact, CompactionLockLostError, CompactionRunningError, type CompactDeps } from '../src/ops/compact.js';
import { purgeRetracted, PurgeLockLostError, PurgeRunningError, type PurgeDeps } from '../src/ops/purge.js';
import type { JobDefinition } from './job.js';

/** Compaction looks back this far; older days were compacted by earlier runs (backfills: run `compact` by hand). */
const LOOKBACK_MS = 7 * 86_400_000;

export type CompactionDeps = CompactDeps &
  PurgeDeps & {
    changes: Pick<ChangeLog, 'prune'>;
    config: Pick<Config, 'dataDir' | 'flushIntervalSeconds'>;
  };

export const compaction: JobDefinition<CompactionDeps> = {
  name: 'compaction',
  schedule: (config) => config.schedules.compact,
  run: async (rt) => {
    const now = Date.now();
    // One compacting by hand meanwhile (or another scheduler's, its lease lapsed) merges these days: this tick passes them by.
    // A run that lost its lock part-way failed; one that never took it passes the tick by.
    const compacted = await compact(rt, { fromMs: now - LOOKBACK_MS, toMs: now, closedBeforeMs: closedBefore(rt, now) }).catch((err: unknown) => {
      if (err instanceof CompactionRunningError && !(err instanceof CompactionLockLostError)) return { skipped: err.message };
      throw err;
    });
    // Likewise a purge running meanwhile (after a compaction by hand) purges what this one would.
    const purge = await purgeRetracted(rt).catch((err: unknown) => {
      if (err instanceof PurgeRunningError && !(err instanceof PurgeLockLostError)) return { skipped: err.message };
      throw err;
    });
    return { ...compacted, purge, changeLogs: await rt.changes.prune() };
  },
};
