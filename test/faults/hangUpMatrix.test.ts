// Clients that hang up, on every answer shape, with every encoding, at every moment, on both
// read paths (ready texts of compacted hours; the query engine over an open hour of several
// parts, a cut day, a sync), against the real process `npm start` runs (API and worker): the
// process stays up, /health answers, and its descriptors and temporary files return to idle.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildBenchStore } from '../../bench/synthetic.js';
import { defaultBoundaries } from '../../src/boundaries/defaultBoundaries.js';
import { CLI, runCli } from '../support/cli.js';
import { eventually, postReport, report, tempDir } from '../support/env.js';

const KEY = 'hangup-key-0123456789abcdef';
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const now = Date.now();
const today = Math.floor(now / DAY) * DAY;
/** Three closed days (2–4 days ago), compacted: answered from their ready texts. */
const CLOSED_FROM = today - 4 * DAY;
const iso = (ms: number) => encodeURIComponent(new Date(ms).toISOString().replace(/\.\d+Z$/, '+0000'));
const openHour = Math.floor(now / HOUR) * HOUR;

const WINDOWS: Record<string, [number, number]> = {
  /** Whole compacted days: stored texts, copied. */
  stored: [CLOSED_FROM, CLOSED_FROM + 3 * DAY - 1000],
  /** The same days cut mid-hour: the query engine reads the cut hours. */
  cut: [CLOSED_FROM + 5.5 * HOUR, CLOSED_FROM + 2 * DAY + 7.25 * HOUR],
  /** The open hours, each in several parts: the query engine de-duplicates them. */
  open: [openHour - HOUR, openHour + 2 * HOUR - 1000],
};
const win = (name: string) => `start=${iso(WINDOWS[name]![0])}&end=${iso(WINDOWS[name]![1])}`;
const interval = (name: string) => WINDOWS[name]!.map((ms) => new Date(ms).toISOString()).join('/');

const ARCHIVE_FORMATS = ['geoformat=topojson', 'geoformat=geojson', 'format=geojson', 'format=topojson', 'format=csv', 'format=ndjson', 'format=parquet', 'format=arrow'];
const SHAPES: Record<string, string> = {};
for (const name of Object.keys(WINDOWS)) {
  for (const f of ARCHIVE_FORMATS) SHAPES[`archive ${f} (${name})`] = `/reports/archive?${win(name)}&${f}`;
  SHAPES[`archive paged (${name})`] = `/reports/archive?${win(name)}&format=geojson&limit=700`;
  SHAPES[`stats (${name})`] = `/reports/archive/stats?${win(name)}&interval=hour&by=local_area`;
  SHAPES[`count (${name})`] = `/reports/archive/count?${win(name)}`;
  SHAPES[`ogc items (${name})`] = `/ogc/collections/reports/items?datetime=${interval(name)}&limit=2000`;
}
SHAPES['sync (open)'] = `/reports/archive?updated_after=${iso(now - HOUR)}&format=ndjson`;
SHAPES['sync paged (open)'] = `/reports/archive?updated_after=${iso(now - HOUR)}&format=geojson&limit=300`;
SHAPES['cities'] = '/cities';
SHAPES['local areas'] = '/cities/PH-QC/local-areas';
SHAPES['outlines'] = '/cities/outlines';
/** Last year: closed, so it can be released (its files sent from disk, with ranges). */
const RELEASED = new Date(now).getUTCFullYear() - 1;
SHAPES['releases'] = '/releases';
SHAPES['release catalogue'] = '/releases/catalog.json';
SHAPES['release file'] = `/releases/${RELEASED}-r1/reports-${RELEASED}-01.parquet`;
SHAPES['ogc barangays'] = '/ogc/collections/local-areas/items?limit=1000';
SHAPES['cap'] = '/reports/cap.atom';
SHAPES['ogc api'] = '/ogc/api';
SHAPES['stream'] = '/reports/stream';
/** Static files, compressed once and then sent from memory. */
SHAPES['docs bundle'] = '/docs/swagger-ui-bundle.js';
SHAPES['explorer library'] = '/explorer/vendor/leaflet/leaflet-src.js';

