// Bulk import figures (`--only bulk`): an import into an empty data dir until every report is
// queryable, beside DuckDB turning the same NDJSON file into one Parquet file in the same run;
// the benchmark year in time order and shuffled, with the import's peak RSS; a small import on
// the object-store ledger (the S3 emulator); and live posts at a fixed rate while an import runs
// beside `all` on the same data dir.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { DuckDBInstance } from '@duckdb/node-api';
import { defaultBoundaries } from '../src/boundaries/defaultBoundaries.js';
import { footprint } from './footprint.js';
import { postgresLoad } from './postgres.js';
import { reprocessRows, type BoundaryFolder } from './reprocess.js';
import { cliChild, cliMeasured, startServer } from './server.js';
import { pointPool, prng } from './synthetic.js';

type Row = Record<string, string | number>;

const DAY_MS = 86_400_000;
const TITLES = ['Baha sa kalsada', 'Flooded street', 'Hanggang tuhod', 'Knee-deep water', 'Hindi madaanan'];
const TEXTS = [
  'Hanggang tuhod ang tubig sa kanto, hindi madaanan ng maliit na sasakyan.',
  'Water up to the knee near the school; tricycles turned back.',
  'Mabilis ang agos sa ilalim ng tulay, lumalalim pa.',
  '',
];

/**
 * Writes `n` partner bodies over the `days` days before `endMs`, points inside the shipped
 * barangays: in time order, or with times (and so post_ids' order) drawn at random.
 */
export async function writeYear(file: string, n: number, days: number, endMs: number, order: 'time' | 'random', seed = 11): Promise<void> {
  const random = prng(seed);
  const points = pointPool(await defaultBoundaries(), 20_000, random);
  const startMs = endMs - days * DAY_MS;
  const out = fs.createWriteStream(file);
  // Random order: each line's time at random, post_ids shuffled with them (a merged export).
  const ids = Uint32Array.from({ length: n }, (_, i) => i);
  if (order === 'random') {
    for (let i = n - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [ids[i], ids[j]] = [ids[j]!, ids[i]!];
    }
  }
  for (let i = 0; i < n; i++) {
    const id = ids[i]!;
    const p = points[id % points.length]!;
    const line = JSON.stringify({
      post_id: 5_000_000 + id,
      created_at: new Date(startMs + Math.floor((id / n) * days * DAY_MS)).toISOString(),
      partner_city: p.city === 'PH-PG' ? 'Pampanga' : 'Quezon City',
      disaster_type: 'flood',
      location: { lat: p.lat, lng: p.lng },
      title: TITLES[id % TITLES.length],
      text: TEXTS[id % TEXTS.length],
    });
    if (!out.write(`${line}\n`)) await new Promise<void>((resolve) => out.once('drain', () => resolve()));
  }
  await new Promise<void>((resolve, reject) => {
    out.on('error', reject);
    out.end(() => resolve());
  });
}

/** Seconds DuckDB takes to turn the NDJSON file into one zstd Parquet file (a fresh in-memory instance). */
async function duckdbSeconds(file: string, out: string): Promise<number> {
  const instance = await DuckDBInstance.create(':memory:');
  const conn = await instance.connect();
  try {
    const t = performance.now();
    await conn.run(`COPY (SELECT * FROM read_json_auto('${file}')) TO '${out}' (FORMAT parquet, COMPRESSION zstd)`);
    return (performance.now() - t) / 1000;
  } finally {
    conn.closeSync();
    instance.closeSync();
    await fsp.rm(out, { force: true });
  }
}

interface Imported {
  wall: number;
  queryable: number;
  rss: number;
  seconds: { reading: number; accepting: number; archiving: number; readyTexts: number };
  accepted: number;
  parts: number;
}

/** `import --file` as a child process into `env`'s data dir: its wall time, phases and peak RSS. */
async function runImport(file: string, env: Record<string, string>): Promise<Imported> {
  const { result, seconds: wall, rssMb: rss } = await cliMeasured(['import', '--file', file, '--restart'], env);
  const imported = result as unknown as Omit<Imported, 'wall' | 'queryable' | 'rss'>;
  // Queryable once archiving ends: what follows is the ready texts (the same answers, faster).
  return { ...imported, wall, queryable: wall - imported.seconds.readyTexts, rss };
}

