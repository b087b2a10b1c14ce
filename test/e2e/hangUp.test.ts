// A client that hangs up stops the work: a year pulled and abandoned leaves no DuckDB query
// running, no memory held, no temporary or half-written file;
// the same year is then answered in full as before.
import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSyntheticArchive } from '../../bench/synthetic.js';
import { defaultBoundaries } from '../../src/boundaries/defaultBoundaries.js';
import { createLogger } from '../../src/shared/log.js';
import { eventually, startTestService, testConfig, testRuntime, type TestService } from '../support/env.js';

const START = Date.UTC(2025, 0, 1);
const DAYS = 365;
const REPORTS = 150_000;
const YEAR = `start=2025-01-01T00:00:00%2B0000&end=2025-12-31T23:59:59%2B0000`;

let svc: TestService;
/** The service's log lines at info and above, as a service runs. */
const logged: { level: number; msg: string; req?: { url?: string } }[] = [];
beforeAll(async () => {
  const config = await testConfig('embedded', undefined, { LOG_LEVEL: 'info' });
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logged.push(...chunk.toString('utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l)));
      done();
    },
  });
  // A year of hourly parts (about 8,000 files) straight into the store's layout: a cold
  // Parquet or Arrow answer over it takes DuckDB long enough to be abandoned halfway.
  await buildSyntheticArchive({ storeDir: path.join(config.dataDir, 'store'), reports: REPORTS, startMs: START, days: DAYS, boundaries: await defaultBoundaries(), boundaryVersion: 'test' });
  svc = await startTestService(await testRuntime(config, undefined, { log: createLogger('info', sink) }), { worker: false, reconcile: false });
}, 120_000);
afterAll(async () => {
  await svc?.stop();
});

