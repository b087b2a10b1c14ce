// `/ready` while readers keep Node's thread pool busy (`npm run bench:faults -- --only ready`):
// reports of the last 60 days posted late to `all` flushing every second, so that the days hold
// thousands of small parts with their sidecars (as `all` leaves them when no scheduler compacts);
// then six clients asking for counts and stats of the 60 days within a bbox (each a query of
// DuckDB's over those parts, holding a thread of the pool while it runs, and file reads that
// queue for one), and a load balancer's probe asking /ready twice a second. Measured twice on
// that archive: with Node's default pool of four threads, and as the executable starts the
// service (16).
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { probeReady, timedGet } from './readyProbe.js';
import { startServer } from './server.js';

export interface ReadyRun {
  pool: string;
  /** /ready answers by status, and the slowest (ms). */
  ready: Record<string, number>;
  slowestReadyMs: number;
  /** The readers' answers by status, and their median time (ms). */
  reads: Record<string, number>;
  readMedianMs: number;
}

const KEY = 'bench-ready-key-0123456789';
const DAY_MS = 86_400_000;

export async function readyUnderReads(options: { reports: number; seconds: number }): Promise<{ parts: number; runs: ReadyRun[] }> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'flood-ready-'));
  try {
    const window = `start=${new Date(Date.now() - 61 * DAY_MS).toISOString()}&end=${new Date(Date.now() + 3_600_000).toISOString()}&bbox=121.0,14.6,121.1,14.7`;
    const paths = [`/reports/archive/count?${window}`, `/reports/archive/stats?${window}&interval=day&by=local_area`];
    const poster = await startServer({ DATA_DIR: dir, FLUSH_INTERVAL_SECONDS: '1', RATE_LIMIT_FEED_PER_MINUTE: '100000000' }, { role: 'all', apiKey: KEY, logLevel: 'error' });
    try {
      // 100 a second: each flush (every second) writes a part for every day its reports fall on.
      for (let id = 1; id <= options.reports; id += 50) {
        const next = new Promise((resolve) => setTimeout(resolve, 500));
        await Promise.all(Array.from({ length: Math.min(50, options.reports - id + 1) }, (_, i) => postLate(poster.url, id + i)));
        await next;
      }
      // Until every report is archived (a few flushes; five minutes would mean one is lost).
      const giveUpAt = Date.now() + 300_000;
      for (let archived = 0; archived < options.reports; await new Promise((resolve) => setTimeout(resolve, 500))) {
        archived = await countOf(poster.url, window.replace(/&bbox=.*$/, ''));
        if (Date.now() > giveUpAt) throw new Error(`${archived} of ${options.reports} reports archived after five minutes`);
      }
    } finally {
      await poster.stop();
    }
    const parts = await partsUnder(path.join(dir, 'store', 'reports'));
    const runs: ReadyRun[] = [];
    for (const pool of ['4', undefined]) {
      const env = { DATA_DIR: dir, RATE_LIMIT_READ_PER_MINUTE: '1000000', ...(pool !== undefined && { UV_THREADPOOL_SIZE: pool }) };
      const server = await startServer(env, { role: 'all', apiKey: KEY, logLevel: 'error' });
      try {
        const until = Date.now() + options.seconds * 1000;
        const reads: Record<string, number> = {};
        const readMs: number[] = [];
        const reader = async (first: number) => {
          for (let i = first; Date.now() < until; i += 1) {
            const got = await timedGet(server.url, paths[i % paths.length]!);
            reads[String(got.status)] = (reads[String(got.status)] ?? 0) + 1;
            readMs.push(got.ms);
          }
        };
        const [{ ready, slowestMs: slowestReadyMs }] = await Promise.all([probeReady(server.url, until), ...Array.from({ length: 6 }, (_, i) => reader(i))]);
        readMs.sort((a, b) => a - b);
        runs.push({ pool: pool ?? 'the executable’s (16)', ready, slowestReadyMs, reads, readMedianMs: readMs[Math.floor(readMs.length / 2)] ?? NaN });
      } finally {
        await server.stop();
      }
    }
    return { parts, runs };
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

/** A report of the last 60 days in Quezon City, posted late. */
async function postLate(base: string, id: number): Promise<void> {
  const body = JSON.stringify({
    post_id: id,
    created_at: new Date(Date.now() - Math.random() * 60 * DAY_MS).toISOString(),
    partner_city: 'Quezon City',
    disaster_type: 'flood',
    location: { lat: 14.63 + Math.random() * 0.06, lng: 121.02 + Math.random() * 0.06 },
  });
  const res = await fetch(`${base}/feeds/partner`, { method: 'POST', headers: { 'X-Api-Key': KEY, 'Content-Type': 'application/json' }, body });
  await res.arrayBuffer();
  if (res.status !== 201) throw new Error(`post ${id}: ${res.status}`);
}

async function countOf(base: string, window: string): Promise<number> {
  const res = await fetch(`${base}/reports/archive/count?${window}`, { headers: { 'User-Agent': 'flood-bench/1.0' } });
  return ((await res.json()) as { result: { count: number } }).result.count;
}

/** The Parquet parts under a folder of the file store. */
async function partsUnder(dir: string): Promise<number> {
  const entries = await fsp.readdir(dir, { recursive: true });
  return entries.filter((name) => name.endsWith('.parquet')).length;
}
