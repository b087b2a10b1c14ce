// npm run bench:events [-- --reports 10000 --quick --backend embedded|aws|both]
// Events figures on the embedded backend and on AWS (S3 and SQS on fauxqs, in this process),
// against the compiled service started as `all`:
//  - latency from a POST's 201 to the report's webhook delivery and to its SSE event (p50/p95),
//    one subscriber and one stream, FLUSH_INTERVAL_SECONDS=1, partners posting at a steady pace;
//  - the cost of 10 webhook subscribers to ingest: accepted/s at concurrency 16 with none and with
//    ten, and how long after the last 201 every subscriber has every report.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fsp from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { CLI, startServer } from './server.js';
import { nameOfBareKey } from '../src/partners/apiKeys.js';

const args = parseArgs({ options: { reports: { type: 'string', default: '10000' }, quick: { type: 'boolean', default: false }, backend: { type: 'string', default: 'both' } } }).values;
if (!['embedded', 'aws', 'both'].includes(args.backend!)) throw new Error('--backend must be embedded, aws or both');
const REPORTS = args.quick ? 2000 : Number(args.reports);
const LATENCY_REPORTS = args.quick ? 300 : 1000;
const API_KEY = randomBytes(18).toString('base64url');
const SECRET = randomBytes(24).toString('hex');
const log = (m: string) => process.stderr.write(`${m}\n`);

function run(argv: string[], env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...argv], { env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'warn', AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true', ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${argv.join(' ')} exited ${code}`))));
  });
}

/** A loopback webhook receiver: the time each pkey first arrived. */
async function receiver(): Promise<{ url: string; seen: Map<string, number>; close(): void }> {
  const seen = new Map<string, number>();
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      const at = performance.now();
      for (const f of (JSON.parse(body) as { data: { features: { properties: { pkey: string } }[] } }).data.features) {
        if (!seen.has(f.properties.pkey)) seen.set(f.properties.pkey, at);
      }
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, seen, close: () => server.close() };
}

/** An SSE client: the time each pkey's event arrived. */
function streamClient(url: string): { seen: Map<string, number>; close(): void } {
  const seen = new Map<string, number>();
  const req = http.get(`${url}/reports/stream`, (res) => {
    let buffer = '';
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      const at = performance.now();
      buffer += chunk;
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = block.split('\n').find((l) => l.startsWith('data: '));
        if (data) seen.set((JSON.parse(data.slice(6)) as { properties: { pkey: string } }).properties.pkey, at);
      }
    });
  });
  req.on('error', () => undefined);
  return { seen, close: () => req.destroy() };
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
function post(url: string, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}/feeds/partner`, { method: 'POST', agent, headers: { 'Content-Type': 'application/json', 'X-Api-Key': API_KEY, 'Content-Length': Buffer.byteLength(body) } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(body);
  });
}

function body(i: number): string {
  return JSON.stringify({
    post_id: 1_000_000 + i,
    created_at: new Date(Date.now() - 60_000).toISOString(),
    partner_city: 'Quezon City',
    disaster_type: 'flood',
    location: { lat: 14.6516, lng: 121.0497 },
    title: 'Baha sa kalsada',
    text: 'Hanggang tuhod ang tubig.',
  });
}

function pct(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

async function until(check: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

type Backend = 'embedded' | 'aws';

/** fauxqs in this process, started on first use: S3 and SQS for the AWS runs. */
let fauxqs: { port: number; stop(): Promise<void> } | undefined;

async function backendEnv(backend: Backend): Promise<Record<string, string>> {
  if (backend === 'embedded') return {};
  if (!fauxqs) fauxqs = await (await import('fauxqs')).startFauxqs({ port: 0, logger: false });
  const id = randomBytes(4).toString('hex');
  return {
    STORAGE_URL: `s3://bench-events-${id}/flood`,
    QUEUE_URL: `http://sqs.us-east-1.localhost:${fauxqs.port}/000000000000/bench-events-${id}`,
    AWS_ENDPOINT_URL: `http://127.0.0.1:${fauxqs.port}`,
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'bench',
    AWS_SECRET_ACCESS_KEY: 'bench',
  };
}

