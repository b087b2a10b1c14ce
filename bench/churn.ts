// The service while its archive is rewritten under it (`npm run bench:faults -- --only churn`):
// partners post (a fifth of them repeats) and retract, readers pull every format with and
// without compression and hang up at random points, while a CLI publishes the national and the
// two-city boundaries by turns, re-tags the window after each publish and compacts. Parts are
// retired a few seconds after their successors (RETIRE_GRACE_SECONDS, shortened so a run of
// minutes sees as many retirements reach slow reads as days of it would). Then the archive is
// checked: every acknowledged report once, none retracted, every tag from the last boundaries.
// Throughout, a load balancer's probe asks /ready twice a second: an instance busy answering is
// still ready to accept reports.
import { spawn } from 'node:child_process';
import fsp from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { asServer, CLI, runCli, type Server } from './server.js';
import { probeReady } from './readyProbe.js';
import { loadSets, postingPoints, SHARED_NATIONAL } from './national.js';

export interface ChurnOptions {
  /** The project's root: its two-city boundaries, and the national set beside it. */
  root: string;
  seconds: number;
  graceSeconds: number;
}

export interface ChurnRun {
  seconds: number;
  created: number;
  repeats: number;
  retracted: number;
  posts: Record<string, number>;
  /** Reads by outcome: `complete`, `hung up` (by the reader), `cut short` (by the server), and their statuses. */
  reads: Record<string, number>;
  /** `/ready` probes by status, and the slowest answer (ms). */
  ready: Record<string, number>;
  slowestReadyMs: number;
  /** Boundary publishes, each followed by a reprocess of the window; compactions; jobs that failed. */
  publishes: number;
  compactions: number;
  jobFailures: string[];
  answered: number;
  duplicates: number;
  missing: number;
  retractedAnswered: number;
  /** Reports whose tags are not the last boundaries' (the two-city set has no provinces). */
  staleTags: number;
  verifyOk: boolean;
  /** The service's log lines at error level. */
  serverErrors: string[];
}

const KEY_NAME = 'churn';
const API_KEY = 'churn-key-0123456789abcdef';
const DAY_MS = 86_400_000;

