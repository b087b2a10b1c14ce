// npm run bench [-- --reports 2500000 --days 365 --s3 --ingest 20000 --backfill 300000 --hourly --quick --only archive,ingest,memory,bulk --windows day,week,month,year --formats geojson,parquet --answers-only --data DIR]
// Builds a synthetic archive of hourly parts, compacts its closed days with the
// real `compact` command (unless --hourly), serves it with the real entry point, and
// measures over HTTP: archive latency per window and format, bulk throughput
// and the server's peak RSS, count latency, ingest throughput with durable
// acceptance (posts only), freshness (POST → visible, measured while posting
// continues), storage bytes per report.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { pageScenario, statsScenario } from './explorer.js';
import { asServer, cliJson as cli, freePort, peakRssMb, processCpuMs, startServer, threadCpuMs, type Server } from './server.js';
import { startMotoServer } from './moto.js';
import { defaultBoundaries } from '../src/boundaries/defaultBoundaries.js';
import { citiesRows, loadSets, postingPoints, SHARED_NATIONAL, taggingRows, versionLoadRows } from './national.js';
import { buildBenchStore } from './synthetic.js';
import { bulkScenario } from './bulk.js';
import { reprocessRows, type BoundaryFolder } from './reprocess.js';
import { footprint, storeBytes } from './footprint.js';
import { startShapedProxyProcess } from './shapedProxyProcess.js';
import { ingestOnShapedS3 } from './ingestS3.js';
import { uploadStore } from './uploadStore.js';
import { pull, type Pulled } from './pull.js';
import { feedBody, postFeed } from './partnerPosts.js';
import { syncScenario } from './sync.js';
import { readyCostRows } from './readyCosts.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..'); // dist/bench → project root

const { values: args } = parseArgs({
  options: {
    reports: { type: 'string', default: '2500000' },
    days: { type: 'string', default: '365' },
    ingest: { type: 'string', default: '20000' },
    /** Reports over a year for the bulk scenario's spread-out file (the size of a real partner's backfill); the year is --reports. */
    backfill: { type: 'string', default: '300000' },
    /** Reports the bulk scenario imports on the S3 emulator. */
    'bulk-s3': { type: 'string', default: '20000' },
    s3: { type: 'boolean', default: false },
    /** The archive answers (with archive) and the posts of ingest-s3 on S3 behind a proxy shaped as S3 on the network: "first-byte ms,MB/s per connection", e.g. 30,100. */
    's3-shaped': { type: 'string' },
    quick: { type: 'boolean', default: false },
    hourly: { type: 'boolean', default: false },
    /** Comma-separated scenarios to run: archive (with stats and the page), stats (stats and the page alone, on the same archive), ingest, memory (the API over 100,000 posts), bulk (imports: a spread-out file against DuckDB, the year in time order and shuffled, on the S3 emulator, and beside live posts; the year in time order reprocessed to the national set and back), national (tagging, ingest and /cities with the national boundaries beside the two-city default), ingest-s3 (posts on moto behind the shaped proxy, --s3-shaped or 30,100), sync (a month imported, then its first sync beside the month pulled whole, each cold and warm), ready-texts (a compacted day's ready texts, step by step). */
    only: { type: 'string', default: 'archive,ingest' },
    /** Comma-separated archive windows to measure: day, week, month, year. */
    windows: { type: 'string', default: 'day,week,month,year' },
    /** Comma-separated archive formats to measure. */
    formats: { type: 'string', default: 'geojson,topojson,csv,parquet,arrow' },
    /** The archive answers' Accept-Encoding: identity, or gzip (MB is then the bytes sent, compressed). */
    encoding: { type: 'string', default: 'identity' },
    /** Archive answers alone: no stats or page scenarios after them. */
    'answers-only': { type: 'boolean', default: false },
    /** Keep the built archive in this directory and reuse it on the next run (skips building and compacting when it holds one). */
    data: { type: 'string' },
    /** The ingest and sync scenarios against another build's dist/src/main/cli.js (the same client, to compare releases). */
    cli: { type: 'string' },
    /** Cold pulls per archive answer, each by a new process with empty caches: the table gives their median. */
    'cold-runs': { type: 'string', default: '3' },
  },
});
const ONLY = new Set(String(args.only).split(','));
const QUICK = args.quick === true;
const REPORTS = QUICK ? 50_000 : Number(args.reports);
const DAYS = QUICK ? 30 : Number(args.days);
const INGEST = QUICK ? 2_000 : Number(args.ingest);
const COLD_RUNS = QUICK ? 1 : Math.max(1, Number(args['cold-runs']));
const START_MS = Date.UTC(2025, 0, 1);
const END_MS = START_MS + DAYS * 86_400_000 - 1;
const API_KEY = randomBytes(18).toString('base64url');

