// The scheduler: node-cron runs each job of jobs/ on its schedule. A run
// coordinator on the object store makes sure that, however many schedulers
// run, each tick of a job runs once (create-if-absent of a tick key) and a run
// never overlaps a previous one still going elsewhere (a lease object).
import cron, { type Logger as CronLogger, type RunCoordinator, type ScheduledTask } from 'node-cron';
import type { JobDefinition } from '../../jobs/job.js';
import type { Config } from '../shared/config.js';
import type { Logger } from '../shared/log.js';
import type { Metrics } from '../shared/metrics.js';
import { giveBackLocks } from '../ops/storeLock.js';
import type { ObjectStore } from '../store/objectStore.js';
import { JOB_LEASES_PREFIX, JOB_RUNS_PREFIX } from '../store/layout.js';

export type { JobDefinition } from '../../jobs/job.js';

/** What the scheduler itself uses: the store (its run coordinator), the log, the job metrics, the schedules. */
export interface SchedulerDeps {
  store: ObjectStore;
  log: Logger;
  metrics: Pick<Metrics, 'jobRuns'>;
  config: Pick<Config, 'schedules'>;
}

/**
 * A run's lease lasts this long and is renewed a third of the way through for as long as the
 * run goes on: a scheduler killed mid-run holds up its job's next ticks this long at most.
 */
const LEASE_TTL_MS = 10 * 60_000;

interface Lease {
  owner: string;
  slot?: string;
  until: number;
}

export class StoreRunCoordinator implements RunCoordinator {
  /** This scheduler's runs still going: their job, tick, renewal timer and renewal under way. */
  private readonly held = new Map<string, { slot: string; renewal: NodeJS.Timeout; renewing?: Promise<void> }>();

  constructor(
    private readonly store: ObjectStore,
    private readonly owner: string,
    private readonly log: Logger,
    private readonly leaseMs = LEASE_TTL_MS,
  ) {}

  /** Claims under way: a stop waits for them, so none takes a tick after it. */
  private readonly claiming = new Set<Promise<boolean>>();

  /** key is "<job>:<slot ISO time>" */
  shouldRun(key: string): Promise<boolean> {
    const claim = this.claim(key);
    this.claiming.add(claim);
    void claim.catch(() => undefined).finally(() => this.claiming.delete(claim));
    return claim;
  }

  /** Once every claim under way has settled. */
  async claimsSettled(): Promise<void> {
    await Promise.allSettled([...this.claiming]);
  }

  private async claim(key: string): Promise<boolean> {
    const [job, slot] = splitKey(key);
    // A run of the job still going here (a claim outside node-cron's noOverlap): no second one.
    if (this.held.has(job)) return false;
    const tickKey = `${JOB_RUNS_PREFIX}${job}/${slot}.json`;
    if (!(await this.store.putIfAbsent(tickKey, JSON.stringify({ owner: this.owner, at: new Date().toISOString() })))) {
      // Our own create, retried by the SDK after its answer was lost, is refused as a repeat: still ours.
      const tick = await this.store.get(tickKey);
      if (!tick || (JSON.parse(tick.body.toString('utf8')) as { owner?: string }).owner !== this.owner) return false;
    }
    try {
      const current = await this.store.get(`${JOB_LEASES_PREFIX}${job}.json`);
      const held = current && (JSON.parse(current.body.toString('utf8')) as Lease);
      // Our own lease left by a run whose release failed is no run going on.
      if (held && held.until > Date.now() && held.owner !== this.owner) {
        this.log.info({ job, slot, heldBy: held.owner }, 'previous run still going elsewhere; skipping this tick');
        return false;
      }
      // Created if absent, or written over the very version judged lapsed: another scheduler
      // that took the lease meanwhile keeps it, and this tick is passed by.
      if (!(await this.writeLease(job, slot, current?.etag))) {
        this.log.info({ job, slot }, 'the run lease was taken meanwhile elsewhere; skipping this tick');
        return false;
      }
    } catch (err) {
      // The tick is given back (another scheduler, or a run by hand, may take it): kept, it
      // would stay claimed by a run that never started. So is a lease of ours that landed though
      // its write failed: no run renews or ends it.
      await this.store.delete([tickKey]).catch(() => undefined);
      await this.lease(job)
        .then((held) => (held?.owner === this.owner && held.slot === slot ? this.store.delete([`${JOB_LEASES_PREFIX}${job}.json`]) : undefined))
        .catch(() => undefined);
      throw err;
    }
    const entry: { slot: string; renewal: NodeJS.Timeout; renewing?: Promise<void> } = {
      slot,
      renewal: setInterval(() => {
        entry.renewing ??= this.renew(job, slot).finally(() => (entry.renewing = undefined));
      }, Math.max(1, Math.floor(this.leaseMs / 3))),
    };
    entry.renewal.unref();
    this.held.set(job, entry);
    return true;
  }

