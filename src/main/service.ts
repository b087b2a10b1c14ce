// Starts the roles of a process: the HTTP API, the worker, and the reconciliation timer, in
// any combination. The command line, the worker thread and the tests share it.
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import type { ApiKey } from '../partners/apiKeys.js';
import type { Config } from '../shared/config.js';
import { createApp, type AppDeps } from '../http/app.js';
import { metricsListener } from '../http/metricsEndpoint.js';
import { createHttpServer } from '../http/server.js';
import { WarmUp } from '../http/warmUp.js';
import type { PartCache } from '../archive/partCache.js';
import type { Reconciler } from '../ingest/reconciler.js';
import type { Logger } from '../shared/log.js';
import { keepSweeping } from '../store/leftovers.js';
import { BoundaryPointerError } from '../shared/errors.js';

/** A part of a role that runs in the background until stopped. */
interface Background {
  start(): void;
  stop(): Promise<void>;
}

/**
 * What the roles use. Each is read only when its role starts (`api`: the app's deps; `worker`:
 * the worker, webhooks and the SNS relay; `reconcile`: the reconciler), so a caller may build
 * each on first use.
 */
export interface ServiceDeps extends AppDeps {
  config: Config;
  log: Logger;
  reconciler: Pick<Reconciler, 'runInTurn'>;
  worker: Background;
  webhooks: Background;
  snsRelay: Background | undefined;
  cache: Pick<PartCache, 'prepare'>;
}

export interface ServiceOptions {
  api: boolean;
  worker: boolean;
  reconcile: boolean;
  port?: number;
  host?: string;
  apiKeys: readonly ApiKey[];
}

export interface RunningService {
  url: string | undefined;
  server: Server | undefined;
  /** Where Prometheus scrapes this process (METRICS_PORT), if it is served. */
  metricsUrl: string | undefined;
  /** Graceful stop: no new requests, worker flushes, timers end. */
  stop(): Promise<void>;
}

/** How long a stop waits for requests under way (an ECS task gets 30 s after SIGTERM). */
const STOP_GRACE_MS = 20_000;

/** Where the server can be reached from this process: its own address, or loopback when it listens on every interface. */
function loopbackOf(host: string | undefined): string {
  if (!host || host === '0.0.0.0') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}

export async function startService(rt: ServiceDeps, options: ServiceOptions): Promise<RunningService> {
  // Only a process allowed to write cities/ can seed it (on AWS: bootstrap or the scheduler);
  // the others wait for a version to appear, and /ready says so meanwhile.
  await rt.boundaries.seedIfEmpty().catch((err: unknown) => {
    // A lost or unreadable pointer waits for an operator: its message says what to run.
    if (err instanceof BoundaryPointerError) rt.log.error({ err: err.message }, 'no boundary version can be served');
    else rt.log.warn({ err: String(err) }, 'could not seed the default boundaries');
  });
  // Loaded before the first request rather than by it: the national version takes about a second.
  await rt.boundaries.current().catch((err: unknown) => rt.log.warn({ err: String(err) }, 'no boundary version to load yet'));
  let timer: NodeJS.Timeout | undefined;
  let stopSweeping: (() => void) | undefined;
  let first: NodeJS.Immediate | undefined;
  if (options.reconcile) {
    // In the background, never before the API listens: after a crash there may be a backlog.
    const reconcile = () =>
      rt.reconciler.runInTurn(rt.config.reconcileAfterSeconds * 1000, rt.config.reconcileEverySeconds * 1000).catch((err: unknown) => {
        rt.log.warn({ err: String(err) }, 'reconciliation failed; will retry');
      });
    first = setImmediate(reconcile);
    timer = setInterval(reconcile, rt.config.reconcileEverySeconds * 1000);
    timer.unref();
  }
  if (options.worker) {
    rt.worker.start();
    rt.webhooks.start();
    rt.snsRelay?.start();
    // What a killed process left half-written; in the background, as reconciliation, and again every hour.
    stopSweeping = keepSweeping(rt.config, rt.log);
  }

  let server: Server | undefined;
  let url: string | undefined;
  if (options.api) {
    // The part cache adopts what the last run left while the API starts, not in its first answer.
    rt.cache.prepare().catch((err: unknown) => rt.log.warn({ err: String(err) }, 'could not adopt the part cache left by an earlier run; the next read tries again'));
    // The API asks itself for a short window before it resolves (http/warmUp.ts).
    const warmUp = new WarmUp();
    const app = createApp(rt, { apiKeys: options.apiKeys, warmUp, listeningUrl: () => url });
    const s = createHttpServer(app, rt.config.http, rt.log);
    server = await listen(s, options.port ?? rt.config.port, options.host ?? '0.0.0.0');
    const { port } = server.address() as AddressInfo;
    url = `http://${options.host && options.host !== '0.0.0.0' ? options.host : 'localhost'}:${port}`;
    await warmUp.run(`http://${loopbackOf(options.host)}:${port}`, rt.log);
  }

  let metricsServer: Server | undefined;
  let metricsUrl: string | undefined;
  if (rt.config.metrics.port !== undefined) {
    const { host } = rt.config.metrics;
    const s = createHttpServer(metricsListener(rt), rt.config.http, rt.log);
    try {
      metricsServer = await listen(s, rt.config.metrics.port, host);
    } catch (err) {
      // The API listens already: let it go, or a failed start would leave the process serving.
      const api = server;
      await new Promise<void>((resolve) => {
        if (!api) return resolve();
        api.close(() => resolve());
        api.closeAllConnections();
      });
      throw err;
    }
    const { port } = metricsServer.address() as AddressInfo;
    metricsUrl = `http://${loopbackOf(host)}:${port}/metrics`;
  }

  return {
    url,
    server,
    metricsUrl,
    async stop() {
      if (timer) clearInterval(timer);
      stopSweeping?.();
      if (first) clearImmediate(first);
      if (metricsServer) {
        const m = metricsServer;
        await new Promise<void>((resolve) => {
          m.close(() => resolve());
          m.closeAllConnections();
        });
      }
      if (server) {
        const s = server;
        await new Promise<void>((resolve) => {
          // Requests under way finish; keep-alive connections are closed as soon as they are
          // idle, including those that become idle after this call (otherwise they would hold
          // the stop for the whole keep-alive timeout); past the grace period, the rest go too.
          const sweep = setInterval(() => s.closeIdleConnections(), 100);
          const deadline = setTimeout(() => s.closeAllConnections(), STOP_GRACE_MS);
          s.close(() => {
            clearInterval(sweep);
            clearTimeout(deadline);
            resolve();
          });
          s.closeIdleConnections();
        });
      }
      if (options.worker) {
        await rt.worker.stop();
        await rt.webhooks.stop();
        await rt.snsRelay?.stop();
      }
    },
  };
}

function listen(server: Server, port: number, host: string): Promise<Server> {
  return new Promise<Server>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}