const r1 = (x: number) => Math.round(x * 10) / 10;

function importRow(label: string, n: number, imported: Imported, duckdb?: number): Row {
  return {
    file: label,
    reports: n,
    ...(duckdb !== undefined && { 'DuckDB NDJSON→Parquet s': r1(duckdb) }),
    'until queryable s': r1(imported.queryable),
    ...(duckdb !== undefined && { 'ratio': r1(imported.queryable / duckdb) }),
    'reading s': imported.seconds.reading,
    'accepting s': imported.seconds.accepting,
    'archiving s': imported.seconds.archiving,
    'ready texts s': imported.seconds.readyTexts,
    'total s': r1(imported.wall),
    parts: imported.parts,
    'peak RSS MB': Math.round(imported.rss),
  };
}

export interface BulkOptions {
  /** Reports of the spread-out file measured against DuckDB (300,000). */
  spread: number;
  /** Reports of the benchmark year (2,500,000). */
  year: number;
  /** Reports imported on the S3 emulator. */
  s3: number;
  /** Live posts a second while an import runs, and for how many seconds. */
  liveRate: number;
  liveSeconds: number;
  /** The boundary sets the imported year is reprocessed to, in turn (after its import in time order). */
  reprocessSets: readonly BoundaryFolder[];
}

export async function bulkScenario(options: BulkOptions, log: (line: string) => void): Promise<{ scenario: string; rows: Row[] }[]> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'flood-bench-bulk-'));
  const results: { scenario: string; rows: Row[] }[] = [];
  const endMs = Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate());
  const base = { LOG_LEVEL: 'warn' };
  try {
    // The spread-out file, against DuckDB in the same run.
    const spread = path.join(dir, 'spread.ndjson');
    await writeYear(spread, options.spread, 365, endMs, 'random');
    const duck = await duckdbSeconds(spread, path.join(dir, 'duck.parquet'));
    log(`bulk: DuckDB ${r1(duck)} s for ${options.spread}`);
    const spreadImport = await runImport(spread, { ...base, DATA_DIR: path.join(dir, 'data-spread') });
    results.push({ scenario: 'bulk import of a file spread over the last year (random order) into an empty data dir, beside DuckDB on the same file', rows: [importRow('spread over the last year, random order', options.spread, spreadImport, duck)] });
    const rows: Row[] = [];
    const storage: { scenario: string; rows: Row[] }[] = [];
    const reprocessed: { scenario: string; rows: Row[] }[] = [];

    // The benchmark year, in time order and shuffled.
    for (const order of ['time', 'random'] as const) {
      const file = path.join(dir, `year-${order}.ndjson`);
      await writeYear(file, options.year, 365, endMs, order);
      const dataDir = path.join(dir, `data-year-${order}`);
      const postgres = await postgresLoad(file);
      const imported = await runImport(file, { ...base, DATA_DIR: dataDir });
      log(`bulk: year in ${order} order, queryable after ${r1(imported.queryable)} s (PostgreSQL: ${postgres === undefined ? 'not installed' : `${r1(postgres.seconds)} s`})`);
      rows.push({ ...importRow(`the benchmark year, ${order === 'time' ? 'in time order' : 'shuffled'}`, options.year, imported), 'PostgreSQL load s': postgres === undefined ? 'not installed' : r1(postgres.seconds) });
      // What the data dir holds once the import is done, beside PostgreSQL's table and indexes.
      const stored = await footprint(dataDir, options.year);
      if (postgres) stored.push({ store: 'PostgreSQL: table, indexes and TOAST', reports: options.year, MB: Math.round(postgres.bytes / 1e5) / 10, 'bytes/report': Math.round(postgres.bytes / options.year) });
      storage.push({ scenario: `storage after importing the benchmark year (${order === 'time' ? 'in time order' : 'shuffled'}), by store`, rows: stored });
      if (order === 'time') {
        // The imported year (its points in the shipped two cities) re-tagged after each set is published.
        const retagged = await reprocessRows(dataDir, endMs - 365 * DAY_MS, endMs - 1, options.reprocessSets, base);
        log(`bulk: the imported year reprocessed in ${retagged.map((row) => `${row.s} s (${row.boundaries})`).join(', ')}`);
        reprocessed.push({ scenario: 'reprocess the imported year (in time order) after publishing a boundary set', rows: retagged });
      }
      await fsp.rm(dataDir, { recursive: true, force: true });
      await fsp.rm(file, { force: true });
    }
    results.push({ scenario: 'bulk import into an empty data dir (embedded), until every report is queryable', rows }, ...storage, ...reprocessed);

    // The object-store ledger, on the S3 emulator.
    const { startFauxqs } = await import('fauxqs');
    const emulator = await startFauxqs({ port: 0, logger: false });
    try {
      const s3Env = {
        ...base,
        DATA_DIR: path.join(dir, 'data-s3'),
        STORAGE_URL: 's3://flood-bulk/',
        QUEUE_URL: `http://sqs.us-east-1.localhost:${emulator.port}/000000000000/flood-bulk`,
        AWS_ENDPOINT_URL: emulator.address,
        AWS_ACCESS_KEY_ID: 'bench',
        AWS_SECRET_ACCESS_KEY: 'bench',
      };
      await cliChild(['bootstrap'], s3Env).result.catch(() => undefined);
      const small = path.join(dir, 'small.ndjson');
      await writeYear(small, options.s3, 365, endMs, 'random', 5);
      const onS3 = await runImport(small, s3Env);
      results.push({ scenario: 'bulk import on the S3 emulator (object-store ledger: two writes a report, its lookups by listing)', rows: [importRow('spread over the last year, random order', options.s3, onS3)] });
    } finally {
      await emulator.stop();
    }

    // Live posts beside an import into a running `all`.
    const liveDir = path.join(dir, 'data-live');
    const key = 'bench-live-key-0123456789';
    const server = await startServer({ ...base, DATA_DIR: liveDir, RATE_LIMIT_FEED_PER_MINUTE: '100000000' }, { apiKey: key });
    try {
      const importing = runImport(spread, { ...base, DATA_DIR: liveDir });
      // Posts start once the import is under way.
      await new Promise((r) => setTimeout(r, 1_000));
      const latencies: number[] = [];
      const statuses = new Map<number, number>();
      let id = 9_000_000;
      await new Promise<void>((resolve, reject) => {
        const instance = autocannon(
          {
            url: `${server.url}/feeds/partner`,
            connections: 16,
            overallRate: options.liveRate,
            duration: options.liveSeconds,
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-api-key': key },
            requests: [{ setupRequest: (request) => ({ ...request, body: JSON.stringify({ post_id: id++, created_at: new Date().toISOString(), partner_city: 'Quezon City', disaster_type: 'flood', location: { lat: 14.6516, lng: 121.0497 }, title: 'live' }) }) }],
          },
          (err) => (err ? reject(err) : resolve()),
        );
        instance.on('response', (_client, status, _bytes, ms) => {
          latencies.push(ms);
          statuses.set(status, (statuses.get(status) ?? 0) + 1);
        });
      });
      const imported = await importing;
      latencies.sort((a, b) => a - b);
      const q = (p: number) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))]! * 10) / 10;
      results.push({
        scenario: `live posts at ${options.liveRate}/s beside an import of ${options.spread} into a running all`,
        rows: [
          {
            posts: latencies.length,
            '201': statuses.get(201) ?? 0,
            other: latencies.length - (statuses.get(201) ?? 0),
            'p50 ms': q(0.5),
            'p99 ms': q(0.99),
            'max ms': q(1 - 1e-9),
            'import until queryable s': r1(imported.queryable),
          },
        ],
      });
    } finally {
      await server.stop();
    }
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
  return results;
}
