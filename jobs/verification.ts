// Daily: accepted versus archived over the last days; a loss, a damaged part, or a report archived at another
// time, is logged as an error and fails the run; a retraction only the archive kept, or a retracted
// report the event log still shows, is a warning (verify --repair).
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
    if (result.damagedParts.length) {
      rt.log.error({ damagedParts: result.damagedParts.slice(0, 100), count: result.damagedParts.length }, 'verify found damaged parts (their bytes are not the ones written): restore each from a backup of the store');
    }
    if (result.missing.length) rt.log.error({ missing: result.missing.slice(0, 100), count: result.missing.length }, 'verify found lost reports');
    if (result.atAnotherTime.length) {
      rt.log.error({ atAnotherTime: result.atAnotherTime.slice(0, 100), count: result.atAnotherTime.length }, 'verify found reports archived on another day than the ledger gives, or on several: answers show each');
    }
    if (result.retractionsOnlyArchived.length) {
      rt.log.warn(
        { retractionsOnlyArchived: result.retractionsOnlyArchived.slice(0, 100), count: result.retractionsOnlyArchived.length },
        'verify found tombstones whose retraction the ledger lacks: verify --repair records them',
      );
    }
    // The purge announces a retraction whose announcement failed within the hour, and verify --repair any other.
    if (result.retractionsShown.length) {
      rt.log.warn(
        { retractionsShown: result.retractionsShown.slice(0, 100), count: result.retractionsShown.length },
        'verify found retracted reports the event log still shows (the stream and CAP replay their fields): verify --repair announces their retractions',
      );
    }
    // A run that found a loss failed, as `verify` exits 1: counted and logged as a failed job.
    if (result.missing.length || result.atAnotherTime.length || result.damagedParts.length) {
      throw new Error(`verify found ${result.damagedParts.length} damaged parts, ${result.missing.length} lost reports and ${result.atAnotherTime.length} archived at another time over the last days`);
    }
    return { ok: result.ok, missing: 0, atAnotherTime: 0, retractionsShown: result.retractionsShown.length, days: result.days.length };
  },
};