/** The boundary sets a reprocess figure publishes, in the order given: the shipped default and the national set. */
/** Boundary sets by name; "relabelled": the same boundaries published again under another label (a new version that moves no report). */
function boundaryFolders(labels: readonly (BoundaryName | `${BoundaryName}, relabelled`)[]): BoundaryFolder[] {
  return labels.map((label) => ({ label, folder: label.startsWith('national') ? SHARED_NATIONAL(root) : path.join(root, 'boundaries', 'ph-2023') }));
}
type BoundaryName = 'two-city' | 'national';

interface Row {
  [k: string]: string | number;
}
const results: { scenario: string; rows: Row[] }[] = [];

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

function resetPeakRss(pid: number): void {
  try {
    fs.writeFileSync(`/proc/${pid}/clear_refs`, '5');
  } catch {
    // Not permitted here: the peak then covers the whole run so far.
  }
}

/** A timed pull, its client a new process (bench/pull.ts). */
function timedGet(url: string): Promise<Pulled> {
  return pull(url, String(args.encoding));
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
};
const iso = (ms: number) => new Date(ms).toISOString().slice(0, 19) + '%2B0000';

/**
 * Archive answers per window and format, cold and warm side by side: cold is the first pull
 * after a restart with empty caches (render, answer and part caches); warm the p50 of the
 * repeats that follow. Beside them, the wire floor for the same number of bytes.
 */
