// The processes (`all`, `serve`, `worker`, `scheduler`) and `bootstrap`.
import { randomUUID } from 'node:crypto';
import { resolveApiKeys } from '../../partners/apiKeys.js';
import { bootstrap } from '../bootstrap.js';
import type { Runtime } from '../runtime.js';
import { bootstrapIfLocal, common, deps, loadCommandModules, print, type Command } from './options.js';
import { BoundaryPointerError } from '../../shared/errors.js';

function serviceCommand(role: 'all' | 'serve' | 'worker', summary: string): Command {
  const roles = {
    serve: { api: true, worker: false, reconcile: false },
    worker: { api: false, worker: true, reconcile: true },
  } as const;
  return {
    summary,
    usage: role,
    options: {},
    async run({ config }) {
      await loadCommandModules();
      const rt = await deps.createRuntime(config, { log: deps.createServiceLogger(config.logLevel) });
      await bootstrapIfLocal(config, rt);
      // Caught from here on: one that comes while the service starts (its warm-up) stops it
      // gracefully once started, rather than killing it part-way.
      const signal = caughtSignal();
      const api = role !== 'worker';
      const kept = api ? (await rt.ledger.listKeys()).some((k) => !k.revoked_at) : false;
      const keys = api ? await resolveApiKeys(config.apiKeys, config.dataDir, kept) : { keys: [] };
      // `all` is `serve` on this thread and `worker` on another (src/worker/thread.ts).
      const thread = role === 'all' ? await deps.startWorkerThread(config) : undefined;
      if (thread) rt.metrics.include(() => thread.metrics());
      let service;
      try {
        service = await deps.startService(rt, { ...roles[role === 'all' ? 'serve' : role], apiKeys: keys.keys });
      } catch (err) {
        await thread?.stop();
        throw err;
      }
      rt.log.info({ role, storage: rt.store.description, queue: rt.queue.description, url: service.url }, 'started');
      if (service.url) process.stdout.write(`\nFlood report archive listening on ${service.url}\n`);
      if (service.metricsUrl) {
        // Reached here through loopback; bound to every interface unless METRICS_HOST narrows it.
        const everywhere = rt.config.metrics.host === '0.0.0.0' || rt.config.metrics.host === '::';
        process.stdout.write(`Prometheus metrics on ${service.metricsUrl}${everywhere ? ` (bound to ${rt.config.metrics.host}: every interface)` : ''}\n`);
      }
      // The key itself only when it is created: output is kept in logs, and every start would copy it there.
      if ('generated' in keys && keys.generated) {
        process.stdout.write(
          (keys.generated.created ? `Partner API key (created ${keys.generated.file}): ${keys.generated.key}\n` : `Partner API key: in ${keys.generated.file}\n`) +
            'Set API_KEYS to use your own keys.\n\n',
        );
      }
      const running = service;
      const failure = await untilSignal(
        rt,
        signal,
        async () => {
          await running.stop();
          await thread?.stop();
        },
        thread?.failed,
      );
      if (failure) throw new Error(`the worker thread stopped: ${failure.message}`);
      return 0;
    },
  };
}

/** The first SIGTERM or SIGINT from now on (the default, killing the process, no longer applies). */
function caughtSignal(): Promise<string> {
  return new Promise((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
}

/**
 * Waits for `signal`, then stops gracefully (the worker flushes); or for `failed` (a part of the
 * process that ended on its own), then stops what remains and resolves with why.
 */
function untilSignal(rt: Runtime, signal: Promise<string>, stop: () => Promise<void>, failed?: Promise<Error>): Promise<Error | undefined> {
  return new Promise((resolve, reject) => {
    let stopping = false;
    const onStop = (reason: { signal: string } | { failure: Error }) => {
      if (stopping) return;
      stopping = true;
      if ('signal' in reason) rt.log.info(reason, 'stopping');
      else rt.log.fatal({ err: reason.failure.message }, 'stopping: the worker thread ended unexpectedly');
      // The runtime is closed however the stop went; a stop that failed (the worker could not
      // flush) fails the command, so the exit code says so.
      stop()
        .then(
          () => undefined,
          (err: unknown) => err,
        )
        .then(async (stopFailure) => {
          await rt.close();
          if (stopFailure !== undefined) throw stopFailure;
        })
        .then(() => resolve('failure' in reason ? reason.failure : undefined), reject);
    };
    void signal.then((name) => onStop({ signal: name }));
    void failed?.then((failure) => onStop({ failure }));
  });
}

export const all = serviceCommand('all', 'API + worker + reconciliation in one process (what npm start runs)');
export const serve = serviceCommand('serve', 'the HTTP API alone');
export const worker = serviceCommand('worker', 'the archive worker and reconciliation alone');

export const scheduler: Command = {
  summary: 'run the scheduled jobs (compaction, reconciliation, verify, the monthly release) with node-cron',
  usage: 'scheduler',
  options: {},
  async run({ config }) {
    await loadCommandModules();
    const rt = await deps.createRuntime(config, { log: deps.createServiceLogger(config.logLevel) });
    const signal = caughtSignal();
    // On AWS only the scheduler may publish the default boundaries: a start that cannot is a
    // failed start (the task is restarted), not a scheduler the others wait on forever. A lost
    // or unreadable pointer is an operator's to mend (logged): the jobs run meanwhile.
    await rt.boundaries.seedIfEmpty().catch((err: unknown) => {
      if (!(err instanceof BoundaryPointerError)) throw err;
      rt.log.error({ err: err.message }, 'no boundary version can be served');
    });
    // No API, worker or reconciliation: the metrics listener alone (METRICS_PORT), for job_runs_total.
    const service = await deps.startService(rt, { api: false, worker: false, reconcile: false, apiKeys: [] });
    const scheduler = deps.startScheduler(rt, deps.JOBS, `scheduler-${randomUUID()}`);
    rt.log.info({ jobs: deps.JOBS.map((j) => `${j.name} "${j.schedule(config)}"`) }, 'scheduler started');
    if (service.metricsUrl) process.stdout.write(`Prometheus metrics on ${service.metricsUrl}\n`);
    await untilSignal(rt, signal, async () => {
      await scheduler.stop();
      await service.stop();
    });
    return 0;
  },
};

export const bootstrapCommand: Command = {
  summary: 'create the bucket, the queue and its dead-letter queue, and publish the default boundaries if none are (idempotent)',
  usage: 'bootstrap [--json]',
  options: common,
  async run({ config, values }) {
    await loadCommandModules();
    const rt = await deps.createRuntime(config, { log: deps.createCommandLogger(config.logLevel) });
    try {
      const result = await bootstrap(config, { ...(rt.s3 && { s3: rt.s3 }), ...(rt.sqs && { sqs: rt.sqs }) });
      await rt.boundaries.seedIfEmpty();
      print(values, result, () => Object.entries(result).map(([k, v]) => `${k}: ${v}`).join('\n'));
    } finally {
      await rt.close();
    }
    return 0;
  },
};
