// The scheduled jobs, each a small module: (name, schedule, handler).
import type { JobDefinition } from '../src/scheduler.js';
import { compaction } from './compaction.js';
import { reconciliation } from './reconciliation.js';
import { verification } from './verification.js';

export const JOBS: readonly JobDefinition[] = [compaction, reconciliation, verification];