async function archiveScenarios(start: () => Promise<Server>, cacheDir: string, label: string, store?: { downloaded: () => Promise<number>; cpuMs: () => number; proxyCpuMs: () => number }): Promise<void> {
  const wanted = new Set(String(args.windows).split(','));
  const windows = (
    [
      ['day', '1 day', 86_400_000, QUICK ? 5 : 10],
      ['week', '1 week', 7 * 86_400_000, QUICK ? 5 : 10],
      ['month', '1 month', 30 * 86_400_000, QUICK ? 3 : 5],
      ['year', `${DAYS} days`, DAYS * 86_400_000, QUICK ? 2 : 3],
    ] as const
  )
    .filter(([key]) => wanted.has(key))
    .map(([, name, span, iterations]) => [name, span, iterations] as const);
  const rows: Row[] = [];
  const countRows: Row[] = [];
  const sizes: { row: Row; bytes: number; cold: number; warm: number }[] = [];
  let server = await start();
  for (const [name, span, iterations] of windows) {
    // Windows end in the storm season, where the archive is busiest.
    const end = Math.min(END_MS, START_MS + Math.floor(DAYS * 0.8) * 86_400_000 + span / 2);
    const startMs = Math.max(START_MS, end - span + 1);
    const q = `start=${iso(startMs)}&end=${iso(end)}`;
    const countTimes: number[] = [];
    let count = 0;
    for (let i = 0; i < iterations; i++) {
      const t0 = performance.now();
      const res = await fetch(`${server.url}/reports/archive/count?${q}`, { headers: { 'User-Agent': 'flood-bench/1.0' } });
      if (res.status !== 200) throw new Error(`count of ${name}: ${res.status} ${await res.text()}`);
      count = ((await res.json()) as { result: { count: number } }).result.count;
      countTimes.push(performance.now() - t0);
    }
    countRows.push({ window: name, reports: count, 'p50 ms': Math.round(pct(countTimes, 50)), 'p95 ms': Math.round(pct(countTimes, 95)) });
    const formats = String(args.formats).split(',');
    for (const format of (['geojson', 'topojson', 'csv', 'parquet', 'arrow'] as const).filter((f) => formats.includes(f))) {
      const param = format === 'geojson' || format === 'topojson' ? `geoformat=${format}` : `format=${format}`;
      // Cold: a new process, every cache emptied; the median of a few such pulls (one is at the
      // mercy of whatever else the machine does in that second), and the highest peak RSS.
      const colds: number[] = [];
      const firstBytes: number[] = [];
      let coldRss = 0;
      let bytes = 0;
      let fetched = 0;
      const storeCpu: number[] = [];
      const proxyCpu: number[] = [];
      const serverCpu: number[] = [];
      const clientCpu: number[] = [];
      for (let run = 0; run < COLD_RUNS; run++) {
        await server.stop();
        await fsp.rm(cacheDir, { recursive: true, force: true });
        server = await start();
        resetPeakRss(server.pid);
        const before = (await store?.downloaded()) ?? 0;
        const cpuBefore = store?.cpuMs() ?? 0;
        const proxyCpuBefore = store?.proxyCpuMs() ?? 0;
        const serverCpuBefore = processCpuMs(server.pid);
        const first = await timedGet(`${server.url}/reports/archive?${q}&${param}`);
        clientCpu.push(first.cpuMs);
        serverCpu.push(processCpuMs(server.pid) - serverCpuBefore);
        proxyCpu.push((store?.proxyCpuMs() ?? 0) - proxyCpuBefore);
        fetched = ((await store?.downloaded()) ?? 0) - before;
        storeCpu.push((store?.cpuMs() ?? 0) - cpuBefore);
        if (first.status !== 200) log(`${label} ${name} ${format}: cold HTTP ${first.status}`);
        colds.push(first.ms);
        firstBytes.push(first.firstByteMs);
        coldRss = Math.max(coldRss, peakRssMb(server.pid));
        bytes = first.bytes;
      }
      const cold = { ms: pct(colds, 50), bytes };
      const times: number[] = [];
      for (let i = 0; i < iterations; i++) {
        const r = await timedGet(`${server.url}/reports/archive?${q}&${param}`);
        if (r.status !== 200) log(`${label} ${name} ${format}: HTTP ${r.status}`);
        times.push(r.ms);
      }
      const warm = pct(times, 50);
      const row: Row = {
        window: name,
        format,
        reports: count,
        MB: Math.round((cold.bytes / 1e6) * 10) / 10,
        'cold ms': Math.round(cold.ms),
        'cold first byte ms': Math.round(pct(firstBytes, 50)),
        'warm p50 ms': Math.round(warm),
        'cold features/s': Math.round(count / (cold.ms / 1000)),
        'warm features/s': Math.round(count / (warm / 1000)),
        'cold peak RSS MB': Math.round(coldRss),
        // The service's CPU (every thread) during the cold pull: what the path costs it, whatever the wall time.
        'cold service CPU ms': Math.round(pct(serverCpu, 50)),
        // The client's CPU reading the answer, on the same cores.
        'cold client CPU ms': Math.round(pct(clientCpu, 50)),
        ...(store && {
          'cold MB from S3': Math.round(fetched / 1e5) / 10,
          'from S3 / answer': Math.round((fetched / cold.bytes) * 100) / 100,
          // The emulator's own CPU during the cold pull: on these two cores it is taken from the service.
          'cold S3 emulator CPU ms': Math.round(pct(storeCpu, 50)),
          'cold proxy CPU ms': Math.round(pct(proxyCpu, 50)),
        }),
      };
      rows.push(row);
      sizes.push({ row, bytes: cold.bytes, cold: cold.ms, warm });
      log(`${label} ${name} ${format}: cold ${Math.round(cold.ms)} ms, warm p50 ${Math.round(warm)} ms, ${count} reports, ${Math.round(cold.bytes / 1e6)} MB`);
    }
  }
  await server.stop();
  // The wire floor: the same number of bytes through the same HTTP stack, from memory. Cold as
  // the answers are: the first pull of a new process (which pays for compiling its HTTP path
  // and for a new connection's TCP windows), the median of three processes; warm: p50 of three
  // more pulls.
  for (const s of sizes) {
    const colds: number[] = [];
    const times: number[] = [];
    for (let p = 0; p < 3; p++) {
      const floor = await startFloor(s.bytes);
      colds.push((await timedGet(`${floor.url}/bytes/${s.bytes}`)).ms);
      if (p === 2) for (let i = 0; i < 3; i++) times.push((await timedGet(`${floor.url}/bytes/${s.bytes}`)).ms);
      await floor.stop();
    }
    const [cold, warm] = [pct(colds, 50), pct(times, 50)];
    s.row['floor cold ms'] = Math.round(cold * 10) / 10;
    s.row['floor warm ms'] = Math.round(warm * 10) / 10;
    s.row['cold/floor cold'] = Math.round((s.cold / cold) * 10) / 10;
    s.row['warm/floor warm'] = Math.round((s.warm / warm) * 10) / 10;
  }
  results.push({ scenario: `archive, cold (first pull after a restart, caches empty) and warm (p50 of repeats) (${label}${args.encoding === 'identity' ? '' : `, Accept-Encoding: ${String(args.encoding)}`})`, rows });
  results.push({ scenario: `count (${label})`, rows: countRows });
}

/** The wire floor: bytes from memory sent by a plain express process over loopback. */
function startFloor(bytes: number): Promise<Server> {
  return asServer(spawn(process.execPath, [path.join(root, 'dist', 'bench', 'wireFloor.js'), String(bytes)], { stdio: ['ignore', 'pipe', 'inherit'] }));
}