const ENCODINGS = ['identity', 'gzip', 'br'] as const;
const MOMENTS = ['after the headers', 'after the first chunk', 'mid-stream'] as const;
type Moment = (typeof MOMENTS)[number];

let dataDir: string;
let child: ChildProcess;
let output = '';
let url: string;
let exited: Promise<number | null>;

async function waitFor(pattern: RegExp, ms = 30_000): Promise<RegExpMatchArray> {
  const deadline = Date.now() + ms;
  for (;;) {
    const m = pattern.exec(output);
    if (m) return m;
    if (Date.now() > deadline) throw new Error(`no ${pattern} in output:\n${output}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

beforeAll(async () => {
  dataDir = await tempDir('flood-hangup-');
  const boundaries = await defaultBoundaries();
  await buildBenchStore({ storeDir: path.join(dataDir, 'store'), reports: 9_000, startMs: CLOSED_FROM, days: 3, boundaries });
  const env = { DATA_DIR: dataDir, API_KEYS: `hangup:${KEY}` };
  // Last January's reports, for the release (a period with none is not released).
  const january = path.join(dataDir, 'january.ndjson');
  const janFirst = Date.UTC(RELEASED, 0, 5);
  await fs.writeFile(january, Array.from({ length: 300 }, (_, i) => JSON.stringify(report(900_000 + i, { created_at: new Date(janFirst + i * 600_000).toISOString() }))).join('\n'));
  const imported = await runCli(['import', '--file', january, '--json'], env);
  expect(imported.code, imported.stderr).toBe(0);
  const compacted = await runCli(['compact', '--json'], { ...env, RETIRE_GRACE_SECONDS: '0' });
  expect(compacted.code, compacted.stderr).toBe(0);
  const released = await runCli(['release', '--period', String(RELEASED), '--json'], env);
  expect(released.code, released.stderr).toBe(0);

  // A group of six may be all streams, from one address: above the default per-address cap of
  // four (tested in stream.test.ts), which would answer some of them 429 instead of streaming.
  child = spawn(process.execPath, [CLI, 'all'], {
    env: { PATH: process.env.PATH ?? '', TZ: 'UTC', LOG_LEVEL: 'info', ...env, PORT: '0', FLUSH_INTERVAL_SECONDS: '0.3', RATE_LIMIT_READ_PER_MINUTE: '1000000', STREAM_MAX_CLIENTS_PER_ADDRESS: '16' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  url = (await waitFor(/listening on (http:\/\/\S+)/))[1]!;

  // The open hour in several parts: five batches, each flushed before the next.
  for (let batch = 0; batch < 5; batch++) {
    const posts = Array.from({ length: 80 }, (_, i) =>
      postReport(url, report(batch * 1000 + i, { created_at: new Date(now - 60_000 + i * 10).toISOString(), title: `=cmd|' /C calc'!A0 ${'baha '.repeat(40)}`, text: 'Tumataas ang tubig. '.repeat(30) }), { key: KEY }),
    );
    for (const res of await Promise.all(posts)) expect(res.status).toBe(201);
    await new Promise((r) => setTimeout(r, 900));
  }
  await eventually(async () => {
    const res = await fetch(`${url}/reports/archive/count?${win('open')}`, { headers: { 'User-Agent': 'hang-up-matrix/1.0' } });
    const body = (await res.json()) as { result: { count: number } };
    return body.result.count === 400 ? true : undefined;
  }, 30_000, 'the open hour archived');
}, 240_000);

afterAll(async () => {
  child?.kill('SIGKILL');
  if (dataDir) await fs.rm(dataDir, { recursive: true, force: true });
});

/** One request, dropped (socket destroyed) at `moment`; resolves once the client side is gone. */
function hangUp(target: string, encoding: (typeof ENCODINGS)[number], moment: Moment): Promise<number | undefined> {
  return new Promise((resolve) => {
    let status: number | undefined;
    const req = http.get(`${url}${target}`, { agent: false, headers: { 'User-Agent': 'hang-up-matrix/1.0', 'Accept-Encoding': encoding } });
    const done = () => resolve(status);
    req.on('error', done);
    req.on('close', done);
    req.on('response', (res) => {
      status = res.statusCode;
      res.on('error', done);
      if (moment === 'after the headers') return req.destroy();
      if (moment === 'after the first chunk') return res.once('data', () => req.destroy());
      // Mid-stream: read a little, then stop reading until the server is held by back-pressure.
      res.once('data', () => {
        res.pause();
        setTimeout(() => req.destroy(), 150);
      });
      res.once('end', () => req.destroy());
    });
  });
}

async function openDescriptors(pid: number): Promise<number> {
  return (await fs.readdir(`/proc/${pid}/fd`)).length;
}

async function tempFiles(): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string): Promise<void> => {
    for (const e of await fs.readdir(d, { withFileTypes: true }).catch(() => [])) {
      if (e.isDirectory()) await walk(path.join(d, e.name));
      else out.push(path.join(d, e.name));
    }
  };
  await walk(path.join(dataDir, 'tmp'));
  return out.sort();
}

describe('clients hanging up on every answer', () => {
  it('never stop the process, and leave no descriptor or temporary file behind', async () => {
    // Every shape once in full first: lazily opened files are open, caches are filled.
    for (const [name, target] of Object.entries(SHAPES)) {
      if (name === 'stream') continue;
      const res = await fetch(`${url}${target}`, { headers: { 'User-Agent': 'hang-up-matrix/1.0' } });
      expect(res.status, `${name}: ${target}`).toBe(200);
      await res.arrayBuffer();
    }
    const idleFds = await openDescriptors(child.pid!);
    const idleTemp = await tempFiles();

    const cases = Object.entries(SHAPES).flatMap(([name, target]) => ENCODINGS.flatMap((encoding) => MOMENTS.map((moment) => ({ name, target, encoding, moment }))));
    const statuses = new Map<string, number | undefined>();
    // A few at a time, as several impatient researchers would.
    for (let i = 0; i < cases.length; i += 6) {
      const group = cases.slice(i, i + 6);
      const got = await Promise.all(group.map((c) => hangUp(c.target, c.encoding, c.moment)));
      group.forEach((c, j) => statuses.set(`${c.name} ${c.encoding} ${c.moment}`, got[j]));
      expect(child.exitCode, `the process exited after: ${group.map((c) => `${c.name} ${c.encoding} ${c.moment}`).join('; ')}\n${output.slice(-3000)}`).toBeNull();
    }
    // Each hang-up came after a real answer had begun (not a refusal).
    for (const [c, status] of statuses) expect(status, c).toBe(200);

    await new Promise((r) => setTimeout(r, 500));
    expect(child.exitCode, output.slice(-3000)).toBeNull();
    expect((await fetch(`${url}/health`)).status).toBe(200);
    await eventually(async () => ((await openDescriptors(child.pid!)) <= idleFds + 2 ? true : undefined), 15_000, `descriptors back to ${idleFds}`);
    await eventually(async () => (JSON.stringify(await tempFiles()) === JSON.stringify(idleTemp) ? true : undefined), 15_000, 'temporary files back to idle');
    // The answers are still whole afterwards.
    const count = await fetch(`${url}/reports/archive/count?${win('stored')}`, { headers: { 'User-Agent': 'hang-up-matrix/1.0' } });
    expect(((await count.json()) as { result: { count: number } }).result.count).toBe(9_000);
    const open = await fetch(`${url}/reports/archive?${win('open')}&format=ndjson`, { headers: { 'User-Agent': 'hang-up-matrix/1.0', 'Accept-Encoding': 'gzip' } });
    expect((await open.text()).trim().split('\n')).toHaveLength(400);
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  }, 300_000);
});