  /** Writes this run's lease: created if absent (`over` undefined), else over that version only. */
  private writeLease(job: string, slot: string, over: string | undefined): Promise<boolean> {
    const lease: Lease = { owner: this.owner, slot, until: Date.now() + this.leaseMs };
    const key = `${JOB_LEASES_PREFIX}${job}.json`;
    return over === undefined ? this.store.putIfAbsent(key, JSON.stringify(lease), { seenAbsent: true }) : this.store.putIfMatch(key, JSON.stringify(lease), over);
  }

  /**
   * Extends the run's lease while it is still this run's: written only over the very version
   * read (If-Match), so a run that lost its lease meanwhile leaves its successor's.
   */
  private async renew(job: string, slot: string): Promise<void> {
    try {
      const current = await this.store.get(`${JOB_LEASES_PREFIX}${job}.json`);
      const held = current && (JSON.parse(current.body.toString('utf8')) as Lease);
      if (!held || held.owner !== this.owner || held.slot !== slot || this.held.get(job)?.slot !== slot) return;
      const lease: Lease = { owner: this.owner, slot, until: Date.now() + this.leaseMs };
      await this.store.putIfMatch(`${JOB_LEASES_PREFIX}${job}.json`, JSON.stringify(lease), current.etag);
    } catch (err) {
      this.log.warn({ job, slot, err: err instanceof Error ? err.message : String(err) }, 'could not renew the run lease; renewing again later');
    }
  }

  private async lease(job: string): Promise<Lease | undefined> {
    const lease = await this.store.get(`${JOB_LEASES_PREFIX}${job}.json`);
    return lease ? (JSON.parse(lease.body.toString('utf8')) as Lease) : undefined;
  }

  /** Gives the run's lease back: the job's next tick runs, here or elsewhere. */
  private async releaseLease(job: string, slot: string): Promise<void> {
    const mine = this.held.get(job);
    if (mine?.slot === slot) {
      clearInterval(mine.renewal);
      this.held.delete(job);
      // A renewal under way would write the lease back after its deletion.
      await mine.renewing;
    }
    // Only this run's own lease: a run that outlived it must not end the next run's.
    const held = await this.lease(job);
    if (held?.owner === this.owner && held.slot === slot) await this.store.delete([`${JOB_LEASES_PREFIX}${job}.json`]);
  }

  async onComplete(key: string): Promise<void> {
    const [job, slot] = splitKey(key);
    await this.releaseLease(job, slot);
    // Tick keys are only needed around their tick; keep a day for inspection.
    const old: string[] = [];
    const cutoff = Date.now() - 86_400_000;
    for await (const info of this.store.list({ prefix: `${JOB_RUNS_PREFIX}${job}/` })) {
      if (info.lastModified.getTime() < cutoff) old.push(info.key);
    }
    if (old.length > 0) await this.store.delete(old);
  }

  /** At a stop, once the runs have ended: their leases given back before the process exits (node-cron's own call may come too late). */
  async releaseAll(): Promise<void> {
    await Promise.all([...this.held].map(([job, { slot }]) => this.releaseLease(job, slot)));
  }
}

function splitKey(key: string): [string, string] {
  const i = key.indexOf(':');
  const job = key.slice(0, i).replace(/[^A-Za-z0-9._-]/g, '_');
  return [job, slotName(key.slice(i + 1))];
}

/** A tick's name in its key (and in the log lines of its run): its ISO time, store-safe. */
const slotName = (iso: string) => iso.replace(/[^A-Za-z0-9._-]/g, '-');

/**
 * How long a stop waits for the runs under way: within the 120 s an ECS task is given after
 * SIGTERM (the scheduler's service asks for them), with room to give leases back and to wait
 * for the runs' locks (GIVE_BACK_WAIT_MS).
 */
const STOP_GRACE_MS = 100_000;

/** How late a tick may still run (never past the next one). */
const MISSED_TOLERANCE_MS = 60_000;

