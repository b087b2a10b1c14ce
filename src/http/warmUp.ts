// A new process's first answers pay for compiling the code on their way (the HTTP parser and
// writer, Express's router, the rate limiter's address checks, the access log, the archive's
// planning and reading loop, DuckDB's first query): 30–50 ms on the first window a researcher
// pulls after a restart or a deploy, about as much again on a first Parquet answer. The API
// asks itself for a short window once, over loopback, before it says it listens, so no client
// pays that. What it asks for is declared by the routes it warms (routes.ts). These requests
// carry a token of this process alone; the request layer tells them apart (layer.ts), and leaves
// them out of the access log, the request metrics and the rate limits.
import { randomUUID } from 'node:crypto';
import http, { type IncomingMessage } from 'node:http';
import type { Logger } from '../shared/log.js';
import { ROUTES } from './routes.js';

const HEADER = 'x-flood-warm-up';
/** The window asked for: the newest minutes (a storm's open hour can be tens of MB, not a warm-up's business). */
const WINDOW_MS = 5 * 60_000;

export class WarmUp {
  private readonly token = randomUUID();

  /** Whether a request is this process's own warm-up. */
  is(req: IncomingMessage): boolean {
    return req.headers[HEADER] === this.token;
  }

  /**
   * Asks the API at `base` for what the routes declare, over the last minutes (the archive as
   * GeoJSON, CSV and Parquet, the process's first DuckDB query, and its count). Never fails: a
   * warm-up that goes wrong leaves a process as cold as it would be without one.
   */
  async run(base: string, log: Logger, now = Date.now()): Promise<void> {
    const started = performance.now();
    const window = `start=${new Date(now - WINDOW_MS).toISOString()}&end=${new Date(now).toISOString()}`;
    const paths = ROUTES.flatMap((route) => (route.warmUp?.(window) ?? []).map((query) => `${route.path}?${query}`));
    // One kept-alive connection, closed once the last (short) answer is in: a client that
    // closes as it reads an answer's last bytes (Connection: close) may do so before the
    // server has finished its side, which the server must then read as a hang-up.
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      for (const path of paths) await this.get(`${base}${path}`, agent);
      log.debug({ ms: Math.round(performance.now() - started) }, 'request path warmed up');
    } catch (err) {
      log.debug({ err: String(err) }, 'request path warm-up failed');
    } finally {
      agent.destroy();
    }
  }

  private get(url: string, agent: http.Agent): Promise<void> {
    return new Promise((resolve, reject) => {
      const req = http.get(url, { headers: { [HEADER]: this.token, 'user-agent': 'flood-archive warm-up' }, agent, timeout: 5_000 }, (res) => {
        res.resume();
        res.on('end', resolve);
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new Error('warm-up request timed out')));
      req.on('error', reject);
    });
  }
}
