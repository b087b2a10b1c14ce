// npm run bench:faults: the service under two faults, measured over HTTP against the real
// entry point with its default settings (nothing here is asserted; the fault suite in
// test/faults/ asserts the behaviour).
//   1. S3 and SQS (the in-process emulator behind a relay) go silent for 30 s: how long posts
//      and /ready take to answer and what they answer, then how soon posts are accepted again.
//   2. A slowloris of 200 connections (100 sending headers, 100 a feed body, a byte a second):
//      how long the server lets each hold its connection, and what a normal client sees meanwhile.
//   3. Mixed load: a year of reports in the archive, posts at 500 a second while four clients pull
//      the whole year again and again: post latency and answers, open descriptors and RSS.
//   4. A kill -9 with 20,000 reports waiting: how soon the restarted service answers and accepts,
//      and how soon all of them are in the archive.
//   5. Scale-out (bench/scaleOut.ts, on moto_server): three APIs, three workers and two
//      schedulers on one bucket and queue, APIs and workers killed at random while 20,000 reports
//      are posted: what was acknowledged and archived, duplicates, kills, time to converge.
//   6. Churn (bench/churn.ts): posts, retractions and reads of every format (hanging up at random)
//      while the boundaries are published by turns, the window re-tagged after each and compacted:
//      answers cut short, and whether every acknowledged report is answered once with the last tags.
//   7. Readiness under reads (bench/readyUnderReads.ts): six clients keep the thread pool busy with
//      counts and stats of 60 days posted late (thousands of small parts) while /ready is probed,
//      with Node's default thread pool and the service's.
// npm run bench:faults [-- --quick --only stall,slowloris,mixed,crash,scaleout,churn,ready]
import { execFile, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import fsp from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { CLI, cliJson, freePort, startServer, type Server } from './server.js';
import { startMotoServer } from './moto.js';
import { scaleOutRun } from './scaleOut.js';
import { churnRun } from './churn.js';
import { readyUnderReads } from './readyUnderReads.js';
import { defaultBoundaries } from '../src/boundaries/defaultBoundaries.js';
import { buildBenchStore } from './synthetic.js';

const API_KEY = 'bench-key-0123456789abcdef';
const { values: args } = parseArgs({ options: { quick: { type: 'boolean', default: false }, only: { type: 'string', default: 'stall,slowloris,mixed,crash,scaleout,churn,ready' } } });
const QUICK = args.quick === true;
const ONLY = new Set(String(args.only).split(','));
const runs = (name: string) => ONLY.has(name);
const OUTAGE_S = QUICK ? 10 : 30;
const LORIS_S = QUICK ? 20 : 60;
const YEAR_REPORTS = QUICK ? 100_000 : 1_000_000;
const MIXED_S = QUICK ? 10 : 30;
const PENDING = QUICK ? 5_000 : 20_000;
/**
 * 20,000, on moto without its own listing, dispatch, queue-scan and connection costs
 * (bench/moto_lean.py): on moto as it is, posting fell from 14 a second to 2–4 past
 * 9,500–15,000 reports.
 */
const SCALE_OUT_REPORTS = QUICK ? 1_000 : 20_000;
/**
 * A kill every 0.5–2 s (the test suite's pace) or, at the larger size, every 2–8 s: at the faster
 * pace here, workers rarely live long enough to finish a flush, the backlog grows with every
 * report posted, and moto's queue slows with it.
 */
const SCALE_OUT_KILL_EVERY_MS = QUICK ? 500 : 2_000;
const CHURN_S = QUICK ? 60 : 240;
/** Late reports posted before the readers start: thousands of small parts. */
const READY_REPORTS = QUICK ? 6_000 : 24_000;
/** Parts retired 5 s after their successors (30 s by default): a run of minutes then sees as many retirements reach slow reads as a day of jobs would. */
const CHURN_GRACE_S = 5;

/** A relay in front of the emulator that can go silent: it accepts and never answers. */
async function relay(targetPort: number): Promise<{ port: number; stall(): void; resume(): void; close(): void }> {
  let stalled = false;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => client.destroy());
    if (stalled) return;
    const upstream = net.connect(targetPort, '127.0.0.1');
    sockets.add(upstream);
    upstream.on('error', () => upstream.destroy());
    upstream.on('close', () => (stalled ? undefined : client.destroy()));
    client.on('data', (d) => (stalled ? undefined : upstream.write(d)));
    upstream.on('data', (d) => (stalled ? undefined : client.write(d)));
    client.on('close', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    stall: () => void (stalled = true),
    resume: () => void (stalled = false),
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

async function timed(url: string, init: RequestInit = {}): Promise<{ status: number | string; ms: number }> {
  const t = performance.now();
  try {
    const res = await fetch(url, { ...init, signal: AbortSignal.timeout(60_000) });
    await res.arrayBuffer();
    return { status: res.status, ms: performance.now() - t };
  } catch (err) {
    return { status: (err as Error).name, ms: performance.now() - t };
  }
}

let postId = 1;
function post(url: string): Promise<{ status: number | string; ms: number }> {
  const body = JSON.stringify({ post_id: postId++, created_at: new Date().toISOString(), partner_city: 'Quezon City', disaster_type: 'flood', location: { lat: 14.65, lng: 121.05 } });
  return timed(`${url}/feeds/partner`, { method: 'POST', headers: { 'X-Api-Key': API_KEY, 'Content-Type': 'application/json' }, body });
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
const r1 = (n: number) => Math.round(n * 10) / 10;
const statuses = (xs: { status: number | string }[]) =>
  Object.entries(xs.reduce<Record<string, number>>((m, x) => ((m[String(x.status)] = (m[String(x.status)] ?? 0) + 1), m), {}))
    .map(([s, n]) => `${s}×${n}`)
    .join(' ');

async function stalledEndpoint(): Promise<void> {
  const { startFauxqs } = await import('fauxqs');
  const emulator = await startFauxqs({ port: 0, logger: false });
  const gate = await relay(emulator.port);
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'flood-faults-'));
  const env = {
    DATA_DIR: dir,
    STORAGE_URL: 's3://flood-faults/',
    QUEUE_URL: `http://sqs.us-east-1.localhost:${emulator.port}/000000000000/flood-faults`,
    AWS_ENDPOINT_URL: `http://127.0.0.1:${emulator.port}`,
    AWS_ACCESS_KEY_ID: 'bench',
    AWS_SECRET_ACCESS_KEY: 'bench',
  };
  // Bucket and queue created straight on the emulator (it names a queue after the host it was created through).
  await new Promise<void>((resolve, reject) =>
    spawn(process.execPath, [CLI, 'bootstrap'], { env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'error', AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true', ...env }, stdio: 'ignore' }).on('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`bootstrap exited with ${code}`)),
    ),
  );
  const server = await startServer({ ...env, AWS_ENDPOINT_URL: `http://127.0.0.1:${gate.port}` }, { role: 'serve', apiKey: API_KEY, logLevel: 'error' });
  const healthy = await Promise.all(Array.from({ length: 10 }, () => post(server.url)));
  gate.stall();
  const posts: { status: number | string; ms: number }[] = [];
  const readies: { status: number | string; ms: number }[] = [];
  const until = Date.now() + OUTAGE_S * 1000;
  const pending: Promise<void>[] = [];
  while (Date.now() < until) {
    // Five posts and one /ready a second, each waited for in its own right.
    for (let i = 0; i < 5; i += 1) pending.push(post(server.url).then((r) => void posts.push(r)));
    pending.push(timed(`${server.url}/ready`).then((r) => void readies.push(r)));
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  await Promise.all(pending);
  gate.resume();
  const t = performance.now();
  let back: { status: number | string; ms: number } | undefined;
  while (performance.now() - t < 60_000) {
    back = await post(server.url);
    if (back.status === 201) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const recoveredMs = performance.now() - t;
  await server.stop();
  gate.close();
  await emulator.stop();
  console.log(`\nS3 and SQS silent for ${OUTAGE_S} s (defaults: ACCEPT_DEADLINE_SECONDS=2, AWS_CONNECT_TIMEOUT_SECONDS=1, AWS_REQUEST_TIMEOUT_SECONDS=5)`);
  console.log(`  before: ${healthy.length} posts ${statuses(healthy)}, p50 ${r1(pct(healthy.map((x) => x.ms), 50))} ms`);
  for (const [name, xs] of [['posts', posts], ['/ready', readies]] as const) {
    const ms = xs.map((x) => x.ms);
    console.log(`  during: ${xs.length} ${name}: ${statuses(xs)}; answered in p50 ${r1(pct(ms, 50))} ms, p99 ${r1(pct(ms, 99))} ms, max ${r1(Math.max(...ms))} ms`);
  }
  console.log(`  after: first post accepted (${String(back?.status)}) ${r1(recoveredMs)} ms after the endpoint answered again`);
}

/** A connection that sends `head`, then a byte a second; resolves with how long it stayed open and the status the server sent. */
function slowConnection(port: number, head: string, drip: string): Promise<{ heldS: number; status: number }> {
  return new Promise((resolve) => {
    const t = performance.now();
    const socket = net.connect(port, '127.0.0.1');
    let received = '';
    socket.on('error', () => undefined);
    socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
    socket.on('connect', () => socket.write(head));
    const timer = setInterval(() => socket.destroyed || socket.write(drip), 1000);
    const giveUp = setTimeout(() => socket.destroy(), LORIS_S * 1000 * 10);
    socket.on('close', () => {
      clearInterval(timer);
      clearTimeout(giveUp);
      resolve({ heldS: (performance.now() - t) / 1000, status: Number(/^HTTP\/1\.1 (\d{3})/.exec(received)?.[1] ?? 0) });
    });
  });
}

async function slowloris(): Promise<void> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'flood-faults-'));
  const server = await startServer({ DATA_DIR: dir }, { role: 'serve', apiKey: API_KEY, logLevel: 'error' });
  const port = Number(new URL(server.url).port);
  const headers = Array.from({ length: 100 }, () => slowConnection(port, 'GET /cities HTTP/1.1\r\nHost: x\r\n', 'X'));
  const bodies = Array.from({ length: 100 }, () =>
    slowConnection(port, `POST /feeds/partner HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${API_KEY}\r\nContent-Type: application/json\r\nContent-Length: 65536\r\n\r\n{`, ' '),
  );
  const normal: { status: number | string; ms: number }[] = [];
  const until = Date.now() + LORIS_S * 1000;
  while (Date.now() < until) {
    normal.push(await post(server.url));
    normal.push(await timed(`${server.url}/health`));
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const [h, b] = await Promise.all([Promise.all(headers), Promise.all(bodies)]);
  await server.stop();
  console.log(`\nSlowloris: 200 connections, a byte a second, for ${LORIS_S} s (defaults: HTTP_HEADERS_TIMEOUT_SECONDS=10, HTTP_REQUEST_TIMEOUT_SECONDS=30)`);
  for (const [name, xs] of [['slow headers', h], ['slow 64 KiB bodies', b]] as const) {
    const held = xs.map((x) => x.heldS);
    console.log(`  ${name}: 100 connections held min ${r1(Math.min(...held))} s, p50 ${r1(pct(held, 50))} s, max ${r1(Math.max(...held))} s; answered ${statuses(xs)}`);
  }
  const ms = normal.map((x) => x.ms);
  console.log(`  a normal client meanwhile: ${normal.length} requests ${statuses(normal)}, p50 ${r1(pct(ms, 50))} ms, p99 ${r1(pct(ms, 99))} ms`);
}