/**
 * Ingest throughput and freshness with `clients` partners posting at once, against `all`, or
 * against `serve` and `worker` started apart on one DATA_DIR (they share the SQLite queue), or
 * against `serve` alone ('api-only': nothing archives, so no freshness; what the API costs
 * without a worker on its event loop or its cores).
 */
/** Where the posts are: one point in Quezon City (the reference figure), or points across a boundary set, published first when not the default. */
interface IngestPlaces {
  label: string;
  points: { lng: number; lat: number; city: string }[];
  publishFrom?: string;
}

async function ingestScenario(clients: number, split: boolean | 'api-only', places?: IngestPlaces): Promise<void> {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'flood-bench-ingest-'));
  if (places?.publishFrom) await cli(['cities', 'publish', '--from', places.publishFrom, '--label', places.label], { DATA_DIR: dataDir });
  const flush = 5;
  // The freshness watchers poll often: the read limit would answer them 429 and skew the figure.
  const env = { DATA_DIR: dataDir, FLUSH_INTERVAL_SECONDS: String(flush), RATE_LIMIT_FEED_PER_MINUTE: '100000000', RATE_LIMIT_READ_PER_MINUTE: '100000000' };
  const otherBuild = args.cli;
  const server = await startServer(env, { role: split ? 'serve' : 'all', apiKey: API_KEY, ...(otherBuild && { cli: otherBuild }) });
  const worker = split === true ? await startServer({ ...env, PORT: '0' }, { role: 'worker', listens: false, apiKey: API_KEY, ...(otherBuild && { cli: otherBuild }) }) : undefined;
  const base = Date.UTC(2026, 10, 20, 0, 0, 0);
  let next = 0;
  const at = (i: number) => (places ? places.points[i % places.points.length]! : { lng: 121.0497, lat: 14.6516, city: 'Quezon City' });
  const bodyOf = (i: number) =>
    JSON.stringify({
      post_id: 1_000_000 + i,
      created_at: new Date(base + i * 10).toISOString(),
      // A city's code names it as well as its name does.
      partner_city: at(i).city,
      disaster_type: 'flood',
      location: { lat: at(i).lat, lng: at(i).lng },
      title: 'Baha sa kalsada',
      text: 'Hanggang tuhod ang tubig.',
    });
  /** `clients` partners post reports until `end`; `accepted` hears of each 201. */
  const postUntil = (end: number, accepted: (i: number, createdMs: number, sentAt: number, acceptedAt: number) => void) =>
    Promise.all(
      Array.from({ length: clients }, async () => {
        for (;;) {
          const i = next++;
          if (i >= end) return;
          const sentAt = performance.now();
          const status = await post(`${server.url}/feeds/partner`, bodyOf(i));
          if (status !== 201) throw new Error(`POST answered ${status}`);
          accepted(i, base + i * 10, sentAt, performance.now());
        }
      }),
    );

  // Throughput: partners posting, nobody else asking (as the reference figure was taken). The
  // load comes from autocannon (one keep-alive connection per partner, each waiting for its
  // answer before the next post), whose client costs a fraction of Node's http.request: on two
  // shared cores every µs the client spends is taken from the server.
  const t0 = performance.now();
  // Where the CPU goes: the server's event loop (what bounds it), and this client, which runs on
  // the same cores and is part of the figure.
  const loop0 = threadCpuMs(server.pid);
  const client0 = process.cpuUsage();
  const { latencies, statuses } = await cannon(`${server.url}/feeds/partner`, clients, INGEST, () => bodyOf(next++));
  const seconds = (performance.now() - t0) / 1000;
  const loopUs = Math.round(((threadCpuMs(server.pid) - loop0) * 1000) / INGEST);
  const client = process.cpuUsage(client0);
  const clientUs = Math.round((client.user + client.system) / INGEST);
  const refused = [...statuses].filter(([status]) => status !== 201);
  if (refused.length > 0) throw new Error(`posts answered ${refused.map(([status, n]) => `${n}× ${status}`).join(', ')}`);

  // Freshness under the same load: 40 of the next reports are watched until the archive shows them.
  const freshnessReports = split === 'api-only' ? 0 : Math.max(400, Math.floor(INGEST / 2));
  const every = Math.max(1, Math.floor(freshnessReports / 40));
  const freshness: number[] = [];
  const watchers: Promise<void>[] = [];
  await postUntil(INGEST + freshnessReports, (i, createdMs, _s, acceptedAt) => {
    if ((i - INGEST) % every === 0) watchers.push(watch(server.url, createdMs, acceptedAt, freshness));
  });
  await Promise.all(watchers);
  await server.stop();
  await worker?.stop();
  if (!split || split === true) results.push({ scenario: `storage after ingest, by store (concurrency ${clients}${split ? ', apart' : ''})`, rows: await footprint(dataDir, INGEST + freshnessReports) });
  results.push({
    scenario: `ingest (embedded, durable acceptance, concurrency ${clients}${split === true ? ', serve and worker apart' : split ? ', serve alone: nothing archives' : ''}${places ? `, ${places.label}` : ''})`,
    rows: [
      {
        reports: INGEST,
        'accepted/s': Math.round(INGEST / seconds),
        'p50 ms': Math.round(pct(latencies, 50) * 10) / 10,
        'p99 ms': Math.round(pct(latencies, 99) * 10) / 10,
        'API event loop CPU µs/post': loopUs,
        'bench client CPU µs/post': clientUs,
        'flush interval s': flush,
        'freshness p50 s': freshness.length ? Math.round(pct(freshness, 50) / 100) / 10 : '-',
        'freshness p95 s': freshness.length ? Math.round(pct(freshness, 95) / 100) / 10 : '-',
      },
    ],
  });
  await fsp.rm(dataDir, { recursive: true, force: true });
}