async function setup(backend: Backend, subscribers: number, flushSeconds: number) {
  const dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'flood-bench-events-'));
  const env = { DATA_DIR: dataDir, FLUSH_INTERVAL_SECONDS: String(flushSeconds), WEBHOOK_ALLOW_HOSTS: '127.0.0.1', RATE_LIMIT_FEED_PER_MINUTE: '100000000', RATE_LIMIT_READ_PER_MINUTE: '100000000', ...(await backendEnv(backend)) };
  if (backend === 'aws') await run(['bootstrap'], env);
  const hooks = await Promise.all(Array.from({ length: subscribers }, () => receiver()));
  for (const h of hooks) await run(['subscriptions', 'add', '--url', h.url, '--secret', SECRET], env);
  const server = await startServer(env, { apiKey: API_KEY });
  return {
    server,
    hooks,
    async stop() {
      await server.stop();
      for (const h of hooks) h.close();
      await fsp.rm(dataDir, { recursive: true, force: true });
    },
  };
}

async function latency(backend: Backend): Promise<Record<string, number>> {
  const { server, hooks, stop } = await setup(backend, 1, 1);
  const stream = streamClient(server.url);
  await new Promise((r) => setTimeout(r, 300));
  const accepted = new Map<string, number>();
  // A steady pace (about 100 a second, 4 partners), as reports arrive in a flood, not a bulk load.
  await Promise.all(
    Array.from({ length: 4 }, async (_, c) => {
      for (let i = c; i < LATENCY_REPORTS; i += 4) {
        let status = await post(server.url, body(i));
        for (let retry = 0; status === 503 && retry < 20; retry++) status = await post(server.url, body(i));
        if (status !== 201) throw new Error(`POST answered ${status}`);
        accepted.set(`partner-${nameOfBareKey(API_KEY)}-${1_000_000 + i}`, performance.now());
        await new Promise((r) => setTimeout(r, 40));
      }
    }),
  );
  await until(() => hooks[0]!.seen.size === LATENCY_REPORTS && stream.seen.size === LATENCY_REPORTS, 120_000, 'every report delivered');
  const hook = [...accepted].map(([k, t]) => hooks[0]!.seen.get(k)! - t);
  const sse = [...accepted].map(([k, t]) => stream.seen.get(k)! - t);
  stream.close();
  await stop();
  return {
    reports: LATENCY_REPORTS,
    'flush interval s': 1,
    'webhook p50 ms': Math.round(pct(hook, 50)),
    'webhook p95 ms': Math.round(pct(hook, 95)),
    'SSE p50 ms': Math.round(pct(sse, 50)),
    'SSE p95 ms': Math.round(pct(sse, 95)),
  };
}

async function ingest(backend: Backend, subscribers: number): Promise<Record<string, number>> {
  const { server, hooks, stop } = await setup(backend, subscribers, 5);
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      for (;;) {
        const i = next++;
        if (i >= REPORTS) return;
        // A 503 (the accept deadline passed on a busy store) accepted nothing: post again, as partners do.
        let status = await post(server.url, body(i));
        for (let retry = 0; status === 503 && retry < 20; retry++) status = await post(server.url, body(i));
        if (status !== 201 && status !== 200) throw new Error(`POST answered ${status}`);
      }
    }),
  );
  const posted = performance.now();
  await until(() => hooks.every((h) => h.seen.size === REPORTS), 600_000, 'every subscriber to have every report');
  const delivered = performance.now();
  await stop();
  return {
    subscribers,
    reports: REPORTS,
    'accepted/s': Math.round(REPORTS / ((posted - t0) / 1000)),
    'all delivered s after last 201': subscribers === 0 ? 0 : Math.round((delivered - posted) / 100) / 10,
  };
}

const results: Record<string, unknown> = {};
for (const backend of (args.backend === 'both' ? ['embedded', 'aws'] : [args.backend]) as Backend[]) {
  log(`${backend}: latency, ${LATENCY_REPORTS} reports`);
  const lat = await latency(backend);
  log(`${backend}: ingest, ${REPORTS} reports, 0 then 10 subscribers`);
  const none = await ingest(backend, 0);
  const ten = await ingest(backend, 10);
  results[backend] = { latency: lat, ingest: [none, ten] };
}
await fauxqs?.stop();
process.stdout.write(`${JSON.stringify({ machine: `${os.cpus().length} cores (shared)`, ...results }, null, 2)}\n`);
