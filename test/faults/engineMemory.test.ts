// A storm hour (an open hour of many parts not yet compacted) under a small DuckDB memory limit:
// pulls at once each get the whole answer; a pull past the cap on heavy answers gets a 503 with
// Retry-After before any byte; pulls that run each other out of memory wait for it rather than
// being cut; the engine out of memory on its own before the first byte is a 503 too; a
// failure after the first byte cuts the answer and is logged as the server's error, never as a
// client hang-up. DuckDB's spills live under TMP_DIR, bounded by DUCKDB_MAX_TEMP_SIZE.
import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/shared/log.js';
import { newPartKey } from '../../src/store/layout.js';
import { writePartFile } from '../support/parts.js';
import { stalledGet } from '../support/stalledClient.js';
import { eventually, startTestService, tempDir, testConfig, testRuntime, type TestService } from '../support/env.js';

const UA = { 'User-Agent': 'engine-memory-tests/1.0' };
const HOUR_MS = 3_600_000;
const PARTS = 40;
const PER_PART = 750;
/** Each part repeats the previous one's last 50 reports (at-least-once delivery). */
const OVERLAP = 50;
const REPORTS = PARTS * (PER_PART - OVERLAP) + OVERLAP;

let svc: TestService;
let tmpDir: string;
let hourMs: number;
let hour: string;
const lines: string[] = [];

function logSink(): Writable {
  return new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      done();
    },
  });
}

beforeAll(async () => {
  tmpDir = await tempDir('flood-spill-');
  const config = await testConfig('embedded', undefined, {
    DUCKDB_MEMORY_LIMIT: '24MB',
    DUCKDB_MAX_TEMP_SIZE: '1GB',
    TMP_DIR: tmpDir,
    ARCHIVE_MAX_CONCURRENT: '2',
    // Every pull here comes from one address: both turns are its own.
    ARCHIVE_MAX_CONCURRENT_PER_ADDRESS: '2',
    ARCHIVE_QUEUE_SECONDS: '0',
    LOG_LEVEL: 'info',
  });
  svc = await startTestService(await testRuntime(config, undefined, { log: createLogger('info', logSink()) }), { worker: false, reconcile: false });
  // The hour before this one: its reports are all received before now, so pages (which hold only
  // the reports received before they are asked) see them all, whenever in the hour this runs.
  hourMs = Math.floor(Date.now() / HOUR_MS) * HOUR_MS - HOUR_MS;
  hour = `start=${new Date(hourMs).toISOString()}&end=${new Date(hourMs + HOUR_MS - 1).toISOString()}`;
  const dir = path.join(config.dataDir, 'parts');
  await fs.mkdir(dir, { recursive: true });
  for (let p = 0; p < PARTS; p++) {
    const file = path.join(dir, `${p}.parquet`);
    const first = p * (PER_PART - OVERLAP);
    // One report every 100 ms from the hour's start: 28,050 reports, about 12 MB of GeoJSON.
    await writePartFile(svc.rt.db, file, first, PER_PART, hourMs + first * 100, 100);
    await svc.rt.store.put(newPartKey(hourMs), await fs.readFile(file));
  }
  // The day before: one part DuckDB cannot read.
  await svc.rt.store.put(newPartKey(hourMs - 24 * HOUR_MS), Buffer.from('not a parquet file'));
}, 120_000);
afterAll(async () => {
  await svc?.stop();
});

interface Pulled {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** The connection closed before the answer's end. */
  cut: boolean;
}