/** RSS of a process now, in MB (Linux). */
function rssMb(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

/**
 * The API alone (`serve`, no worker in the process) over many posts: its memory must stay
 * flat, as nothing of an accepted report is kept in the process once it is in the ledger.
 */
async function memoryScenario(posts: number): Promise<void> {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'flood-bench-memory-'));
  const server = await startServer({ DATA_DIR: dataDir, RATE_LIMIT_FEED_PER_MINUTE: '100000000' }, { role: 'serve', apiKey: API_KEY });
  const rows: Row[] = [];
  const sample = (label: string | number) => rows.push({ posts: label, 'RSS MB': Math.round(rssMb(server.pid)) });
  sample(0);
  const step = posts / 10;
  let next = 0;
  for (let until = step; until <= posts; until += step) {
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        for (;;) {
          const i = next++;
          if (i >= until) return;
          const body = feedBody(3_000_000 + i, Date.UTC(2026, 10, 20) + i * 10);
          const status = await post(`${server.url}/feeds/partner`, body);
          if (status !== 201) throw new Error(`POST answered ${status}`);
        }
      }),
    );
    sample(until);
  }
  await new Promise((r) => setTimeout(r, 10_000));
  sample(`${posts} + 10 s idle`);
  await server.stop();
  results.push({ scenario: `memory of the API alone (serve) over ${posts.toLocaleString()} posts`, rows });
  await fsp.rm(dataDir, { recursive: true, force: true });
}

/** A POST on a keep-alive connection (lighter on the shared CPU than fetch); one connection per client. */
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
function post(url: string, body: string): Promise<number> {
  return postFeed(agent, url, body, API_KEY);
}

/** `amount` POSTs of `body()` over `connections` connections; each answer's status and latency (ms). */
function cannon(url: string, connections: number, amount: number, body: () => string): Promise<{ latencies: number[]; statuses: Map<number, number> }> {
  const latencies: number[] = [];
  const statuses = new Map<number, number>();
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url,
        connections,
        amount,
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': API_KEY },
        requests: [{ setupRequest: (request) => ({ ...request, body: body() }) }],
      },
      (err, result) => {
        if (err) reject(err);
        else if (result.errors > 0 || result.timeouts > 0) reject(new Error(`${result.errors} connection errors, ${result.timeouts} timeouts`));
        else resolve({ latencies, statuses });
      },
    );
    instance.on('response', (_client, status, _bytes, ms) => {
      latencies.push(ms);
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
    });
  });
}

