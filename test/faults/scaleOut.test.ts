// Past one machine, under faults: three API processes and three workers on one S3 bucket and SQS
// queue (moto_server: the real protocols, If-None-Match: * enforced), two schedulers whose runs
// the store's tick keys and leases decide, a partner posting round-robin across the APIs and
// retrying the same body on any error, SIGKILLs of random APIs and workers with restarts, and a
// visibility timeout short enough that a message comes back to another worker while its first
// receiver may still be flushing. Afterwards, with no operator action: every acknowledged report
// archived exactly once with its first version, in every answer format and in verify; every
// stored part, sidecar and change log whole; every scheduled tick run at most once.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { GetObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { GetQueueUrlCommand, SetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, describe, expect, it } from 'vitest';
import { API_KEY, eventually, pkeyOf, report, tempDir } from '../support/env.js';
import type { Emulator } from '../support/fauxqs.js';
import { HAS_MOTO, MOTO_MISSING, motoEnv, startMoto } from '../support/moto.js';
import { freePort } from '../support/net.js';
import { runCli } from '../support/cli.js';
import { killAtRandom, postWhile, supervise, type Supervised } from './supervision.js';

/** Reports posted at least; more while fewer than MIN_KILLS kills have happened. */
const REPORTS = 500;
const MIN_KILLS = 6;
const MAX_REPORTS = 5_000;
const DAY = Date.UTC(2026, 10, 19);
const DAY_QUERY = 'start=2026-11-19T00:00:00Z&end=2026-11-19T23:59:59Z';
if (!HAS_MOTO) console.warn(MOTO_MISSING);

const running: Supervised[] = [];
let moto: Emulator | undefined;
afterAll(async () => {
  await Promise.all(running.splice(0).map((p) => p.stop()));
  await moto?.stop();
});

const reportOf = (id: number, version: string) => report(id, { created_at: new Date(DAY + (id % 24) * 3_600_000 + (id % 60) * 1000).toISOString(), title: `${version} ${id}` });

/** The day's answer in `format` from the first API that answers: pkey → titles (one per copy). */
async function answered(urls: readonly string[], format: 'ndjson' | 'geojson' | 'csv'): Promise<Map<string, string[]> | undefined> {
  for (const url of urls) {
    try {
      const res = await fetch(`${url}/reports/archive?${DAY_QUERY}&${format === 'geojson' ? 'geoformat=geojson' : `format=${format}`}`, { headers: { 'User-Agent': 'flood-tests/1.0' }, signal: AbortSignal.timeout(30_000) });
      if (res.status !== 200) continue;
      const text = await res.text();
      const rows: [string, string][] =
        format === 'ndjson'
          ? text.split('\n').filter(Boolean).map((l) => { const f = JSON.parse(l); return [f.properties.pkey, f.properties.title]; })
          : format === 'geojson'
            ? JSON.parse(text).result.features.map((f: any) => [f.properties.pkey, f.properties.title])
            : csvRows(text);
      const out = new Map<string, string[]>();
      for (const [pkey, title] of rows) out.set(pkey, [...(out.get(pkey) ?? []), title]);
      return out;
    } catch {
      // That API is down (killed a moment ago): the next one.
    }
  }
  return undefined;
}

/** pkey and title of each CSV row (titles here hold no comma or quote). */
function csvRows(text: string): [string, string][] {
  const [header, ...lines] = text.trim().split('\n');
  const columns = header!.split(',');
  const [pkeyAt, titleAt] = [columns.indexOf('pkey'), columns.indexOf('title')];
  return lines.map((line) => {
    const cells = line.split(',').map((c) => c.replace(/^"|"$/g, ''));
    return [cells[pkeyAt]!, cells[titleAt]!];
  });
}

/** Every object under `prefix` in the bucket, downloaded into `dir` (its key's path). */
async function download(em: Emulator, bucket: string, prefix: string, dir: string): Promise<string[]> {
  const files: string[] = [];
  let token: string | undefined;
  do {
    const page = await em.s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }));
    for (const { Key } of page.Contents ?? []) {
      const body = await (await em.s3.send(new GetObjectCommand({ Bucket: bucket, Key: Key! }))).Body!.transformToByteArray();
      const file = path.join(dir, Key!);
      await fs.mkdir(path.dirname(file), { recursive: true });
      await fs.writeFile(file, body);
      files.push(file);
    }
    token = page.NextContinuationToken;
  } while (token);
  return files;
}

