// The scheduled jobs, each a small module: (name, schedule, handler over the deps it declares).
import { compaction, type CompactionDeps } from './compaction.js';
import type { JobDefinition } from './job.js';
import { reconciliation, type ReconciliationDeps } from './reconciliation.js';
import { releaseJob, type ReleaseJobDeps } from './release.js';
import { verification, type VerificationDeps } from './verification.js';

export type { JobDefinition } from './job.js';

/** What the scheduled jobs use together: the scheduler's wiring passes it to each. */
export type JobsDeps = CompactionDeps & ReconciliationDeps & VerificationDeps & ReleaseJobDeps;

export const JOBS: readonly JobDefinition<JobsDeps>[] = [compaction, reconciliation, verification, releaseJob];
