// Monthly: the release of the month just closed (src/releases/FORMAT.md). A day after the month
// ends by default, so reports that come in late and the day's compaction are in; a month already
// released with the same reports makes no new revision.
import { release, type ReleaseDeps } from '../src/ops/release.js';
import type { JobDefinition } from './job.js';

export type ReleaseJobDeps = ReleaseDeps;

/** The UTC month before the one `nowMs` falls in: `2026-10`. */
export function lastMonth(nowMs: number): string {
  const d = new Date(nowMs);
  const month = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() - 1, 1));
  return `${month.getUTCFullYear()}-${String(month.getUTCMonth() + 1).padStart(2, '0')}`;
}

export const releaseJob: JobDefinition<ReleaseJobDeps> = {
  name: 'release',
  schedule: (config) => config.schedules.release,
  run: async (rt) => ({ ...(await release(rt, lastMonth(Date.now()))) }),
};
