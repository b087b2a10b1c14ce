// Hourly: merge each closed hour's parts into one de-duplicated file.
import { closedBefore, compact } from '../src/ops/compact.js';
import type { JobDefinition } from '../src/scheduler.js';

/** Compaction looks back this far; older hours were compacted by earlier runs. */
const LOOKBACK_MS = 7 * 86_400_000;

export const compaction: JobDefinition = {
  name: 'compaction',
  schedule: (config) => config.schedules.compact,
  run: (rt) => {
    const now = Date.now();
    return compact(rt, { fromMs: now - LOOKBACK_MS, toMs: now, closedBeforeMs: closedBefore(rt, now) });
  },
};
