// Text answers of megabytes: ready texts are inflated an hour at a time, a few hours ahead of
// the one being sent. Answers made of many hours, pulled at once by fast and slow clients, and
// after clients that hung up, are byte for byte the answers DuckDB builds from the parts.
import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import zlib from 'node:zlib';
import { tableFromIPC } from 'apache-arrow';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storePartPublisher } from '../../src/archive/partPublisher.js';
import { newDayPartKey, newPartKey } from '../../src/store/layout.js';
import { writePartFile } from '../support/parts.js';
import { keysUnder, startTestService, testConfig, testRuntime, type TestService } from '../support/env.js';

const UA = { 'User-Agent': 'large-answers-tests/1.0' };
const DAY_MS = Date.parse('2026-11-10T00:00:00Z');
const WHOLE = 'start=2026-11-09T00:00:00Z&end=2026-11-10T23:59:59.999Z';
// Cuts the compacted day's 05:00 and the hour part's 21:00 (the previous day).
const CUT = 'start=2026-11-09T21:17:00Z&end=2026-11-10T05:42:00Z';
const FORMATS = ['geoformat=geojson', 'format=geojson', 'format=ndjson', 'format=csv', 'geoformat=topojson'];
const QUERIES = FORMATS.flatMap((f) => [WHOLE, CUT].map((w) => `${w}&${f}`));

let svc: TestService;

/** An answer read whole; `slow`: read in small bites with pauses, so the server waits on the client. */
function pull(query: string, options: { slow?: boolean; gzip?: boolean } = {}): Promise<string> {
  return pullBytes(query, options).then((b) => b.toString('utf8'));
}

function pullBytes(query: string, options: { slow?: boolean; gzip?: boolean } = {}): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const headers = { ...UA, ...(options.gzip ? { 'Accept-Encoding': 'gzip' } : {}) };
    http
      .get(`${svc.url}/reports/archive?${query}`, { headers }, (res) => {
        if (res.statusCode !== 200) return reject(new Error(`HTTP ${res.statusCode} for ${query}`));
        const chunks: Buffer[] = [];
        const body = options.gzip ? res.pipe(zlib.createGunzip()) : res;
        body.on('data', (c: Buffer) => {
          chunks.push(c);
          if (options.slow) {
            res.pause();
            setTimeout(() => res.resume(), 5);
          }
        });
        body.on('end', () => resolve(Buffer.concat(chunks)));
        body.on('error', reject);
      })
      .on('error', reject);
  });
}

/** Starts an answer and hangs up once its first bytes arrived. */
function hangUp(query: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${svc.url}/reports/archive?${query}`, { headers: UA }, (res) => {
      res.once('data', () => {
        req.destroy();
        resolve();
      });
    });
    req.on('error', (err) => (req.destroyed ? resolve() : reject(err)));
  });
}

/** An Arrow answer's schema and rows, comparable whatever its record batches. */
function tableOf(bytes: Buffer): unknown {
  const table = tableFromIPC(bytes);
  const rows = table.toArray().map((r) => JSON.stringify(r.toJSON(), (_, v) => (typeof v === 'bigint' ? String(v) : v instanceof Uint8Array ? Buffer.from(v).toString('hex') : v)));
  return { fields: table.schema.fields.map((f) => `${f.name}:${String(f.type)}`), rows };
}

/** The answers DuckDB builds when no part has ready texts. */
async function builtByDuckDb(): Promise<string[]> {
  const ready = await keysUnder(svc.rt, 'ready/');
  const saved = await Promise.all(ready.map(async (k) => [k, (await svc.rt.store.get(k))!.body] as const));
  await svc.rt.store.delete(ready);
  try {
    const out: string[] = [];
    for (const q of QUERIES) out.push(await pull(q));
    arrowBuilt = tableOf(await pullBytes(ARROW));
    return out;
  } finally {
    for (const [k, body] of saved) await svc.rt.store.put(k, body);
  }
}

let expected: string[];
/** The whole window as Arrow, built by DuckDB. */
const ARROW = `${WHOLE}&format=arrow`;
let arrowBuilt: unknown;

beforeAll(async () => {
  svc = await startTestService(await testRuntime(await testConfig('embedded')), { worker: false, reconcile: false });
  const dir = path.join(svc.rt.config.dataDir, 'parts');
  await fs.mkdir(dir, { recursive: true });
  // A compacted day of 9,000 reports (one every 9.6 s), and 3,000 in one hour part the day before.
  await writePartFile(svc.rt.db, path.join(dir, 'day.parquet'), 0, 9_000, DAY_MS, 9_600);
  await storePartPublisher(svc.rt).publish(newDayPartKey(DAY_MS), path.join(dir, 'day.parquet'));
  await writePartFile(svc.rt.db, path.join(dir, 'hour.parquet'), 9_000, 3_000, DAY_MS - 3 * 3_600_000, 1_200);
  await storePartPublisher(svc.rt).publish(newPartKey(DAY_MS - 3 * 3_600_000), path.join(dir, 'hour.parquet'));
  expected = await builtByDuckDb();
}, 120_000);
afterAll(async () => {
  await svc?.stop();
});

describe('text answers of megabytes', () => {
  it('are many pieces each, and byte for byte what DuckDB builds', async () => {
    const whole = expected[0]!;
    expect(Buffer.byteLength(whole)).toBeGreaterThan(3_000_000);
    expect(JSON.parse(whole).result.features).toHaveLength(12_000);
    const cut = JSON.parse(expected[1]!).result.features.map((f: { properties: { created_at: string } }) => Date.parse(f.properties.created_at));
    expect(Math.max(...cut)).toBeLessThanOrEqual(Date.parse('2026-11-10T05:42:00Z'));
    expect(Math.min(...cut)).toBeGreaterThanOrEqual(Date.parse('2026-11-09T21:17:00Z'));
    for (const [i, q] of QUERIES.entries()) expect(await pull(q), q).toBe(expected[i]);
  });

  it('stay whole when pulled at once, by slow and fast clients, plain and gzipped', async () => {
    const runs = await Promise.all(
      QUERIES.flatMap((q, i) => [
        pull(q, { slow: i % 2 === 0 }).then((body) => [i, body] as const),
        pull(q, { gzip: true, slow: i % 3 === 0 }).then((body) => [i, body] as const),
      ]),
    );
    for (const [i, body] of runs) expect(body, QUERIES[i]).toBe(expected[i]);
  });

  it('as Arrow, are stored record batches read an hour at a time: the table DuckDB builds, the same bytes pulled at once, plain and gzipped', async () => {
    const alone = await pullBytes(ARROW);
    expect(alone.byteLength).toBeGreaterThan(1_500_000);
    expect(tableOf(alone)).toEqual(arrowBuilt);
    const runs = await Promise.all([0, 1, 2, 3, 4, 5].map((i) => pullBytes(ARROW, { slow: i % 3 === 0, gzip: i % 2 === 1 })));
    for (const body of runs) expect(body.equals(alone)).toBe(true);
  });

  it('stay whole after clients hung up in the middle of theirs', async () => {
    await Promise.all([...QUERIES, ARROW].map((q) => hangUp(q)));
    const runs = await Promise.all(QUERIES.map((q) => pull(q)));
    runs.forEach((body, i) => expect(body, QUERIES[i]).toBe(expected[i]));
    expect((await fetch(`${svc.url}/health`)).status).toBe(200);
  });
});