/** node-cron's own messages, as the service's log lines rather than coloured console text. */
function cronLogger(log: Logger): CronLogger {
  const detail = (err?: Error) => (err ? { err: err.message } : {});
  return {
    info: (message) => log.info({ source: 'node-cron' }, message),
    // Its line for an overlapped tick names neither job nor tick: the scheduler logs its own.
    warn: (message) => (message.includes('blocked by overlap prevention') ? undefined : log.warn({ source: 'node-cron' }, message)),
    error: (message, err) => log.error({ source: 'node-cron', ...detail(err ?? (message instanceof Error ? message : undefined)) }, String(message instanceof Error ? message.message : message)),
    debug: (message, err) => log.debug({ source: 'node-cron', ...detail(err) }, String(message instanceof Error ? message.message : message)),
  };
}

export interface RunningScheduler {
  tasks: ScheduledTask[];
  stop(): Promise<void>;
}

/** Runs `jobs` on their schedules, each with `rt` (the scheduler's own deps and the jobs'). */
export function startScheduler<D>(rt: SchedulerDeps & D, jobs: readonly JobDefinition<D>[], owner: string, options: { stopGraceMs?: number } = {}): RunningScheduler {
  const coordinator = new StoreRunCoordinator(rt.store, owner, rt.log);
  const running = new Set<Promise<unknown>>();
  const tasks = jobs.map((job) =>
    cron.schedule(
      job.schedule(rt.config),
      async (context) => {
        const started = Date.now();
        // The tick, as its key in the store names it: which scheduler ran which tick.
        const slot = slotName(context.date.toISOString());
        // A tick claimed as the scheduler began to stop runs all the same (no other scheduler
        // can take it now), within the stop's grace.
        // A job that throws before its promise counts as a failed run, as one that rejects.
        const run = Promise.resolve().then(() => job.run(rt));
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
      {
        name: job.name,
        noOverlap: true,
        distributed: true,
        runCoordinator: coordinator,
        timezone: 'UTC',
        // A tick the event loop reached late (a long synchronous step, a pause) still runs, up to
        // a minute late and never past the next tick; node-cron's default skips it after a second.
        missedExecutionTolerance: MISSED_TOLERANCE_MS,
        logger: cronLogger(rt.log),
      },
    ),
  );
  for (const [i, task] of tasks.entries()) {
    const name = jobs[i]!.name;
    // Ticks that did not run, counted beside the runs: missed (later than the tolerance),
    // overlapped (this process still runs the job's earlier tick) and skipped (the store failed
    // while claiming them; another scheduler's claim is not counted).
    task.on('execution:missed', (context) => {
      rt.metrics.jobRuns.inc({ job: name, result: 'missed' });
      rt.log.error({ job: name, slot: slotName(context.date.toISOString()) }, 'tick missed: the process reached it too late');
    });
    task.on('execution:overlap', (context) => {
      rt.metrics.jobRuns.inc({ job: name, result: 'overlapped' });
      rt.log.warn({ job: name, slot: slotName(context.date.toISOString()) }, 'tick not run: the run of an earlier tick is still going in this process');
    });
    task.on('execution:skipped', (context) => {
      if (context.reason !== 'coordinator-error') return;
      rt.metrics.jobRuns.inc({ job: name, result: 'skipped' });
      rt.log.error({ job: name, slot: slotName(context.date.toISOString()), err: context.error?.message }, 'tick skipped: the store failed while it was claimed');
    });
  }
  return {
    tasks,
    async stop() {
      await Promise.all(tasks.map((t) => t.stop()));
      await coordinator.claimsSettled();
      // A claim won just now starts its run on the next turns of the loop: counted below.
      await new Promise((resolve) => setImmediate(resolve));
      // Runs under way end, or are stopped at their next step once the grace is over (a
      // compaction or a release stopped part-way is finished by its next run), before the process
      // is killed: their leases are given back either way, and their locks once they stopped
      // (giveBackLocks), so the next ticks, here or on another host, need not wait for them to lapse.
      let timer: NodeJS.Timeout | undefined;
      const graceOver = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), options.stopGraceMs ?? STOP_GRACE_MS)));
      const graceRanOut = await Promise.race([Promise.allSettled([...running]).then(() => false), graceOver]);
      clearTimeout(timer);
      if (graceRanOut) rt.log.warn({ runs: running.size }, 'scheduler stopping: runs still going are left where they are');
      await coordinator.releaseAll().catch((err: unknown) => rt.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'could not give the run leases back; they lapse on their own'));
      if (graceRanOut) await giveBackLocks();
    },
  };
}