export async function churnRun(options: ChurnOptions): Promise<ChurnRun> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'flood-churn-'));
  const env = { DATA_DIR: dir, RETIRE_GRACE_SECONDS: String(options.graceSeconds), FLUSH_INTERVAL_SECONDS: '2', RATE_LIMIT_READ_PER_MINUTE: '1000000', RATE_LIMIT_FEED_PER_MINUTE: '1000000' };
  const sets = [SHARED_NATIONAL(options.root), path.join(options.root, 'boundaries', 'ph-2023')];
  const { twoCity } = await loadSets(sets[0]!);
  // Partners name their city (by name: a code is the boundary version's own, and the national set has others).
  const names = new Map(twoCity.cities.features.map((f) => [f.properties.code, f.properties.name]));
  const points = postingPoints(twoCity, 10_000).map((p) => ({ ...p, city: names.get(p.city)! }));
  const serverErrors: string[] = [];
  const server = await startLogged(env, serverErrors);
  const started = performance.now();
  const endMs = Date.now() + options.seconds * 1000;
  const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
  const from = day(Date.now() - 4 * DAY_MS);
  const to = day(Date.now() + DAY_MS);
  const window = `start=${encodeURIComponent(new Date(Date.now() - 4 * DAY_MS).toISOString())}&end=${encodeURIComponent(new Date(Date.now() + 3_600_000).toISOString())}`;
  const created = new Set<number>();
  const retracted = new Set<number>();
  const posts: Record<string, number> = {};
  const reads: Record<string, number> = {};
  const jobFailures: string[] = [];
  let repeats = 0;
  let publishes = 0;
  let compactions = 0;
  const tally = (into: Record<string, number>, key: string) => (into[key] = (into[key] ?? 0) + 1);
  try {
    let nextId = 1;
    const poster = async () => {
      while (Date.now() < endMs) {
        const repeat = nextId > 1 && Math.random() < 0.2;
        const id = repeat ? 1 + Math.floor(Math.random() * (nextId - 1)) : nextId++;
        if (repeat) repeats += 1;
        const point = points[id % points.length]!;
        const body = { post_id: id, created_at: new Date(Date.now() - Math.random() * 3 * DAY_MS).toISOString(), partner_city: point.city, disaster_type: 'flood', location: { lat: point.lat, lng: point.lng }, title: `report ${id}`, text: '=1+1' };
        const res = await request(server.url, 'POST', '/feeds/partner', { 'X-Api-Key': API_KEY, 'Content-Type': 'application/json' }, JSON.stringify(body));
        tally(posts, String(res.status));
        if (res.status === 201) created.add(id);
        if (created.size > 0 && Math.random() < 0.03) {
          const gone = [...created][Math.floor(Math.random() * created.size)]!;
          const out = await request(server.url, 'DELETE', `/feeds/partner/${gone}`, { 'X-Api-Key': API_KEY });
          tally(posts, `DELETE ${out.status}`);
          if (out.status === 200) retracted.add(gone);
        }
      }
    };
    const paths = [
      ...['geojson', 'topojson', 'csv', 'ndjson', 'arrow', 'parquet'].map((f) => `/reports/archive?${window}&format=${f}`),
      `/reports/archive/count?${window}`,
      `/reports/archive/stats?${window}&interval=hour&by=city`,
      '/ogc/collections/reports/items?limit=100',
    ];
    const reader = async () => {
      while (Date.now() < endMs) {
        const path = paths[Math.floor(Math.random() * paths.length)]!;
        const encoding = ['gzip', 'br', 'identity'][Math.floor(Math.random() * 3)]!;
        const hangUpAfter = [0, 10, 50_000, undefined, undefined][Math.floor(Math.random() * 5)];
        const res = await request(server.url, 'GET', path, { 'Accept-Encoding': encoding }, undefined, hangUpAfter);
        tally(reads, `${res.outcome} ${res.status}`);
      }
    };
    const jobs = async () => {
      const cli = async (args: string[]) => {
        const out = await runCli([...args, '--json'], env);
        if (out.code !== 0) jobFailures.push(`${args.join(' ')}: exit ${out.code}: ${out.stderr.slice(-300)}`);
      };
      while (Date.now() < endMs) {
        await cli(['cities', 'publish', '--from', sets[publishes % 2]!]);
        publishes += 1;
        await cli(['reprocess', '--from', from, '--to', to]);
        if (publishes % 3 === 0) {
          await cli(['compact']);
          compactions += 1;
        }
      }
    };
    // Four readers: as many whole-window answers as an API process runs at once by default.
    const [{ ready, slowestMs: slowestReadyMs }] = await Promise.all([probeReady(server.url, endMs), poster(), poster(), poster(), reader(), reader(), reader(), reader(), jobs()]);
    // The last boundaries are the two-city set: published (if the national set is current) and the window re-tagged.
    if (publishes % 2 === 1) {
      await runCli(['cities', 'publish', '--from', sets[1]!], env);
      publishes += 1;
    }
    await settle(server.url, window, created.size - retracted.size);
    const last = await runCli(['reprocess', '--from', from, '--to', to, '--json'], env);
    if (last.code !== 0) jobFailures.push(`last reprocess: exit ${last.code}`);
    const verify = await runCli(['verify', '--json'], env);
    const answer = await request(server.url, 'GET', `/reports/archive?${window}&format=ndjson`, {});
    const seen = new Map<string, number>();
    let staleTags = 0;
    for (const line of answer.body.toString('utf8').split('\n')) {
      if (line === '') continue;
      const { pkey, tags } = (JSON.parse(line) as { properties: { pkey: string; tags: { province_code: string | null } } }).properties;
      seen.set(pkey, (seen.get(pkey) ?? 0) + 1);
      if (tags.province_code !== null) staleTags += 1;
    }
    const pkeyOf = (id: number) => `partner-${KEY_NAME}-${id}`;
    return {
      seconds: (performance.now() - started) / 1000,
      created: created.size,
      repeats,
      retracted: retracted.size,
      posts,
      reads,
      ready,
      slowestReadyMs,
      publishes,
      compactions,
      jobFailures,
      answered: seen.size,
      duplicates: [...seen.values()].filter((n) => n > 1).length,
      missing: [...created].filter((id) => !retracted.has(id) && !seen.has(pkeyOf(id))).length,
      retractedAnswered: [...retracted].filter((id) => seen.has(pkeyOf(id))).length,
      staleTags,
      verifyOk: verify.code === 0,
      serverErrors,
    };
  } finally {
    await server.stop();
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

/** `all` on `env`, its log lines at error level kept in `errors`. */
async function startLogged(env: Record<string, string>, errors: string[]): Promise<Server> {
  const child = spawn(process.execPath, [CLI, 'all'], {
    env: { PATH: process.env.PATH ?? '', TZ: 'UTC', LOG_LEVEL: 'warn', PORT: '0', API_KEYS: `${KEY_NAME}:${API_KEY}`, MALLOC_ARENA_MAX: '2', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let pending = '';
  child.stdout!.on('data', (d: Buffer) => {
    const lines = (pending + d.toString('utf8')).split('\n');
    pending = lines.pop()!;
    for (const line of lines) {
      let entry: { level?: number; msg?: string; err?: { message?: string } };
      try {
        entry = JSON.parse(line) as typeof entry;
      } catch {
        continue; // not a log line (the banner)
      }
      if ((entry.level ?? 0) >= 50) errors.push(`${entry.msg}: ${entry.err?.message ?? ''}`.slice(0, 300));
    }
  });
  return asServer(child);
}

/** Waits until the window answers `expected` reports (the worker's backlog archived), 2 minutes at most. */
async function settle(url: string, window: string, expected: number): Promise<void> {
  for (let i = 0; i < 120; i++) {
    const res = await request(url, 'GET', `/reports/archive/count?${window}`, {});
    if (res.status === 200 && (JSON.parse(res.body.toString('utf8')) as { result: { count: number } }).result.count === expected) return;
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

interface Answer {
  status: number | string;
  body: Buffer;
  /** complete; hung up (by the reader, after `hangUpAfter` bytes); cut short (by the server). */
  outcome: 'complete' | 'hung up' | 'cut short';
}

function request(base: string, method: string, path: string, headers: Record<string, string>, body?: string, hangUpAfter?: number): Promise<Answer> {
  return new Promise((resolve) => {
    let hungUp = false;
    const req = http.request(new URL(path, base), { method, headers: { 'User-Agent': 'flood-bench/1.0', ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      let bytes = 0;
      res.on('data', (c: Buffer) => {
        bytes += c.length;
        chunks.push(c);
        if (hangUpAfter !== undefined && bytes > hangUpAfter) {
          hungUp = true;
          req.destroy();
        }
      });
      res.on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(chunks), outcome: 'complete' }));
      res.on('error', () => undefined);
      res.on('close', () => resolve({ status: res.statusCode!, body: Buffer.concat(chunks), outcome: hungUp ? 'hung up' : 'cut short' }));
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ status: err.code ?? 'error', body: Buffer.alloc(0), outcome: hungUp ? 'hung up' : 'cut short' }));
    if (hangUpAfter === 0) {
      hungUp = true;
      setTimeout(() => req.destroy(), Math.random() * 20);
    }
    req.end(body);
  });
}