/** Open descriptors and resident memory of a process, sampled until stopped: the maxima. */
function sampler(pid: number): { stop(): { fds: number; rssMb: number } } {
  let fds = 0;
  let rssMb = 0;
  const sample = () => {
    try {
      fds = Math.max(fds, readdirSync(`/proc/${pid}/fd`).length);
      rssMb = Math.max(rssMb, Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024);
    } catch {
      // The process is gone.
    }
  };
  const timer = setInterval(sample, 200);
  sample();
  return {
    stop: () => {
      clearInterval(timer);
      sample();
      return { fds, rssMb: Math.round(rssMb) };
    },
  };
}

/**
 * The whole year as GeoJSON, pulled by curl as a researcher would (compressed), in a process of
 * its own so that the client's work does not slow the posting client: its time and size.
 */
function pullYear(url: string, startMs: number): Promise<{ status: number | string; ms: number; bytes: number }> {
  const q = new URLSearchParams({ start: new Date(startMs).toISOString(), end: new Date(startMs + 365 * 86_400_000 - 1).toISOString(), format: 'geojson' });
  return new Promise((resolve) => {
    execFile('curl', ['-s', '-o', '/dev/null', '--compressed', '-A', 'flood-bench/1.0', '-w', '%{http_code} %{time_total} %{size_download}', `${url}/reports/archive?${q}`], (err, stdout) => {
      const [status, seconds, bytes] = stdout.trim().split(' ');
      resolve({ status: err ? `curl ${err.code}` : Number(status), ms: Number(seconds) * 1000, bytes: Number(bytes) });
    });
  });
}

