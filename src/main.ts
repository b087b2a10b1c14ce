// Entry point. `node dist/src/main.js [all|serve|worker]`:
//   all    API + worker + reconciliation in one process (what `npm start` runs)
//   serve  the API alone (scale behind a load balancer)
//   worker the worker and reconciliation alone (scale with the queue)
import { resolveApiKeys } from './apiKeys.js';
import { bootstrap } from './bootstrap.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import { createRuntime } from './runtime.js';
import { startService } from './service.js';

const ROLES = {
  all: { api: true, worker: true, reconcile: true },
  serve: { api: true, worker: false, reconcile: false },
  worker: { api: false, worker: true, reconcile: true },
} as const;

async function main(): Promise<void> {
  const role = (process.argv[2] ?? 'all') as keyof typeof ROLES;
  if (!(role in ROLES)) {
    process.stderr.write(`unknown role "${role}"; use one of: ${Object.keys(ROLES).join(', ')}\n`);
    process.exit(2);
  }
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(78); // EX_CONFIG
    }
    throw err;
  }
  const rt = await createRuntime(config);
  // Create the bucket/queue where we own them: the embedded store, or an emulator.
  // On AWS the infrastructure code creates them and the service's role may not.
  if (config.storageUrl.startsWith('file://') || config.awsEndpointUrl) {
    await bootstrap(config, { ...(rt.s3 && { s3: rt.s3 }), ...(rt.sqs && { sqs: rt.sqs }) });
  }
  const keys = ROLES[role].api ? await resolveApiKeys(config.apiKeys, config.dataDir) : { keys: [] };
  const service = await startService(rt, { ...ROLES[role], apiKeys: keys.keys });
  rt.log.info({ role, storage: rt.store.description, queue: rt.queue.description, url: service.url }, 'started');
  if (service.url) process.stdout.write(`\nFlood report archive listening on ${service.url}\n`);
  if ('generated' in keys && keys.generated) {
    process.stdout.write(
      `Partner API key (${keys.generated.created ? 'created' : 'read'} ${keys.generated.file}): ${keys.generated.key}\n` +
        'Set API_KEYS to use your own keys.\n\n',
    );
  }

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    rt.log.info({ signal }, 'stopping: flushing buffered reports');
    service
      .stop()
      .then(() => rt.close())
      .then(() => process.exit(0))
      .catch((err: unknown) => {
        rt.log.error({ err: String(err) }, 'unclean stop; pending reports will be reconciled at next start');
        process.exit(1);
      });
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

main().catch((err: unknown) => {
  process.stderr.write(`fatal: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
