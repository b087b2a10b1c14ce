// `all` runs the archive worker on a thread of its own. On the API's event loop its batches,
// tagging and flushes (a part's texts and Parquet are built in JavaScript) held every request
// behind them: a flush was what set the feed's p99. The thread builds its own runtime from the
// same configuration, as a `worker` process on the same DATA_DIR would, and shares the ledger
// and queue with the API through SQLite (or S3 and SQS): nothing but control and metrics
// crosses between them.
import { Worker } from 'node:worker_threads';
import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import type { Config } from '../shared/config.js';
import { UnavailableError, type Dependency } from '../shared/errors.js';
import { writeLogLines } from '../shared/log.js';

export type MetricsJson = MetricObjectWithValues<MetricValue<string>>[];

/** What the thread says to the API's thread. */
export type FromThread =
  | { type: 'ready' }
  | { type: 'failed'; error: { name: string; message: string; dependency?: Dependency } }
  | { type: 'metrics'; id: number; metrics: MetricsJson }
  | { type: 'log'; lines: string }
  /** clean: false when the worker could not flush what it held (the queue delivers it again). */
  | { type: 'stopped'; clean: boolean };

/** What the API's thread asks of it. */
export type ToThread = { type: 'metrics'; id: number } | { type: 'stop' };

export interface WorkerThread {
  /** The thread's metrics (the API's /metrics adds them to its own); none if it does not answer within a second. */
  metrics(): Promise<MetricsJson>;
  /** Settles only if the thread ends without being asked to (a crash): with why. */
  readonly failed: Promise<Error>;
  /** The worker flushes what it holds and releases its files; then the thread ends. Rejects when the flush failed. */
  stop(): Promise<void>;
}

/** How long a stopped thread may take to end once its worker has flushed (pending log lines). */
const EXIT_GRACE_MS = 5_000;
const METRICS_WAIT_MS = 1_000;

/** Starts the worker and reconciliation on a new thread; resolves once they run, rejects with why they could not start. */
export function startWorkerThread(config: Config): Promise<WorkerThread> {
  // The API's thread alone binds METRICS_PORT (its /metrics adds this thread's): a second bind of
  // a fixed port would fail the whole process's start.
  const threadConfig: Config = { ...config, metrics: { ...config.metrics, port: undefined } };
  const thread = new Worker(new URL('../main/workerThread.js', import.meta.url), { workerData: { config: threadConfig } });
  let stopping = false;
  let nextId = 0;
  const waiting = new Map<number, (m: MetricsJson) => void>();
  const ended = new Promise<number>((resolve) => thread.once('exit', resolve));
  let crash: Error | undefined;
  thread.once('error', (err) => (crash = err));
  const failed = ended.then((code) => {
    for (const answer of waiting.values()) answer([]);
    return crash ?? new Error(`the worker thread ended (exit code ${code})`);
  });

  const send = (message: ToThread) => thread.postMessage(message);
  const handle: WorkerThread = {
    failed: new Promise<Error>((resolve) => void failed.then((err) => !stopping && resolve(err))),
    metrics: () =>
      new Promise<MetricsJson>((resolve) => {
        const id = nextId++;
        const timer = setTimeout(() => {
          waiting.delete(id);
          resolve([]);
        }, METRICS_WAIT_MS);
        waiting.set(id, (m) => {
          clearTimeout(timer);
          waiting.delete(id);
          resolve(m);
        });
        send({ type: 'metrics', id });
      }),
    async stop() {
      if (stopping) return ended.then(() => undefined);
      stopping = true;
      send({ type: 'stop' });
      let clean = true;
      await Promise.race([
        ended,
        new Promise<void>((resolve) => thread.on('message', (m: FromThread) => m.type === 'stopped' && ((clean = m.clean), resolve()))).then(() =>
          Promise.race([ended, new Promise((resolve) => setTimeout(resolve, EXIT_GRACE_MS).unref())]),
        ),
      ]);
      await thread.terminate();
      if (!clean) throw new Error('the worker did not stop cleanly (its log says why): the queue delivers the reports it held again');
    },
  };

  return new Promise<WorkerThread>((resolve, reject) => {
    thread.on('message', (m: FromThread) => {
      if (m.type === 'ready') resolve(handle);
      else if (m.type === 'failed') reject(m.error.dependency ? new UnavailableError(m.error.dependency, m.error.message) : new Error(m.error.message));
      else if (m.type === 'metrics') waiting.get(m.id)?.(m.metrics);
      else if (m.type === 'log') writeLogLines(m.lines);
    });
    void failed.then(reject);
  });
}
