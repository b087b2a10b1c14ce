// A scheduled job: a name, its schedule from the config, and a run over the dependencies it
// declares (the scheduler's wiring passes them).
import type { Config } from '../src/shared/config.js';

export interface JobDefinition<Deps = unknown> {
  name: string;
  /** The node-cron expression for this job, from the config. */
  schedule(config: Pick<Config, 'schedules'>): string;
  run(deps: Deps): Promise<unknown>;
}
