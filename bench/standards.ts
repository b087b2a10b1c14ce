// npm run bench:standards [-- --reports 2500000 --days 365 --quick --baseline-cli <dist/src/main/cli.js of another build>]
// The standards' figures on the benchmark's synthetic archive (ending today): the whole year of
// OGC API – Features items pulled through GDAL's OAPIF driver (ogr2ogr, time and
// features a second), and the year's GeoParquet answer (time and size; with
// --baseline-cli, the same answer from another build, e.g. the release before GeoParquet).
import { execFile } from 'node:child_process';
import fsp from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { CLI, startServer } from './server.js';
import { defaultBoundaries } from '../src/boundaries/defaultBoundaries.js';
import { BoundaryRepository } from '../src/boundaries/repository.js';
import { FileObjectStore } from '../src/store/fileStore.js';
import { buildSyntheticArchive } from './synthetic.js';

const DAY_MS = 86_400_000;

const { values: args } = parseArgs({
  options: {
    reports: { type: 'string', default: '2500000' },
    days: { type: 'string', default: '365' },
    quick: { type: 'boolean', default: false },
    'baseline-cli': { type: 'string' },
  },
});
const REPORTS = args.quick ? 50_000 : Number(args.reports);
const DAYS = args.quick ? 30 : Number(args.days);
const END_MS = Math.floor(Date.now() / DAY_MS) * DAY_MS - 1;
const START_MS = END_MS + 1 - DAYS * DAY_MS;

const log = (line: string) => process.stderr.write(`[bench:standards] ${line}\n`);
const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z').replace('.999Z', 'Z');

function run(cmd: string, argv: string[], env: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, argv, { env: { ...process.env, ...env }, maxBuffer: 1 << 26 }, (err, stdout, stderr) => (err ? reject(new Error(`${cmd}: ${String(err)} ${stderr}`)) : resolve(stdout)));
  });
}

function timedGet(url: string): Promise<{ ms: number; bytes: number; status: number }> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers: { 'User-Agent': 'flood-bench/1.0', 'Accept-Encoding': 'identity' } }, (res) => {
        let bytes = 0;
        res.on('data', (c: Buffer) => (bytes += c.byteLength));
        res.on('end', () => resolve({ ms: performance.now() - t0, bytes, status: res.statusCode ?? 0 }));
        res.on('error', reject);
      })
      .on('error', reject);
  });
}

/** The window's Parquet answer, three times: each is assembled anew. */
async function parquetRows(url: string, label: string): Promise<Record<string, string | number>> {
  const q = `${url}/reports/archive?start=${iso(START_MS)}&end=${iso(END_MS)}&format=parquet`;
  const times: number[] = [];
  let bytes = 0;
  for (let i = 0; i < 3; i++) {
    const r = await timedGet(q);
    if (r.status !== 200) throw new Error(`parquet answered ${r.status}`);
    times.push(r.ms);
    bytes = r.bytes;
  }
  times.sort((a, b) => a - b);
  return { answer: label, 'MB': Math.round(bytes / 1e5) / 10, 'bytes/report': Math.round((bytes / REPORTS) * 10) / 10, 'p50 s': Math.round(times[1]! / 100) / 10, 'min s': Math.round(times[0]! / 100) / 10 };
}

async function main(): Promise<void> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'flood-bench-standards-'));
  const dataDir = path.join(dir, 'data');
  const storeDir = path.join(dataDir, 'store');
  await fsp.mkdir(storeDir, { recursive: true });
  const boundaries = await defaultBoundaries();
  const { version } = await new BoundaryRepository(new FileObjectStore(storeDir), 0).publish(boundaries);
  log(`building ${REPORTS.toLocaleString()} reports over ${DAYS} days ending ${iso(END_MS)} …`);
  await buildSyntheticArchive({ storeDir, reports: REPORTS, startMs: START_MS, days: DAYS, boundaries, boundaryVersion: version });
  log('compacting …');
  await run(process.execPath, [CLI, 'compact', '--from', iso(START_MS).slice(0, 10), '--to', iso(END_MS).slice(0, 10), '--json'], { DATA_DIR: dataDir, LOG_LEVEL: 'warn' });

  const env = { DATA_DIR: dataDir, RATE_LIMIT_READ_PER_MINUTE: '100000000' };
  const server = await startServer(env, { apiKey: 'bench-key-0123456789abcdef' });
  const rows: Record<string, string | number>[] = [];
  try {
    log('ogr2ogr of the whole collection through the OAPIF driver …');
    const out = path.join(dir, 'reports.geojsonl');
    const t0 = performance.now();
    await run('ogr2ogr', ['-f', 'GeoJSONSeq', out, `OAPIF:${server.url}/ogc`, 'reports', '-oo', 'PAGE_SIZE=10000'], { GDAL_HTTP_TIMEOUT: '300' });
    const seconds = (performance.now() - t0) / 1000;
    // One feature a line; the file of a year is larger than a JS string can hold.
    const features = Number((await run('wc', ['-l', out])).trim().split(/\s+/)[0]);
    await fsp.rm(out, { force: true });
    rows.push({ scenario: `OGC items of ${DAYS} days via GDAL ogr2ogr (PAGE_SIZE=10000)`, features, 's': Math.round(seconds * 10) / 10, 'features/s': Math.round(features / seconds) });
    rows.push({ scenario: 'GeoParquet answer', ...(await parquetRows(server.url, 'GeoParquet (this build)')) });
  } finally {
    await server.stop();
  }
  if (args['baseline-cli']) {
    const baseline = await startServer({ ...env, DATA_DIR: path.join(dir, 'baseline-data'), STORAGE_URL: `file://${storeDir}` }, { cli: path.resolve(args['baseline-cli']), apiKey: 'bench-key-0123456789abcdef' });
    try {
      rows.push({ scenario: 'Parquet answer', ...(await parquetRows(baseline.url, `baseline build (${args['baseline-cli']})`)) });
    } finally {
      await baseline.stop();
    }
  }
  console.log(JSON.stringify({ reports: REPORTS, days: DAYS, rows }, null, 2));
  await fsp.rm(dir, { recursive: true, force: true });
}

await main();
