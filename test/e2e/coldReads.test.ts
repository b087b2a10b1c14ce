// A cold window on S3: a process with an empty part cache answers a window of many days, and
// fetches the ready texts of the days ahead while it prepares one, several GETs at once (on
// S3 each waits 20–50 ms for its first byte), and answers what the parts hold. It fetches only
// the bytes its answer reads: the index and one format's sections, the per-report index only
// for a cut or filtered window, and nothing again once they are cached.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { sqlString } from '../../src/archive/duckdb.js';
import { storePartPublisher } from '../../src/archive/partPublisher.js';
import type { ReadyIndex } from '../../src/archive/sidecars/index.js';
import { READY_HEAD_BYTES } from '../../src/archive/sidecars/readySections.js';
import { verify } from '../../src/ops/verify.js';
import { newDayPartKey } from '../../src/store/layout.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { writePartFile } from '../support/parts.js';
import { startTestService, tempDir, testConfig, testRuntime, type TestService } from '../support/env.js';

const DAYS = 14;
/** Enough that a day's ready texts are several times the first bytes fetched with its index. */
const PER_DAY = 1500;
const FIRST_DAY_MS = Date.parse('2026-11-01T00:00:00Z');

let emulator: Emulator;
let svc: TestService;
/** GETs of ready texts under way, and the most at once. */
let inFlight = 0;
let most = 0;
/** Bytes of ready texts fetched, and GETs of them. */
let readyBytes = 0;
let readyGets = 0;
/** Requests for a part (reads: GETs and HEADs). */
let partGets = 0;
/** Listings under way, and the most at once. */
let listing = 0;
let mostListing = 0;
/** The stored ready texts: each one's size and index. */
const stored: { size: number; index: ReadyIndex; base: number }[] = [];

beforeAll(async () => {
  emulator = await startEmulator();
  // Counted where every request goes, the SDK's commands and the store's direct GETs alike: its
  // request handler.
  const handler = emulator.s3.config.requestHandler;
  const handle = handler.handle.bind(handler);
  handler.handle = async (request, options) => {
    if (request.query?.['list-type'] !== undefined) {
      mostListing = Math.max(mostListing, ++listing);
      try {
        return await handle(request, options);
      } finally {
        listing -= 1;
      }
    }
    const key = decodeURIComponent(request.path);
    if (key.includes('reports/v1/') && (request.method === 'GET' || request.method === 'HEAD')) partGets += 1;
    if (!key.includes('/ready/') || request.method !== 'GET') return handle(request, options);
    most = Math.max(most, ++inFlight);
    try {
      const out = await handle(request, options);
      readyGets += 1;
      readyBytes += Number(out.response.headers['content-length'] ?? 0);
      return out;
    } finally {
      inFlight -= 1;
    }
  };
  svc = await startTestService(await testRuntime(await testConfig('aws', emulator), emulator), { worker: false, reconcile: false });
  for (let d = 0; d < DAYS; d++) {
    const file = path.join(svc.rt.config.dataDir, `day-${d}.parquet`);
    const dayMs = FIRST_DAY_MS + d * 86_400_000;
    await writePartFile(svc.rt.db, file, d * PER_DAY, PER_DAY, dayMs, Math.floor(86_400_000 / PER_DAY));
    await storePartPublisher(svc.rt).publish(newDayPartKey(dayMs), file);
  }
  for await (const info of svc.rt.store.list({ prefix: 'ready/v7/' })) {
    const body = (await svc.rt.store.get(info.key))!.body;
    const base = body.indexOf(10) + 1;
    stored.push({ size: body.length, index: JSON.parse(body.subarray(0, base).toString()) as ReadyIndex, base });
  }
  most = 0;
  readyBytes = 0;
  readyGets = 0;
}, 180_000);

/** Bytes of every stored ready text's sections of one kind. */
const sectionBytes = (of: (r: (typeof stored)[number]) => number) => stored.reduce((n, r) => n + of(r), 0);
const textBytes = (shape: 'geojson' | 'csv') => sectionBytes((r) => r.index.hours.reduce((n, h) => n + h[shape][1] - h[shape][0], 0));
const ALL = 'start=2026-11-01T00:00:00Z&end=2026-11-14T23:59:59.999Z';