/** A GET that is dropped (socket destroyed) once `leaveWhen` says so. */
function abandonedGet(query: string, leaveWhen: 'working' | 'first bytes'): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${svc.url}/reports/archive?${query}`, { headers: { 'User-Agent': 'hang-up-tests/1.0', 'Accept-Encoding': 'identity' } });
    req.on('error', () => resolve());
    req.on('response', (res) => {
      if (leaveWhen !== 'first bytes') return reject(new Error(`answered (${res.statusCode}) before the client could leave`));
      res.once('data', () => req.destroy());
      res.on('error', () => resolve());
      res.on('close', () => resolve());
    });
    if (leaveWhen === 'working') {
      // Gone while the server is querying: its DuckDB connection is open.
      eventually(async () => (svc.rt.db.openConnections > 0 ? true : undefined), 20_000, 'the answer started').then(
        () => req.destroy(),
        reject,
      );
    }
  });
}

async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string): Promise<void> => {
    for (const e of await fs.readdir(d, { withFileTypes: true }).catch(() => [])) {
      if (e.isDirectory()) await walk(path.join(d, e.name));
      else out.push(path.join(d, e.name));
    }
  };
  await walk(dir);
  return out;
}

/** DuckDB's own view: bytes its buffer manager holds, and temporary files it has open. */
async function duckdbHolds(): Promise<{ memory: number; tempFiles: number }> {
  return svc.rt.db.withConnection(async (conn) => {
    const mem = await conn.runAndReadAll('SELECT coalesce(sum(memory_usage_bytes), 0)::BIGINT AS b FROM duckdb_memory()');
    const tmp = await conn.runAndReadAll('SELECT count(*)::BIGINT AS n FROM duckdb_temporary_files()');
    return { memory: Number(mem.getRowObjectsJS()[0]!.b), tempFiles: Number(tmp.getRowObjectsJS()[0]!.n) };
  });
}

async function stopped(): Promise<void> {
  await eventually(async () => (svc.rt.db.openConnections === 0 ? true : undefined), 5_000, 'every query of the abandoned answer stopped');
}

describe('a client that hangs up', () => {
  it('stops a cold Parquet year: its query is interrupted, its files removed, the hang-up logged once', async () => {
    const exportsDir = path.join(svc.rt.config.dataDir, 'tmp', 'exports');
    const before = logged.length;
    await abandonedGet(`${YEAR}&format=parquet`, 'working');
    await stopped();
    // One line at info for the request (the access log's), none above: a client leaving is no error of ours.
    await eventually(async () => (logged.slice(before).some((l) => l.req?.url?.includes('format=parquet')) ? true : undefined), 5_000, 'the access line');
    const lines = logged.slice(before).filter((l) => l.level >= 30);
    expect(lines.map((l) => l.msg)).toEqual(['client closed the connection before the answer was complete']);
    expect(await filesUnder(exportsDir)).toEqual([]);
    expect(await filesUnder(path.join(svc.rt.config.dataDir, 'tmp', 'duckdb'))).toEqual([]);
    const holds = await duckdbHolds();
    expect(holds.tempFiles).toBe(0);
    expect(holds.memory).toBeLessThan(16 * 1024 * 1024);
  }, 60_000);

  it('stops a cold Arrow year and a cold GeoJSON year once the client has read their first bytes', async () => {
    for (const q of ['format=arrow', 'format=geojson']) {
      await abandonedGet(`${YEAR}&${q}`, 'first bytes');
      await stopped();
      const holds = await duckdbHolds();
      expect(holds.tempFiles).toBe(0);
      expect(holds.memory).toBeLessThan(16 * 1024 * 1024);
    }
  }, 60_000);

  it('starts no further query of an answer abandoned between two of its queries', async () => {
    const controller = new AbortController();
    let finished = false;
    const work = svc.rt.db.withConnection(async (conn) => {
      await conn.run('SELECT 1');
      // The client leaves while nothing runs: there is nothing to interrupt yet.
      controller.abort();
      // Minutes of work, were it allowed to start.
      await conn.run('SELECT count(*) FROM range(100000000000)');
      finished = true;
    }, controller.signal);
    await expect(work).rejects.toThrow(/abort/i);
    expect(finished).toBe(false);
    expect(svc.rt.db.openConnections).toBe(0);
  }, 30_000);

  it('stops a statement with parameters abandoned while it is being prepared', async () => {
    const controller = new AbortController();
    let finished = false;
    // Thousands of literals to parse and bind, then minutes of work, were it allowed to run.
    const sql = `SELECT count(*) FROM range(100000000000) t(i) WHERE i <> $1 AND i NOT IN (${Array.from({ length: 20_000 }, (_, i) => -1 - i).join(', ')})`;
    const work = svc.rt.db.withConnection(async (conn) => {
      const running = conn.run(sql, [7]);
      // The client leaves while the statement is parsed and prepared, before it runs.
      setImmediate(() => controller.abort());
      await running;
      finished = true;
    }, controller.signal);
    await expect(work).rejects.toThrow(/interrupt|abort/i);
    expect(finished).toBe(false);
    expect(svc.rt.db.openConnections).toBe(0);
  }, 30_000);

  it('answers in full afterwards', async () => {
    const res = await fetch(`${svc.url}/reports/archive/count?${YEAR}`, { headers: { 'User-Agent': 'hang-up-tests/1.0' } });
    expect(((await res.json()) as { result: { count: number } }).result.count).toBe(REPORTS);
    // A month as Parquet: the answer abandoned above, whole this time.
    const month = 'start=2025-12-01T00:00:00%2B0000&end=2025-12-31T23:59:59%2B0000';
    const parquet = await fetch(`${svc.url}/reports/archive?${month}&format=parquet`, { headers: { 'User-Agent': 'hang-up-tests/1.0' } });
    expect(parquet.status).toBe(200);
    const file = path.join(svc.rt.config.dataDir, 'month.parquet');
    await fs.writeFile(file, Buffer.from(await parquet.arrayBuffer()));
    const counted = await fetch(`${svc.url}/reports/archive/count?${month}`, { headers: { 'User-Agent': 'hang-up-tests/1.0' } });
    const expected = ((await counted.json()) as { result: { count: number } }).result.count;
    expect(expected).toBeGreaterThan(0);
    const rows = await svc.rt.db.withConnection(async (conn) => Number((await conn.runAndReadAll(`SELECT count(*)::BIGINT AS n FROM read_parquet('${file}')`)).getRowObjectsJS()[0]!.n));
    expect(rows).toBe(expected);
  }, 60_000);
});
