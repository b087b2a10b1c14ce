// A new process's first answers pay for compiling the code on their way (the HTTP parser and
// writer, Express's router, the rate limiter's address checks, the access log, the archive's
// planning and reading loop, DuckDB's first query): 30–50 ms on the first window a researcher
// pulls after a restart or a deploy, about as much again on a first Parquet answer. The API
// asks itself for a short window once, over loopback, before it says it listens, so no client
// pays that. These requests carry a token of this process alone; the access log, the request
// metrics and the rate limits leave them out.
import { randomUUID } from 'node:crypto';
import http, { type IncomingMessage } from 'node:http';
import type { Logger } from '../log.js';

const HEADER = 'x-flood-warm-up';
const HOUR_MS = 3_600_000;

export class WarmUp {
  private readonly token = randomUUID();

  /** Whether a request is this process's own warm-up. */
  is(req: IncomingMessage): boolean {
    return req.headers[HEADER] === this.token;
  }

  /**
   * Asks the API at `base` for the last hour of the archive as GeoJSON, CSV and Parquet (the
   * process's first DuckDB query), and for its count. Never fails: a warm-up that goes wrong
   * leaves a process as cold as it would be without one.
   */
  async run(base: string, log: Logger, now = Date.now()): Promise<void> {
    const started = performance.now();
    const hour = `start=${new Date(now - HOUR_MS).toISOString()}&end=${new Date(now).toISOString()}`;
    const paths = [`/reports/archive?${hour}&geoformat=geojson`, `/reports/archive?${hour}&format=csv`, `/reports/archive?${hour}&format=parquet`, `/reports/archive/count?${hour}`];
    try {
      for (const path of paths) await this.get(`${base}${path}`);
      log.debug({ ms: Math.round(performance.now() - started) }, 'request path warmed up');
    } catch (err) {
      log.debug({ err: String(err) }, 'request path warm-up failed');
    }
  }

  private get(url: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const req = http.get(url, { headers: { [HEADER]: this.token, 'user-agent': 'flood-archive warm-up' }, agent: false, timeout: 5_000 }, (res) => {
        res.resume();
        res.on('end', resolve);
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new Error('warm-up request timed out')));
      req.on('error', reject);
    });
  }
}
