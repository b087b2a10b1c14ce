// The worker thread of `all` (see thread.ts): the worker and reconciliation roles on a runtime
// of their own, stopped and asked for metrics by the API's thread.
import { parentPort, workerData } from 'node:worker_threads';
import type { Config } from '../shared/config.js';
import { UnavailableError } from '../shared/errors.js';
import { createLogger } from '../shared/log.js';
import { Metrics } from '../shared/metrics.js';
import { createRuntime } from './runtime.js';
import { startService } from './service.js';
import type { FromThread, ToThread } from '../worker/thread.js';

const port = parentPort!;
const say = (message: FromThread) => port.postMessage(message);
const { config } = workerData as { config: Config };

try {
  // Log lines go to the API's thread, which writes them with its own (see writeLogLines); no
  // process metrics here: the API's thread reports them once for the whole process.
  const log = createLogger(config.logLevel, { write: (lines: string) => say({ type: 'log', lines }) });
  const rt = await createRuntime(config, { log, metrics: new Metrics() });
  const service = await startService(rt, { api: false, worker: true, reconcile: true, apiKeys: [] });
  port.on('message', (m: ToThread) => {
    if (m.type === 'metrics') {
      void rt.metrics.registry.getMetricsAsJSON().then((metrics) => say({ type: 'metrics', id: m.id, metrics }));
    } else if (m.type === 'stop') {
      let clean = true;
      void service
        .stop()
        .then(() => rt.close())
        .catch((err: unknown) => {
          clean = false;
          rt.log.error({ err: String(err) }, 'the worker did not stop cleanly');
        })
        .finally(() => {
          say({ type: 'stopped', clean });
          port.close();
        });
    }
  });
  rt.log.info({ role: 'worker (thread)', storage: rt.store.description, queue: rt.queue.description }, 'started');
  say({ type: 'ready' });
} catch (err) {
  const e = err instanceof Error ? err : new Error(String(err));
  say({ type: 'failed', error: { name: e.name, message: e.message, ...(err instanceof UnavailableError && { dependency: err.dependency }) } });
  port.close();
}