/** Posts over kept-alive connections (node:http): the posting client stays light beside the pulls. */
const postAgent = new http.Agent({ keepAlive: true, maxSockets: 256 });
function lightPost(url: string): Promise<{ status: number | string; ms: number }> {
  const body = JSON.stringify({ post_id: postId++, created_at: new Date().toISOString(), partner_city: 'Quezon City', disaster_type: 'flood', location: { lat: 14.65, lng: 121.05 } });
  const t = performance.now();
  return new Promise((resolve) => {
    const req = http.request(`${url}/feeds/partner`, { method: 'POST', agent: postAgent, timeout: 60_000, headers: { 'X-Api-Key': API_KEY, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - t }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err) => resolve({ status: (err as NodeJS.ErrnoException).code ?? err.message, ms: performance.now() - t }));
    req.end(body);
  });
}

async function mixedLoad(): Promise<void> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'flood-faults-'));
  const startMs = Date.UTC(2025, 0, 1);
  const boundaries = await defaultBoundaries();
  await buildBenchStore({ storeDir: path.join(dir, 'store'), reports: YEAR_REPORTS, startMs, days: 365, boundaries });
  // Closed days compacted, as the scheduler's nightly job leaves them.
  await cliJson(['compact', '--from', '2025-01-01', '--to', '2025-12-31'], { DATA_DIR: dir });
  const server = await startServer({ DATA_DIR: dir, RATE_LIMIT_READ_PER_MINUTE: '100000', RATE_LIMIT_FEED_PER_MINUTE: '1000000' }, { role: 'all', apiKey: API_KEY, logLevel: 'error' });
  try {
    const idle = sampler(server.pid).stop();
    let watch = sampler(server.pid);
    const alone = await pullYear(server.url, startMs);
    const afterOne = watch.stop();
    watch = sampler(server.pid);
    const until = Date.now() + MIXED_S * 1000;
    const pulls: Awaited<ReturnType<typeof pullYear>>[] = [];
    const pullers = Array.from({ length: 4 }, async () => {
      while (Date.now() < until) pulls.push(await pullYear(server.url, startMs));
    });
    // Open loop: a post every 2 ms whatever the answers do, as 500 partners' posts would arrive.
    const posts: Promise<{ status: number | string; ms: number }>[] = [];
    const t0 = performance.now();
    for (let i = 0; Date.now() < until; i += 1) {
      posts.push(lightPost(server.url));
      const ahead = t0 + (i + 1) * 2 - performance.now();
      if (ahead > 0) await new Promise((resolve) => setTimeout(resolve, ahead));
    }
    const answered = await Promise.all(posts);
    await Promise.all(pullers);
    const peak = watch.stop();
    const ms = answered.map((x) => x.ms);
    console.log(`\nMixed load on \`all\` (${YEAR_REPORTS.toLocaleString()} reports over a year, compacted; defaults)`);
    console.log(`  idle: ${idle.fds} open descriptors, RSS ${idle.rssMb} MB`);
    console.log(`  one year pull alone (curl --compressed): ${r1(alone.ms / 1000)} s, ${Math.round(alone.bytes / 1e6)} MB compressed (${String(alone.status)}); peak ${afterOne.fds} descriptors, RSS ${afterOne.rssMb} MB`);
    console.log(
      `  ${MIXED_S} s of ${Math.round(answered.length / MIXED_S)} posts/s offered with 4 clients pulling the year: posts ${statuses(answered)}, p50 ${r1(pct(ms, 50))} ms, p99 ${r1(pct(ms, 99))} ms, max ${r1(Math.max(...ms))} ms`,
    );
    console.log(`  year pulls meanwhile: ${pulls.length} ${statuses(pulls)}, p50 ${r1(pct(pulls.map((p) => p.ms), 50) / 1000)} s; peak ${peak.fds} open descriptors, RSS ${peak.rssMb} MB`);
  } finally {
    await server.stop();
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

/** Polls until `ready` resolves true; the time it took in ms. */
async function timeUntil(ready: () => Promise<boolean>, limitMs = 600_000): Promise<number> {
  const t = performance.now();
  while (performance.now() - t < limitMs) {
    if (await ready().catch(() => false)) return performance.now() - t;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return NaN;
}

async function crashWithBacklog(): Promise<void> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'flood-faults-'));
  // Yesterday's reports: a closed day, counted once they are archived.
  const dayMs = Math.floor(Date.now() / 86_400_000) * 86_400_000 - 86_400_000;
  const env = { DATA_DIR: dir };
  let server: Server | undefined = await startServer(env, { role: 'serve', apiKey: API_KEY, logLevel: 'error' });
  try {
    let next = 0;
    const body = (i: number) =>
      JSON.stringify({ post_id: 5_000_000 + i, created_at: new Date(dayMs + (i * 86_400_000) / PENDING).toISOString(), partner_city: 'Quezon City', disaster_type: 'flood', location: { lat: 14.65, lng: 121.05 } });
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        for (let i = next++; i < PENDING; i = next++) {
          const res = await fetch(`${server!.url}/feeds/partner`, { method: 'POST', headers: { 'X-Api-Key': API_KEY, 'Content-Type': 'application/json' }, body: body(i) });
          if (res.status !== 201) throw new Error(`post answered ${res.status}`);
          await res.arrayBuffer();
        }
      }),
    );
    process.kill(server.pid, 'SIGKILL');
    server = undefined;
    const t = performance.now();
    server = await startServer(env, { role: 'all', apiKey: API_KEY, logLevel: 'error' });
    const listening = performance.now() - t;
    const url = server.url;
    const accepted = listening + (await timeUntil(async () => (await post(url)).status === 201));
    const ready = listening + (await timeUntil(async () => (await fetch(`${url}/ready`)).status === 200));
    const q = new URLSearchParams({ start: new Date(dayMs).toISOString(), end: new Date(dayMs + 86_400_000 - 1).toISOString() });
    const archived = await timeUntil(async () => {
      const res = await fetch(`${url}/reports/archive/count?${q}`, { headers: { 'User-Agent': 'flood-bench/1.0' } });
      return ((await res.json()) as { result?: { count?: number } }).result?.count === PENDING;
    });
    console.log(`\nkill -9 of \`serve\` with ${PENDING.toLocaleString()} reports waiting, then \`all\` started on the same DATA_DIR`);
    console.log(`  listening after ${r1(listening)} ms; first post accepted after ${r1(accepted)} ms; /ready 200 after ${r1(ready)} ms`);
    console.log(`  all ${PENDING.toLocaleString()} in the archive ${r1((listening + archived) / 1000)} s after the restart (${Math.round(PENDING / ((listening + archived) / 1000))} reports/s)`);
  } finally {
    await server?.stop();
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

/** The scale-out run at the benchmark's size, its figures printed. */
async function scaleOut(): Promise<void> {
  const moto = await startMotoServer(await freePort(), { lean: true });
  try {
    const day = Date.UTC(2026, 10, 19);
    const reportOf = (n: number, title: string) => ({ post_id: n, created_at: new Date(day + (n % 24) * 3_600_000 + (n % 60) * 1000).toISOString(), partner_city: 'Quezon City', disaster_type: 'flood', location: { lat: 14.6516, lng: 121.0497 }, title });
    const run = await scaleOutRun(moto, { reports: SCALE_OUT_REPORTS, minKills: 20, killEveryMs: SCALE_OUT_KILL_EVERY_MS, apis: 3, workers: 3, apiKey: API_KEY, reportOf });
    const firstVersions = [...run.answers.ndjson].filter(([pkey, titles]) => titles.length === 1 && titles[0] === `first ${pkey.split('-').at(-1)}`).length;
    console.log(`\nscale-out on moto: 3 APIs, 3 workers, 2 schedulers; an API or worker killed every ${SCALE_OUT_KILL_EVERY_MS / 1000}–${(4 * SCALE_OUT_KILL_EVERY_MS) / 1000} s`);
    console.log(`  posted ${run.ids.length.toLocaleString()}, acknowledged ${run.acked.size.toLocaleString()}, archived ${run.answers.ndjson.size.toLocaleString()} (${firstVersions.toLocaleString()} once with their first version)`);
    console.log(`  duplicates in answers: ${[...run.answers.ndjson.values()].filter((t) => t.length > 1).length}; stored copies before compaction: ${[...run.storedBefore.values()].reduce((a, b) => a + b, 0).toLocaleString()}, after: ${[...run.storedAfter.values()].reduce((a, b) => a + b, 0).toLocaleString()}`);
    console.log(`  dead-lettered messages at the end: ${run.deadLettered}`);
    console.log(`  kills: ${run.kills}; converged ${r1(run.convergedSeconds)} s after the last kill; ${r1(run.seconds)} s in all`);
    console.log(`  verify: exit ${run.verify.code}; reconciliation ticks ${run.ticks}, run ${run.ran}, skipped ${run.skipped} (ticks run twice ${run.tickRuns.twice.length}, neither run nor skipped ${run.tickRuns.neither.length}, runs of no tick ${run.tickRuns.withoutTick.length}); unreadable objects: ${run.broken.length}`);
  } finally {
    await moto.stop();
  }
}

/** Counts by key, as `key ×n`, keys in order. */
const tally = (counts: Record<string, number>) => Object.entries(counts).sort().map(([k, n]) => `${k} ×${n.toLocaleString()}`).join(', ');

/** The churn run, its figures printed. */
async function churn(): Promise<void> {
  const run = await churnRun({ root: path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..'), seconds: CHURN_S, graceSeconds: CHURN_GRACE_S });
  console.log(`\nchurn: ${CHURN_S} s of posts, retractions and reads while the boundaries flip and the window is re-tagged (parts retired ${CHURN_GRACE_S} s after their successors)`);
  console.log(`  reports created ${run.created.toLocaleString()}, repeats ${run.repeats.toLocaleString()}, retracted ${run.retracted.toLocaleString()}; posts: ${tally(run.posts)}`);
  console.log(`  reads: ${tally(run.reads)}`);
  console.log(`  /ready twice a second: ${tally(run.ready)}, the slowest ${Math.round(run.slowestReadyMs)} ms`);
  console.log(`  publishes ${run.publishes} (each followed by a reprocess of the window), compactions ${run.compactions}; jobs failed: ${run.jobFailures.length}${run.jobFailures.map((f) => `\n    ${f}`).join('')}`);
  console.log(`  the archive after: ${run.answered.toLocaleString()} answered (${(run.created - run.retracted).toLocaleString()} expected), duplicates ${run.duplicates}, missing ${run.missing}, retracted answered ${run.retractedAnswered}, tags not the last boundaries' ${run.staleTags}; verify ${run.verifyOk ? 'ok' : 'FAILED'}`);
  console.log(`  the service's errors: ${run.serverErrors.length}${run.serverErrors.slice(0, 10).map((e) => `\n    ${e}`).join('')}; ${r1(run.seconds)} s in all`);
}

/** Readiness under DuckDB-heavy reads, with both pools, printed. */
async function ready(): Promise<void> {
  const { parts, runs } = await readyUnderReads({ reports: READY_REPORTS, seconds: MIXED_S * 2 });
  console.log(`\n/ready under reads: ${READY_REPORTS.toLocaleString()} reports of the last 60 days posted late, in ${parts.toLocaleString()} parts, six clients asking for their counts and stats for ${MIXED_S * 2} s`);
  for (const run of runs) {
    console.log(`  thread pool ${run.pool}: /ready ${tally(run.ready)}, the slowest ${Math.round(run.slowestReadyMs)} ms; reads ${tally(run.reads)}, median ${Math.round(run.readMedianMs)} ms`);
  }
}

async function main(): Promise<void> {
  console.log(`${os.cpus().length} CPUs, Node ${process.version}`);
  if (runs('stall')) await stalledEndpoint();
  if (runs('slowloris')) await slowloris();
  if (runs('mixed')) await mixedLoad();
  if (runs('crash')) await crashWithBacklog();
  if (runs('scaleout')) await scaleOut();
  if (runs('churn')) await churn();
  if (runs('ready')) await ready();
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
