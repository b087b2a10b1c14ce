// The scheduler: node-cron runs each job of jobs/ on its schedule. A run
// coordinator on the object store makes sure that, however many schedulers
// run, each tick of a job runs once (create-if-absent of a tick key) and a run
// never overlaps a previous one still going elsewhere (a lease object).
import cron, { type RunCoordinator, type ScheduledTask } from 'node-cron';
import type { JobDefinition } from '../../jobs/job.js';
import type { Config } from '../shared/config.js';
import type { Logger } from '../shared/log.js';
import type { Metrics } from '../shared/metrics.js';
import type { ObjectStore } from '../store/objectStore.js';

export type { JobDefinition } from '../../jobs/job.js';

/** What the scheduler itself uses: the store (its run coordinator), the log, the job metrics, the schedules. */
export interface SchedulerDeps {
  store: ObjectStore;
  log: Logger;
  metrics: Pick<Metrics, 'jobRuns'>;
  config: Pick<Config, 'schedules'>;
}

const RUNS_PREFIX = 'jobs/runs/';
const LEASES_PREFIX = 'jobs/leases/';
/** A lease older than this is from a scheduler that died mid-run. */
const LEASE_TTL_MS = 6 * 3_600_000;

export class StoreRunCoordinator implements RunCoordinator {
  constructor(
    private readonly store: ObjectStore,
    private readonly owner: string,
    private readonly log: Logger,
  ) {}

  /** key is "<job>:<slot ISO time>" */
  async shouldRun(key: string): Promise<boolean> {
    const [job, slot] = splitKey(key);
    const won = await this.store.putIfAbsent(`${RUNS_PREFIX}${job}/${slot}.json`, JSON.stringify({ owner: this.owner, at: new Date().toISOString() }));
    if (!won) return false;
    const held = await this.lease(job);
    if (held && held.until > Date.now()) {
      this.log.info({ job, slot, heldBy: held.owner }, 'previous run still going elsewhere; skipping this tick');
      return false;
    }
    await this.store.put(`${LEASES_PREFIX}${job}.json`, JSON.stringify({ owner: this.owner, slot, until: Date.now() + LEASE_TTL_MS }));
    return true;
  }

  private async lease(job: string): Promise<{ owner: string; slot?: string; until: number } | undefined> {
    const lease = await this.store.get(`${LEASES_PREFIX}${job}.json`);
    return lease ? (JSON.parse(lease.body.toString('utf8')) as { owner: string; slot?: string; until: number }) : undefined;
  }

  async onComplete(key: string): Promise<void> {
    const [job, slot] = splitKey(key);
    // Only this run's own lease: a run that outlived it must not end the next run's.
    const held = await this.lease(job);
    if (held?.owner === this.owner && held.slot === slot) await this.store.delete([`${LEASES_PREFIX}${job}.json`]);
    // Tick keys are only needed around their tick; keep a day for inspection.
    const old: string[] = [];
    const cutoff = Date.now() - 86_400_000;
    for await (const info of this.store.list({ prefix: `${RUNS_PREFIX}${job}/` })) {
      if (info.lastModified.getTime() < cutoff) old.push(info.key);
    }
    if (old.length > 0) await this.store.delete(old);
  }
}

function splitKey(key: string): [string, string] {
  const i = key.indexOf(':');
  const job = key.slice(0, i).replace(/[^A-Za-z0-9._-]/g, '_');
  return [job, slotName(key.slice(i + 1))];
}

/** A tick's name in its key (and in the log lines of its run): its ISO time, store-safe. */
const slotName = (iso: string) => iso.replace(/[^A-Za-z0-9._-]/g, '-');

export interface RunningScheduler {
  tasks: ScheduledTask[];
  stop(): Promise<void>;
}

/** Runs `jobs` on their schedules, each with `rt` (the scheduler's own deps and the jobs'). */
export function startScheduler<D>(rt: SchedulerDeps & D, jobs: readonly JobDefinition<D>[], owner: string): RunningScheduler {
  const coordinator = new StoreRunCoordinator(rt.store, owner, rt.log);
  const running = new Set<Promise<unknown>>();
  const tasks = jobs.map((job) =>
    cron.schedule(
      job.schedule(rt.config),
      async (context) => {
        const started = Date.now();
        // The tick, as its key in the store names it: which scheduler ran which tick.
        const slot = slotName(context.date.toISOString());
        const run = job.run(rt);
        running.add(run);
        try {
          const result = await run;
          rt.log.info({ job: job.name, slot, ms: Date.now() - started, result }, 'job finished');
          rt.metrics.jobRuns.inc({ job: job.name, result: 'ok' });
        } catch (err) {
          rt.metrics.jobRuns.inc({ job: job.name, result: 'failed' });
          rt.log.error({ job: job.name, slot, err: err instanceof Error ? err.message : String(err) }, 'job failed');
        } finally {
          running.delete(run);
        }
      },
      { name: job.name, noOverlap: true, distributed: true, runCoordinator: coordinator, timezone: 'UTC' },
    ),
  );
  return {
    tasks,
    async stop() {
      await Promise.all(tasks.map((t) => t.stop()));
      await Promise.allSettled([...running]);
    },
  };
}
