// Daily: accepted versus archived over the last days; a loss is logged as an error.
import type { Logger } from '../src/shared/log.js';
import { verify, type VerifyDeps } from '../src/ops/verify.js';
import type { JobDefinition } from './job.js';

const LOOKBACK_MS = 3 * 86_400_000;

export type VerificationDeps = VerifyDeps & { log: Logger };

export const verification: JobDefinition<VerificationDeps> = {
  name: 'verification',
  schedule: (config) => config.schedules.verify,
  run: async (rt) => {
    const now = Date.now();
    const result = await verify(rt, { fromMs: now - LOOKBACK_MS, toMs: now });
    if (!result.ok) rt.log.error({ missing: result.missing.slice(0, 100), count: result.missing.length }, 'verify found lost reports');
    return { ok: result.ok, missing: result.missing.length, days: result.days.length };
  },
};