/** A GET of the archive whose answer is held (not read) until `read` is called. */
function held(query: string, base = svc.url): Promise<{ status: number; headers: http.IncomingHttpHeaders; read: () => Promise<Pulled> }> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${base}/reports/archive?${query}`, { headers: { ...UA, 'Accept-Encoding': 'identity' } }, (res) => {
      res.pause();
      const read = () =>
        new Promise<Pulled>((done) => {
          const chunks: Buffer[] = [];
          let cut = false;
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('aborted', () => (cut = true));
          res.on('error', () => (cut = true));
          res.on('close', () => done({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString('utf8'), cut: cut || !res.complete }));
          res.resume();
        });
      resolve({ status: res.statusCode!, headers: res.headers, read });
    });
    req.on('error', reject);
  });
}

const pull = async (query: string, base = svc.url) => (await held(query, base)).read();

/** A client that takes an answer's headers, then reads nothing until `read` is called (stalledClient.ts). */
async function stalled(query: string): Promise<{ status: number; read: () => Promise<Pulled> }> {
  const got = await stalledGet(svc.url, `/reports/archive?${query}`, tmpDir, UA['User-Agent']);
  return {
    status: got.status,
    read: async () => {
      const pulled = await got.read();
      return { ...pulled, body: pulled.body.toString('utf8'), headers: {} };
    },
  };
}

/** The errors the service has logged, for a failure's message. */
function serverErrors(): string {
  return lines.filter((l) => (JSON.parse(l) as { level: number }).level >= 50).join('\n');
}

/** The features of a whole GeoJSON answer: every report once, newest first. */
function expectWhole(pulled: Pulled): void {
  // A cut answer names the server's reason, from its log, in the failure.
  expect(pulled.cut, serverErrors()).toBe(false);
  expect(pulled.status).toBe(200);
  const features = JSON.parse(pulled.body).features as { properties: { pkey: string; created_at: string } }[];
  expect(features).toHaveLength(REPORTS);
  expect(new Set(features.map((f) => f.properties.pkey)).size).toBe(REPORTS);
  const times = features.map((f) => Date.parse(f.properties.created_at));
  expect(times.every((t, i) => i === 0 || t <= times[i - 1]!)).toBe(true);
}

describe('a storm hour under a small DuckDB memory limit', () => {
  it('is answered whole to two pulls at once, the same bytes to each', async () => {
    const [a, b] = await Promise.all([pull(`${hour}&format=geojson`), pull(`${hour}&format=geojson`)]);
    expectWhole(a!);
    expectWhole(b!);
    expect(b!.body).toBe(a!.body);
  });

  it('gives a pull past the cap on heavy answers a 503 with Retry-After before any byte, while the pulls under way complete', async () => {
    // Two answers under way (the cap), their clients not reading yet, with small receive
    // buffers: 12 MB each cannot sit in socket buffers, so each holds its turn until read.
    const first = await stalled(`${hour}&format=geojson`);
    const second = await stalled(`${hour}&format=geojson`);
    expect([first.status, second.status]).toEqual([200, 200]);
    // Read whatever happens below, so a failure here does not leave their turns taken for the next cases.
    let reads: Promise<[Pulled, Pulled]> | undefined;
    const readBoth = () => (reads ??= Promise.all([first.read(), second.read()]));
    try {
      const refused = await fetch(`${svc.url}/reports/archive?${hour}&format=csv`, { headers: UA });
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('5');
      expect(await refused.json()).toEqual({ statusCode: 503, error: 'Service Unavailable', message: expect.stringMatching(/retry after 5 seconds/), details: [] });
      // Pages are not heavy answers: answered meanwhile, a storm hour's page within the memory limit
      // (its reports chosen on the key columns, then only those read whole).
      const page = await fetch(`${svc.url}/reports/archive?${hour}&format=geojson&limit=10`, { headers: UA });
      expect(page.status).toBe(200);
      const { features } = (await page.json()) as { features: { properties: { created_at: string } }[] };
      const times = features.map((f) => Date.parse(f.properties.created_at));
      expect(times).toHaveLength(10);
      expect(times.every((t, i) => i === 0 || t < times[i - 1]!)).toBe(true);
      const [a, b] = await readBoth();
      expectWhole(a);
      expectWhole(b);
    } finally {
      await readBoth();
    }
    // Their turns are given back as their answers end.
    expectWhole(await eventually(async () => {
      const again = await pull(`${hour}&format=geojson`);
      return again.status === 503 ? undefined : again;
    }));
  });

  it('cuts an answer whose engine fails after its first byte, and logs it as the server error it is, never as a client hang-up', async () => {
    const twoDays = `start=${new Date(hourMs - 24 * HOUR_MS).toISOString().slice(0, 10)}T00:00:00Z&end=${new Date(hourMs + HOUR_MS - 1).toISOString()}`;
    const before = lines.length;
    const pulled = await pull(`${twoDays}&format=geojson`);
    expect(pulled.status).toBe(200);
    expect(pulled.cut).toBe(true);
    expect(pulled.body.startsWith('{"type":"FeatureCollection","features":[{')).toBe(true);
    const logged = lines.slice(before).map((l) => JSON.parse(l));
    const failed = logged.find((l) => l.msg === 'answer cut short: the server failed after its first byte');
    expect(failed).toMatchObject({ level: 50, request: expect.stringContaining(`/reports/archive?${twoDays}&format=geojson`), err: { message: expect.stringMatching(/parquet|magic/i) } });
    expect(logged.find((l) => l.req?.id === failed.req.id && l.res)).toMatchObject({ level: 50, msg: 'answer cut short by a server error' });
    expect(logged.map((l) => l.msg)).not.toContainEqual(expect.stringMatching(/client closed/));
    // The process is still there, and answers.
    expectWhole(await pull(`${hour}&format=geojson`));
  });

  it("spills under TMP_DIR, bounded by DUCKDB_MAX_TEMP_SIZE", async () => {
    const settings = await svc.rt.db.withConnection(async (conn) =>
      (await conn.runAndReadAll("SELECT current_setting('max_temp_directory_size') AS size, current_setting('temp_directory') AS dir")).getRowObjectsJS()[0],
    );
    expect(settings).toEqual({ size: '953.6 MiB', dir: path.join(tmpDir, 'duckdb') });
  });

  it('answers a 503 with Retry-After, before any byte, when the engine is out of memory', async () => {
    // A second API on the same data, with far too little memory for the hour.
    const config = await testConfig('embedded', undefined, { DATA_DIR: svc.rt.config.dataDir, DUCKDB_MEMORY_LIMIT: '1MB' });
    const starved = await startTestService(await testRuntime(config), { worker: false, reconcile: false });
    try {
      const res = await fetch(`${starved.url}/reports/archive?${hour}&format=geojson`, { headers: UA });
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('5');
      expect(await res.json()).toEqual({ statusCode: 503, error: 'Service Unavailable', message: expect.stringMatching(/out of memory.*retry after 5 seconds/), details: [] });
    } finally {
      await starved.stop();
    }
  });
});