/** Rows per pkey in the parts themselves (no read-time de-duplication); every file must read. */
async function storedCopies(parts: readonly string[]): Promise<Map<string, number>> {
  const duck = await DuckDBInstance.create(':memory:');
  const conn = await duck.connect();
  try {
    const list = parts.map((p) => `'${p}'`).join(', ');
    const rows = (await conn.runAndReadAll(`SELECT pkey, count(*)::INTEGER FROM read_parquet([${list}], hive_partitioning = false, union_by_name = true) GROUP BY pkey`)).getRowsJS() as [string, number][];
    return new Map(rows);
  } finally {
    conn.closeSync();
    duck.closeSync();
  }
}

describe.skipIf(!HAS_MOTO)('three APIs, three workers and two schedulers on S3 and SQS (moto), APIs and workers killed at random', () => {
  it('archives every acknowledged report exactly once with its first version, leaves nothing half-written, and runs each tick once', async () => {
    moto = await startMoto();
    const id = randomBytes(4).toString('hex');
    const bucket = `archive-${id}`;
    const shared = {
      ...motoEnv(moto, id),
      API_KEYS: API_KEY,
      FLUSH_INTERVAL_SECONDS: '1',
      RATE_LIMIT_FEED_PER_MINUTE: '1000000',
      RATE_LIMIT_READ_PER_MINUTE: '1000000',
      // Every five seconds, so the run sees many ticks; the other jobs not within it.
      SCHEDULE_RECONCILE: '*/5 * * * * *',
      SCHEDULE_COMPACT: '0 0 1 1 *',
      SCHEDULE_VERIFY: '0 0 1 1 *',
      SCHEDULE_RELEASE: '0 0 1 1 *',
      // moto is one Python process: on a busy two-core machine it can take seconds to accept a
      // connection (verify's sixteen at once, just after eight processes stopped, timed out at
      // the default 1 s) or to answer.
      AWS_CONNECT_TIMEOUT_SECONDS: '10',
      AWS_REQUEST_TIMEOUT_SECONDS: '30',
      LOG_LEVEL: 'warn',
    };
    const boot = await runCli(['bootstrap'], { ...shared, DATA_DIR: await tempDir() });
    expect(boot.code, boot.stdout + boot.stderr).toBe(0);
    // Shorter than a flush under load: a message comes back to another worker while its first
    // receiver may still be writing it.
    const { QueueUrl } = await moto.sqs.send(new GetQueueUrlCommand({ QueueName: `reports-${id}` }));
    await moto.sqs.send(new SetQueueAttributesCommand({ QueueUrl, Attributes: { VisibilityTimeout: '2' } }));

    const urls: string[] = [];
    const apis: Supervised[] = [];
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      urls.push(`http://127.0.0.1:${port}`);
      apis.push(supervise('serve', { ...shared, DATA_DIR: await tempDir(), PORT: String(port) }, running, { name: `api ${i}` }));
    }
    const workers = await Promise.all([0, 1, 2].map(async (i) => supervise('worker', { ...shared, DATA_DIR: await tempDir() }, running, { name: `worker ${i}` })));
    const schedulers = await Promise.all([0, 1].map(async (i) => supervise('scheduler', { ...shared, DATA_DIR: await tempDir() }, running, { name: `scheduler ${i}`, infoLogs: true })));
    const everyone = [...apis, ...workers, ...schedulers];
    const diagnose = () => everyone.map((p) => `--- ${p.name} (${p.crashes} kills)\n${p.output.slice(-2000)}`).join('\n');
    for (const url of urls) await eventually(() => fetch(`${url}/health`).then((r) => (r.ok ? true : undefined), () => undefined), 60_000, `${url} to listen`);

    const kills = () => [...apis, ...workers].reduce((n, p) => n + p.crashes, 0);
    const started = Date.now();
    const posting = postWhile(urls, (posted) => posted < MAX_REPORTS && (posted < REPORTS || kills() < MIN_KILLS), (n) => reportOf(n, 'first'));
    await killAtRandom([...apis, ...workers], posting);
    const { ids, acked } = await posting.catch((err: unknown) => {
      throw new Error(`${String(err)}\n${diagnose()}`);
    });
    expect(acked.size, diagnose()).toBe(ids.length);
    expect(kills()).toBeGreaterThanOrEqual(MIN_KILLS);
    const lastKill = Math.max(...[...apis, ...workers].map((p) => p.lastKillMs));

    // No operator action: restarted workers and the redelivered messages finish the work.
    const titles = await eventually(async () => {
      const got = await answered(urls, 'ndjson');
      return got && got.size === ids.length ? got : undefined;
    }, 240_000, 'every acknowledged report in the archive').catch((err) => {
      throw new Error(`${String(err)}\n${diagnose()}`);
    });
    const convergedSeconds = (Date.now() - lastKill) / 1000;
    for (const n of ids) expect(titles.get(pkeyOf(n))).toEqual([`first ${n}`]);
    for (const format of ['geojson', 'csv'] as const) {
      const got = (await answered(urls, format))!;
      expect(got.size, format).toBe(ids.length);
      for (const n of ids) expect(got.get(pkeyOf(n)), format).toEqual([`first ${n}`]);
    }
    // A second version of a report, after its first was acknowledged: not archived.
    for (const n of ids.slice(0, 20)) {
      const res = await fetch(`${urls[n % 3]}/feeds/partner`, { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Api-Key': API_KEY }, body: JSON.stringify(reportOf(n, 'second')) });
      await res.arrayBuffer();
      expect(res.status).toBe(200);
    }

    await Promise.all(everyone.map((p) => p.stop()));
    const env = { ...shared, DATA_DIR: await tempDir() };
    const verified = await runCli(['verify', '--from', '2026-11-19', '--to', '2026-11-19'], env);
    expect(verified.code, verified.stdout + verified.stderr).toBe(0);

    // Everything stored is whole: every part, sidecar and change log reads back.
    const dir = await tempDir();
    const parts = (await download(moto, bucket, 'flood/reports/v1/', dir)).filter((f) => f.endsWith('.parquet'));
    expect((await storedCopies(parts)).size).toBe(ids.length);
    for (const file of await download(moto, bucket, 'flood/changes/', dir)) JSON.parse(await fs.readFile(file, 'utf8'));
    for (const file of await download(moto, bucket, 'flood/ready/', dir)) {
      const text = await fs.readFile(file);
      expect(JSON.parse(text.subarray(0, text.indexOf(10)).toString()).version, file).toBeGreaterThan(0);
    }
    // Compaction leaves each report stored once, however many workers wrote it.
    const compacted = await runCli(['compact'], env);
    expect(compacted.code, compacted.stdout + compacted.stderr).toBe(0);
    const after = (await download(moto, bucket, 'flood/reports/v1/', await tempDir())).filter((f) => f.endsWith('.parquet'));
    const copies = await storedCopies(after);
    expect(copies.size).toBe(ids.length);
    expect([...copies.values()].every((n) => n === 1)).toBe(true);

    // Each reconciliation tick won by exactly one scheduler, and each won tick run or skipped once.
    const ticks = (await download(moto, bucket, 'flood/jobs/runs/reconciliation/', dir)).length;
    const lines = schedulers.flatMap((s) => s.output.split('\n')).filter((l) => l.includes('"job":"reconciliation"'));
    const ran = lines.filter((l) => /"msg":"job (finished|failed)"/.test(l)).length;
    const skipped = lines.filter((l) => l.includes('skipping this tick')).length;
    expect(ticks).toBeGreaterThanOrEqual(3);
    expect(ran + skipped).toBe(ticks);
    console.log(
      JSON.stringify({ scaleOut: { posted: ids.length, acknowledged: acked.size, archived: titles.size, duplicates: [...titles.values()].filter((t) => t.length > 1).length, kills: kills(), convergedSeconds, seconds: (Date.now() - started) / 1000, ticks, ran } }),
    );
  }, 900_000);
});