/** Polls until the report created at `createdMs` is in the archive; records the delay since its 201. */
async function watch(url: string, createdMs: number, acceptedAt: number, out: number[]): Promise<void> {
  const q = `start=${new Date(createdMs).toISOString().replace('Z', '%2B0000')}&end=${new Date(createdMs).toISOString().replace('Z', '%2B0000')}`;
  for (;;) {
    const res = await fetch(`${url}/reports/archive/count?${q}`, { headers: { 'User-Agent': 'flood-bench/1.0' } });
    const body = (await res.json()) as { result?: { count: number } };
    if (body.result?.count === 1) {
      out.push(performance.now() - acceptedAt);
      return;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}


function printTable(title: string, rows: Row[]): void {
  if (rows.length === 0) return;
  const cols = Object.keys(rows[0]!);
  const widths = cols.map((c) => Math.max(c.length, ...rows.map((r) => String(r[c]).length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padStart(widths[i]!)).join(' | ')} |`;
  process.stdout.write(`\n${title}\n${line(cols)}\n|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|\n`);
  for (const r of rows) process.stdout.write(`${line(cols.map((c) => String(r[c])))}\n`);
}

/** Builds the synthetic archive, compacts it, and measures reads (archive, count, stats, the page). */
async function archiveBench(dir: string, dataDir: string, storeDir: string): Promise<void> {
  if (fs.existsSync(path.join(storeDir, 'reports'))) {
    log(`reusing the archive in ${dataDir}`);
    return archiveReads(dir, dataDir, storeDir);
  }
  const boundaries = await defaultBoundaries();
  log(`building ${REPORTS.toLocaleString()} reports over ${DAYS} days …`);
  let t = performance.now();
  const built = await buildBenchStore({ storeDir, reports: REPORTS, startMs: START_MS, days: DAYS, boundaries });
  const buildSeconds = (performance.now() - t) / 1000;
  results.push({
    scenario: 'synthetic archive',
    rows: [{ reports: REPORTS, days: DAYS, parts: built.parts, 'MB': Math.round(built.bytes / 1e5) / 10, 'bytes/report': Math.round((built.bytes / REPORTS) * 10) / 10, 'build s': Math.round(buildSeconds) }],
  });

  if (!args.hourly) {
    log('compacting closed days …');
    t = performance.now();
    const compacted = await cli(['compact', '--from', new Date(START_MS).toISOString().slice(0, 10), '--to', new Date(END_MS).toISOString().slice(0, 10)], { DATA_DIR: dataDir, RETIRE_GRACE_SECONDS: '0' });
    const seconds = (performance.now() - t) / 1000;
    const after = await storeBytes(path.join(storeDir, 'reports'));
    const ready = await storeBytes(path.join(storeDir, 'ready'), '.ready');
    results.push({
      scenario: 'compaction (closed days into one part each, with their ready texts)',
      rows: [
        {
          days: Number(compacted.daysCompacted),
          'parts before': built.parts,
          'parts after': after.files,
          'MB': Math.round(after.bytes / 1e5) / 10,
          'bytes/report': Math.round((after.bytes / REPORTS) * 10) / 10,
          'ready texts MB': Math.round(ready.bytes / 1e5) / 10,
          'ready bytes/report': Math.round((ready.bytes / REPORTS) * 10) / 10,
          'compaction s': Math.round(seconds),
        },
      ],
    });
  }

  await archiveReads(dir, dataDir, storeDir);
}

/** The national boundaries beside the two-city default: tagging, ingest with reports from all over, /cities. */
async function nationalScenario(): Promise<void> {
  const { twoCity, national } = await loadSets(SHARED_NATIONAL(root));
  results.push({ scenario: 'tagging (the worker tags each report; µs per report)', rows: taggingRows(twoCity, national) });
  results.push({ scenario: 'loading a boundary version in a process (at a start, and after a publish)', rows: await versionLoadRows([{ label: 'two-city', set: twoCity }, { label: 'national', set: national }]) });
  await ingestScenario(16, false, { label: 'two-city boundaries, points in its barangays', points: postingPoints(twoCity, 5_000) });
  await ingestScenario(16, false, { label: 'national boundaries, points in barangays nationwide', points: postingPoints(national, 5_000), publishFrom: SHARED_NATIONAL(root) });
  const cities: Row[] = [];
  for (const publishFrom of [undefined, SHARED_NATIONAL(root)]) {
    const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'flood-bench-cities-'));
    if (publishFrom) await cli(['cities', 'publish', '--from', publishFrom, '--label', 'national'], { DATA_DIR: dataDir });
    const server = await startServer({ DATA_DIR: dataDir }, { role: 'serve', apiKey: API_KEY });
    cities.push(...(await citiesRows(server.url, publishFrom ? 'national (1,642 cities)' : 'two-city', publishFrom !== undefined)));
    await server.stop();
    await fsp.rm(dataDir, { recursive: true, force: true });
  }
  results.push({ scenario: 'GET /cities (cold: the first request after a start)', rows: cities });
}

/**
 * A year tagged with the national boundaries: stats by region, province and city (cold and warm),
 * the explorer opening on the country, and reprocessing the year after publishing the two-city set,
 * then the national one again (every part is rewritten both times).
 */
async function nationalYearScenario(): Promise<void> {
  const { national } = await loadSets(SHARED_NATIONAL(root));
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'flood-bench-national-'));
  const dataDir = path.join(dir, 'data');
  const storeDir = path.join(dataDir, 'store');
  await fsp.mkdir(storeDir, { recursive: true });
  try {
    log(`building ${REPORTS.toLocaleString()} reports over ${DAYS} days, tagged with the national boundaries …`);
    let t = performance.now();
    const built = await buildBenchStore({ storeDir, reports: REPORTS, startMs: START_MS, days: DAYS, boundaries: national });
    const buildS = (performance.now() - t) / 1000;
    t = performance.now();
    await cli(['compact', '--from', new Date(START_MS).toISOString().slice(0, 10), '--to', new Date(END_MS).toISOString().slice(0, 10)], { DATA_DIR: dataDir, RETIRE_GRACE_SECONDS: '0' });
    results.push({ scenario: 'national year (synthetic, points in barangays nationwide)', rows: [{ reports: REPORTS, days: DAYS, parts: built.parts, 'build s': Math.round(buildS), 'compaction s': Math.round((performance.now() - t) / 1000) }] });
    const serve = () => startServer({ DATA_DIR: dataDir, RATE_LIMIT_READ_PER_MINUTE: '100000000' }, { role: 'serve', apiKey: API_KEY });
    results.push({ scenario: 'stats, national year (cold: a new process, every cache emptied)', rows: await statsScenario(serve, path.join(dataDir, 'cache'), START_MS, DAYS, ['region', 'province', 'city']) });
    const server = await serve();
    results.push({ scenario: 'explorer page load, national year (opens on the regions)', rows: await pageScenario(server.url, START_MS, DAYS) });
    await server.stop();
    t = performance.now();
    const made = await cli(['release', '--period', new Date(START_MS).toISOString().slice(0, 4)], { DATA_DIR: dataDir });
    const releaseS = (performance.now() - t) / 1000;
    results.push({
      scenario: 'release of the year (monthly GeoParquet and CSV.gz, manifest, STAC, citation)',
      rows: [{ reports: Number(made.reports), files: Number(made.files), MB: Math.round(Number(made.bytes) / 1e5) / 10, 'bytes/report': Math.round((Number(made.bytes) / Number(made.reports)) * 10) / 10, s: Math.round(releaseS * 10) / 10 }],
    });
    // Reprocessing the year after publishing the two-city set (most reports leave every city),
    // then the national set again (every report comes back): every part is rewritten both times.
    // Then the national set under another label: every part rewritten (a new version), no tag
    // moved, so every part keeps its ready texts.
    const rows = await reprocessRows(dataDir, START_MS, END_MS, boundaryFolders(['two-city', 'national', 'national, relabelled']));
    results.push({ scenario: 'reprocess the year after publishing a boundary set (every part rewritten)', rows });
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

/** The read scenarios over a built archive. */
async function archiveReads(dir: string, dataDir: string, storeDir: string): Promise<void> {
  const serveEmbedded = () => startServer({ DATA_DIR: dataDir, RATE_LIMIT_READ_PER_MINUTE: '100000000' }, { role: 'serve', apiKey: API_KEY });
  if (ONLY.has('archive')) await archiveScenarios(serveEmbedded, path.join(dataDir, 'cache'), 'embedded');
  if (args['answers-only']) {
    if ((args.s3 || args['s3-shaped']) && ONLY.has('archive')) await s3Scenarios(dir, storeDir);
    return;
  }
  results.push({ scenario: 'stats (embedded; cold: a new process, every cache emptied)', rows: await statsScenario(serveEmbedded, path.join(dataDir, 'cache'), START_MS, DAYS) });
  const embedded = await serveEmbedded();
  results.push({ scenario: 'explorer page load (embedded)', rows: await pageScenario(embedded.url, START_MS, DAYS) });
  await embedded.stop();

  if ((args.s3 || args['s3-shaped']) && ONLY.has('archive')) await s3Scenarios(dir, storeDir);
}

/**
 * The archive answers again with the store on S3 (moto_server, which takes objects of any size):
 * as it is (`--s3`), and behind a proxy shaped as S3 is on the network (`--s3-shaped MS,MBPS`:
 * first-byte delay and bandwidth per connection), its cold pulls counting the bytes fetched from
 * the store.
 */
async function s3Scenarios(dir: string, storeDir: string): Promise<void> {
  // Without moto's own per-request costs, which S3 does not have and which take the service's
  // cores here (moto_lean.py).
  const emulator = await startMotoServer(await freePort(), { lean: true });
  try {
    const t = performance.now();
    const uploaded = await uploadStore(storeDir, emulator.endpoint, 'flood-bench');
    log(`uploaded ${uploaded} objects to moto in ${Math.round((performance.now() - t) / 1000)} s`);
    const s3Data = path.join(dir, 's3-data');
    const serveS3 = (endpoint: string) => () =>
      startServer(
        {
          DATA_DIR: s3Data,
          STORAGE_URL: 's3://flood-bench/',
          QUEUE_URL: emulator.queueUrl('flood-bench'),
          AWS_ENDPOINT_URL: endpoint,
          AWS_ACCESS_KEY_ID: 'test',
          AWS_SECRET_ACCESS_KEY: 'test',
          RATE_LIMIT_READ_PER_MINUTE: '100000000',
        },
        { role: 'serve', apiKey: API_KEY },
      );
    if (args.s3) await archiveScenarios(serveS3(emulator.endpoint), path.join(s3Data, 'cache'), 's3 on moto (cold: parts fetched from the store)');
    if (typeof args['s3-shaped'] === 'string') {
      const [firstByteMs, mbps] = args['s3-shaped'].split(',').map(Number) as [number, number];
      const proxy = await startShapedProxyProcess(emulator.endpoint, { firstByteMs, bytesPerSecond: mbps * 1e6 });
      try {
        await archiveScenarios(serveS3(proxy.url), path.join(s3Data, 'cache'), `s3 on moto, shaped: ${firstByteMs} ms to the first byte, ${mbps} MB/s a connection`, {
          downloaded: async () => (await proxy.counts()).bytesDown,
          cpuMs: () => emulator.cpuMs!(),
          proxyCpuMs: () => processCpuMs(proxy.pid),
        });
      } finally {
        await proxy.close();
      }
    }
  } finally {
    await emulator.stop();
  }
}

async function main(): Promise<void> {
  const kept = typeof args.data === 'string' ? path.resolve(args.data) : undefined;
  const dir = kept ?? (await fsp.mkdtemp(path.join(os.tmpdir(), 'flood-bench-')));
  const dataDir = path.join(dir, 'data');
  const storeDir = path.join(dataDir, 'store');
  await fsp.mkdir(storeDir, { recursive: true });
  if (ONLY.has('archive') || ONLY.has('stats')) await archiveBench(dir, dataDir, storeDir);
  if (ONLY.has('bulk')) {
    const bulk = { spread: QUICK ? 20_000 : Number(args.backfill), year: QUICK ? 100_000 : REPORTS, s3: QUICK ? 2_000 : Number(args['bulk-s3']), liveRate: 500, liveSeconds: QUICK ? 10 : 30, reprocessSets: boundaryFolders(['national', 'two-city', 'two-city, relabelled']) };
    results.push(...(await bulkScenario(bulk, log)));
  }
  if (ONLY.has('memory')) await memoryScenario(QUICK ? 20_000 : 100_000);
  if (ONLY.has('sync')) results.push(await syncScenario({ reports: QUICK ? 20_000 : 200_000, apiKey: API_KEY, ...(args.cli && { cli: String(args.cli) }) }, log));
  if (ONLY.has('national')) await nationalScenario();
  if (ONLY.has('national-year')) await nationalYearScenario();
  if (ONLY.has('ready-texts')) {
    const { twoCity, national } = await loadSets(SHARED_NATIONAL(root));
    const sets = [{ label: 'two-city', set: twoCity }, { label: 'national', set: national }];
    const rows = await readyCostRows({ days: QUICK ? 2 : 10, perDay: QUICK ? 2_000 : 7_000, runs: QUICK ? 1 : 3, sets }, log);
    results.push({ scenario: "ready texts: where a compacted day's build goes (µs a report, median of the runs)", rows });
  }
  if (ONLY.has('ingest')) {
    await ingestScenario(16, false);
    await ingestScenario(64, false);
    await ingestScenario(16, true);
    await ingestScenario(16, 'api-only');
  }
  if (ONLY.has('ingest-s3')) {
    const [firstByteMs, mbps] = String(args['s3-shaped'] ?? '30,100').split(',').map(Number) as [number, number];
    const shape = { firstByteMs, bytesPerSecond: mbps * 1e6 };
    results.push(await ingestOnShapedS3({ posts: QUICK ? 200 : 1_000, concurrencies: [1, 16], shape, apiKey: API_KEY, ...(args.cli && { cli: args.cli }) }, log));
  }

  for (const r of results) printTable(r.scenario, r.rows);
  const outDir = path.join(root, 'bench', 'results');
  await fsp.mkdir(outDir, { recursive: true });
  const file = path.join(outDir, `${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  await fsp.writeFile(
    file,
    JSON.stringify({ at: new Date().toISOString(), node: process.version, cpus: os.cpus().length, options: { REPORTS, DAYS, INGEST, s3: args.s3, hourly: args.hourly }, results }, null, 2),
  );
  process.stdout.write(`\nfigures written to ${path.relative(root, file)}\n`);
  if (!kept) await fsp.rm(dir, { recursive: true, force: true });
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