async function answer(query: string): Promise<Response> {
  const res = await fetch(`${svc.url}/reports/archive?${query}`, { headers: { 'User-Agent': 'cold-read-tests/1.0' } });
  expect(res.status).toBe(200);
  return res;
}

/** Ready-text bytes and GETs an answer's reading fetched. */
async function fetchedBy(read: () => Promise<unknown>): Promise<{ bytes: number; gets: number }> {
  const [bytes, gets] = [readyBytes, readyGets];
  await read();
  return { bytes: readyBytes - bytes, gets: readyGets - gets };
}
afterAll(async () => {
  await svc?.stop();
  await emulator?.stop();
});

describe('a cold window on S3', () => {
  it('fetches the ready texts of the days ahead several at a time, only their GeoJSON, and answers every report once', async () => {
    let text = '';
    const fetched = await fetchedBy(async () => (text = await (await answer(`${ALL}&format=ndjson`)).text()));
    const pkeys = text.trim().split('\n').map((l) => (JSON.parse(l) as { properties: { pkey: string } }).properties.pkey);
    expect(pkeys).toHaveLength(DAYS * PER_DAY);
    expect(new Set(pkeys).size).toBe(DAYS * PER_DAY);
    // One day at a time (the one prepared and the one sent) is two GETs at most.
    expect(most).toBeGreaterThanOrEqual(4);
    // The first bytes (the index), then the rest of the GeoJSON sections, which follow it: no
    // CSV, Arrow, per-report index or Parquet.
    expect(fetched.bytes).toBe(sectionBytes((r) => Math.max(Math.min(READY_HEAD_BYTES, r.size), r.base + Math.max(...r.index.hours.map((h) => h.geojson[1])))));
    expect(fetched.bytes).toBeLessThan(sectionBytes((r) => r.size) / 2);
  });

  it('fetches another format\'s sections alone once the indexes are cached, and nothing a second time', async () => {
    let csv = '';
    const cold = await fetchedBy(async () => (csv = await (await answer(`${ALL}&format=csv`)).text()));
    expect(csv.trim().split('\n').filter((l) => l.startsWith('"partner-'))).toHaveLength(DAYS * PER_DAY);
    expect(cold.bytes).toBeGreaterThanOrEqual(textBytes('csv'));
    // Each day's CSV sections are one range of a few bytes' gap at most: one GET a day.
    expect(cold.gets).toBe(DAYS);
    expect(cold.bytes).toBeLessThan(textBytes('csv') + DAYS * 1024);
    const warm = await fetchedBy(async () => {
      await (await answer(`${ALL}&format=csv`)).text();
      await (await answer(`${ALL}&format=ndjson`)).text();
    });
    expect(warm).toEqual({ bytes: 0, gets: 0 });
  });

  it('counts a window from the stats sidecars: no part is fetched', async () => {
    const before = partGets;
    const count = ((await (await fetch(`${svc.url}/reports/archive/count?${ALL}`)).json()) as { result: { count: number } }).result.count;
    expect(count).toBe(DAYS * PER_DAY);
    const stats = ((await (await fetch(`${svc.url}/reports/archive/stats?${ALL}&interval=day&by=city`)).json()) as { result: { total: number; rows: unknown[] } }).result;
    expect(stats.total).toBe(DAYS * PER_DAY);
    expect(stats.rows).toHaveLength(DAYS * 2);
    expect(partGets - before).toBe(0);
  });

  it('fetches the per-report index for a window that cuts hours or filters by city, and answers what it selects', async () => {
    const query = 'start=2026-11-03T05:30:00Z&end=2026-11-05T17:10:00Z&admin=PH-QC';
    let features: { properties: { tags: { instance_region_code: string } } }[] = [];
    const fetched = await fetchedBy(async () => (features = ((await (await answer(`${query}&format=geojson`)).json()) as { features: typeof features }).features));
    const count = ((await (await fetch(`${svc.url}/reports/archive/count?${query}`)).json()) as { result: { count: number } }).result.count;
    expect(count).toBeGreaterThan(0);
    expect(features).toHaveLength(count);
    expect(features.every((f) => f.properties.tags.instance_region_code === 'PH-QC')).toBe(true);
    // Three days' per-report indexes (their GeoJSON is cached already).
    expect(fetched.gets).toBe(3);
    expect(fetched.bytes).toBe(3 * PER_DAY * 38);
  });

  it('fetches only the Parquet sections of the days a Parquet answer copies, the days ahead several at a time', async () => {
    let rows = 0;
    most = 0;
    const fetched = await fetchedBy(async () => {
      const file = path.join(svc.rt.config.dataDir, 'answer.parquet');
      await fs.writeFile(file, Buffer.from(await (await answer(`${ALL}&format=parquet`)).arrayBuffer()));
      rows = await svc.rt.db.withConnection(async (conn) => Number((await conn.runAndReadAll(`SELECT count(*) FROM read_parquet(${sqlString(file)})`)).getRowsJS()[0]![0]));
    });
    expect(rows).toBe(DAYS * PER_DAY);
    const parquetBytes = sectionBytes((r) => r.index.parquet[1] - r.index.parquet[0]);
    expect(fetched.bytes).toBeGreaterThanOrEqual(parquetBytes);
    expect(fetched.bytes).toBeLessThan(parquetBytes + DAYS * 1024);
    expect(most).toBeGreaterThanOrEqual(4);
  });

  it('fetches only the Arrow sections of an Arrow answer', async () => {
    let rows = 0;
    const fetched = await fetchedBy(async () => {
      const res = await answer(`${ALL}&format=arrow`);
      const file = path.join(svc.rt.config.dataDir, 'answer.arrows');
      await fs.writeFile(file, Buffer.from(await res.arrayBuffer()));
      rows = Number(execFileSync('python3', ['-c', 'import sys, pyarrow.ipc as i; print(i.open_stream(sys.argv[1]).read_all().num_rows)', file], { encoding: 'utf8' }).trim());
    });
    expect(rows).toBe(DAYS * PER_DAY);
    const arrowBytes = sectionBytes((r) => r.index.hours.reduce((n, h) => n + h.arrow[1] - h.arrow[0], 0));
    expect(fetched.bytes).toBeGreaterThanOrEqual(arrowBytes);
    expect(fetched.bytes).toBeLessThan(arrowBytes + DAYS * 1024);
  });

  it('lists a window\'s parts and its retractions at once: on S3 each listing is a round trip before the first byte', async () => {
    mostListing = 0;
    await (await answer(`${ALL}&format=csv`)).text();
    expect(mostListing).toBe(2);
  });

  it('keeps what it fetched across a restart: a process stopped right after a cold answer, the next one on its cache fetches nothing again', async () => {
    let before = '';
    const cold = await fetchedBy(async () => (before = await (await answer(`${ALL}&format=topojson`)).text()));
    expect(cold.gets).toBeGreaterThan(0);
    // Stopped at once: the ranged copies' journal is written as the process stops, not a second later.
    await svc.stop();
    svc = await startTestService(await testRuntime(svc.rt.config, emulator), { worker: false, reconcile: false });
    const warm = await fetchedBy(async () => expect(await (await answer(`${ALL}&format=topojson`)).text()).toBe(before));
    expect(warm).toEqual({ bytes: 0, gets: 0 });
  });

  it('answers every format whole from a part cache smaller than one day\'s ready texts: an answer keeps the copies it reads until it has sent them', async () => {
    // Each copy taken evicts every other one not in use: the days fetched ahead, and a day
    // being sent unless its answer holds it.
    const tiny = await startTestService(await testRuntime({ ...svc.rt.config, cacheDir: await tempDir(), cacheMaxBytes: 1 }, emulator), { worker: false, reconcile: false });
    try {
      for (const [format, encoding] of [['ndjson', 'identity'], ['csv', 'gzip'], ['topojson', 'identity'], ['arrow', 'identity'], ['parquet', 'identity']]) {
        const get = async (url: string) => {
          const res = await fetch(`${url}/reports/archive?${ALL}&format=${format}`, { headers: { 'User-Agent': 'cold-read-tests/1.0', 'Accept-Encoding': encoding! } });
          expect(res.status).toBe(200);
          return Buffer.from(await res.arrayBuffer());
        };
        const [small, usual] = [await get(tiny.url), await get(svc.url)];
        expect({ format, equal: small.equals(usual) }).toEqual({ format, equal: true });
        // Every copy let go once the answer is sent: the bound holds again.
        await vi.waitFor(() => expect(tiny.rt.cache.sizeBytes).toBe(0), { timeout: 5000 });
      }
      // Answers built from the parts themselves (a filtered Parquet window, a page, a filtered
      // Arrow window) and counts from the stats sidecars hold the copies they read until done.
      for (const query of [`?${ALL}&admin=PH-QC&format=parquet`, `?${ALL}&limit=5000&format=csv`, `?${ALL}&format=arrow&bbox=120,14,122,16`, `/count?${ALL}`, `/stats?${ALL}&interval=day&by=city`]) {
        const get = async (url: string) => {
          const res = await fetch(`${url}/reports/archive${query}`, { headers: { 'User-Agent': 'cold-read-tests/1.0' } });
          expect({ query, status: res.status }).toEqual({ query, status: 200 });
          return Buffer.from(await res.arrayBuffer());
        };
        const [small, usual] = [await get(tiny.url), await get(svc.url)];
        expect({ query, equal: small.equals(usual) }).toEqual({ query, equal: true });
      }
      // An operator's job holds the parts it reads too: verify reads a block of days at once.
      // (The parts were published without the ledger: each of their reports is one it does not know.)
      const checked = await verify(tiny.rt, { fromMs: FIRST_DAY_MS, toMs: FIRST_DAY_MS + DAYS * 86_400_000 - 1 });
      expect(checked.unexpected).toHaveLength(DAYS * PER_DAY);
      // A client that hangs up mid-answer lets go of what its answer held too: after the next
      // answer, nothing is left held.
      for (const encoding of ['identity', 'gzip']) {
        await new Promise<void>((resolve) => {
          const req = http.get(`${tiny.url}/reports/archive?${ALL}&format=ndjson`, { headers: { 'User-Agent': 'cold-read-tests/1.0', 'Accept-Encoding': encoding } });
          req.on('error', () => resolve());
          req.on('response', (res) => {
            res.once('data', () => req.destroy());
            res.on('error', () => resolve());
            res.on('close', () => resolve());
          });
        });
      }
      const after = await fetch(`${tiny.url}/reports/archive?${ALL}&format=csv`, { headers: { 'User-Agent': 'cold-read-tests/1.0' } });
      expect(after.status).toBe(200);
      expect((await after.text()).split('\n').filter((l) => l.startsWith('"partner-'))).toHaveLength(DAYS * PER_DAY);
      await vi.waitFor(() => expect(tiny.rt.cache.sizeBytes).toBe(0), { timeout: 5000 });
    } finally {
      await tiny.stop();
    }
  });

  it('a client that hangs up on a cold answer, plain or gzip, leaves the ranges in flight to finish: the process answers the window whole after', async () => {
    for (const encoding of ['identity', 'gzip']) {
      // Another process on the same store, its cache empty: its first answer fetches every day.
      const cold = await startTestService(await testRuntime({ ...svc.rt.config, cacheDir: await tempDir() }, emulator), { worker: false, reconcile: false });
      try {
        await new Promise<void>((resolve, reject) => {
          const req = http.get(`${cold.url}/reports/archive?${ALL}&format=ndjson`, { headers: { 'User-Agent': 'cold-read-tests/1.0', 'Accept-Encoding': encoding } });
          req.on('error', () => resolve());
          req.on('response', (res) => {
            if (res.statusCode !== 200) reject(new Error(`answered ${res.statusCode}`));
            res.once('data', () => req.destroy());
            res.on('error', () => resolve());
            res.on('close', () => resolve());
          });
        });
        const lines = (await (await fetch(`${cold.url}/reports/archive?${ALL}&format=ndjson`, { headers: { 'User-Agent': 'cold-read-tests/1.0' } })).text()).trim().split('\n');
        expect(new Set(lines.map((l) => (JSON.parse(l) as { properties: { pkey: string } }).properties.pkey)).size).toBe(DAYS * PER_DAY);
      } finally {
        await cold.stop();
      }
    }
  });
});
