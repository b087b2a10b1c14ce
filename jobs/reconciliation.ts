// Every few minutes: re-enqueue accepted reports still pending.
import type { JobDefinition } from '../src/scheduler.js';

export const reconciliation: JobDefinition = {
  name: 'reconciliation',
  schedule: (config) => config.schedules.reconcile,
  run: (rt) => rt.reconciler.run(rt.config.reconcileAfterSeconds * 1000),
};
