// Every few minutes: re-enqueue accepted reports still pending.
import type { Config } from '../src/shared/config.js';
import type { Reconciler } from '../src/ingest/reconciler.js';
import type { JobDefinition } from './job.js';

export interface ReconciliationDeps {
  reconciler: Pick<Reconciler, 'run'>;
  config: Pick<Config, 'reconcileAfterSeconds'>;
}

export const reconciliation: JobDefinition<ReconciliationDeps> = {
  name: 'reconciliation',
  schedule: (config) => config.schedules.reconcile,
  run: (rt) => rt.reconciler.run(rt.config.reconcileAfterSeconds * 1000),
};
