// Hourly: merge each closed day's parts into one de-duplicated file, and the
// closed hours of the current day hour by hour; then rewrite the parts that still hold
// retracted reports without their personal fields (so a retraction is purged within the hour);
// and delete the change logs older than SYNC_RETENTION_DAYS.
import { closedBefore, compact } from '../src/ops/compact.js';
import { purgeRetracted } from '../src/ops/purge.js';
import type { JobDefinition } from '../src/scheduler.js';

/** Compaction looks back this far; older days were compacted by earlier runs (backfills: run `compact` by hand). */
const LOOKBACK_MS = 7 * 86_400_000;

export const compaction: JobDefinition = {
  name: 'compaction',
  schedule: (config) => config.schedules.compact,
  run: async (rt) => {
    const now = Date.now();
    const compacted = await compact(rt, { fromMs: now - LOOKBACK_MS, toMs: now, closedBeforeMs: closedBefore(rt, now) });
    return { ...compacted, purge: await purgeRetracted(rt), changeLogs: await rt.changes.prune() };
  },
};
