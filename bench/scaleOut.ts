// Past one machine, under faults: API processes and workers on one S3 bucket and SQS queue
// (moto_server: the real protocols, If-None-Match: * enforced), two schedulers whose runs the
// store's tick keys and leases decide, a partner posting round-robin across the APIs and retrying
// the same body on any error, SIGKILLs of random APIs and workers with restarts, and a visibility
// timeout short enough that a message comes back to another worker while its first receiver may
// still be flushing. The run gathers what happened; test/faults/scaleOut.test.ts asserts on it at
// a small size, `npm run bench:faults -- --only scaleout` prints it at a larger one.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { GetObjectCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { DuckDBInstance } from '@duckdb/node-api';
import { deadLetterQueueName } from '../src/queue/settings.js';
import { emulatorEnv, type Emulator } from './moto.js';
import { freePort, runCli } from './server.js';
import { killAtRandom, postWhile, supervise, type Supervised } from './supervision.js';

/** What the run needs of an emulator (moto_server: fauxqs does not enforce If-None-Match). */
type AwsEndpoint = Pick<Emulator, 'endpoint' | 's3' | 'sqs' | 'queueUrl'>;

export interface ScaleOutOptions {
  /** Reports posted at least; more while fewer than `minKills` kills have happened. */
  reports: number;
  minKills: number;
  /** A kill every `killEveryMs` to 4 × `killEveryMs` (0.5–2 s by default). */
  killEveryMs?: number;
  apis: number;
  workers: number;
  apiKey: string;
  /** Any report with `post_id` and `title` set (its time must fall on 2026-11-19, UTC). */
  reportOf(postId: number, title: string): Record<string, unknown>;
}

export interface ScaleOutRun {
  /** The post_ids sent, and those acknowledged (201 or 200). */
  ids: number[];
  acked: Set<number>;
  kills: number;
  /** From the last kill until every acknowledged report was answered. */
  convergedSeconds: number;
  seconds: number;
  /** The day's answer in each format: pkey → the titles of its copies. */
  answers: Record<'ndjson' | 'geojson' | 'csv', Map<string, string[]>>;
  /** Statuses of a second version of the first 20 reports, posted after the first was acknowledged. */
  secondVersions: number[];
  verify: { code: number | null; output: string };
  /** Stored rows per pkey before and after `compact` (no read-time de-duplication). */
  storedBefore: Map<string, number>;
  storedAfter: Map<string, number>;
  /** Messages in the dead-letter queue at the end: received five times (their reports then come back through reconciliation). */
  deadLettered: number;
  compact: { code: number | null; output: string };
  /** Change logs and ready texts that failed to parse. */
  broken: string[];
  /** Reconciliation ticks won in the store, and the schedulers' runs and skips of them. */
  ticks: number;
  ran: number;
  skipped: number;
  /** Ticks run or skipped more than once, neither run nor skipped, and runs or skips of no tick won in the store. */
  tickRuns: { twice: string[]; neither: string[]; withoutTick: string[] };
  /** Each process's last output, for a failure's message. */
  diagnosis(): string;
}

const DAY_QUERY = 'start=2026-11-19T00:00:00Z&end=2026-11-19T23:59:59Z';

export async function scaleOutRun(aws: AwsEndpoint, options: ScaleOutOptions, tmp = os.tmpdir()): Promise<ScaleOutRun> {
  const id = randomBytes(4).toString('hex');
  // The bucket and dead-letter queue emulatorEnv and bootstrap name.
  const bucket = `archive-${id}`;
  const deadLetterQueue = aws.queueUrl(deadLetterQueueName(`reports-${id}`));
  const dir = await fs.mkdtemp(path.join(tmp, 'flood-scale-out-'));
  const dataDir = async (name: string) => fs.mkdtemp(path.join(dir, `${name}-`));
  const shared = {
    ...emulatorEnv(aws, id),
    API_KEYS: options.apiKey,
    FLUSH_INTERVAL_SECONDS: '1',
    RATE_LIMIT_FEED_PER_MINUTE: '1000000',
    RATE_LIMIT_READ_PER_MINUTE: '1000000',
    // Every five seconds, so the run sees many ticks; the other jobs not within it.
    SCHEDULE_RECONCILE: '*/5 * * * * *',
    // A report whose API died between accepting and enqueueing it is sent again 10 s on, not 60.
    RECONCILE_AFTER_SECONDS: '10',
    // Shorter than a flush under load: a message comes back to another worker while its first
    // receiver may still be writing it (each receive asks for this, whatever the queue's default).
    QUEUE_VISIBILITY_SECONDS: '2',
    SCHEDULE_COMPACT: '0 0 1 1 *',
    SCHEDULE_VERIFY: '0 0 1 1 *',
    SCHEDULE_RELEASE: '0 0 1 1 *',
    // moto is one Python process: on a busy machine it can take seconds to accept a connection
    // (verify's sixteen at once, just after the processes stopped, timed out at the default 1 s)
    // or to answer.
    AWS_CONNECT_TIMEOUT_SECONDS: '10',
    AWS_REQUEST_TIMEOUT_SECONDS: '30',
    LOG_LEVEL: 'warn',
  };
  const cli = async (args: string[]) => {
    // Its compaction leaves one copy of each report at once (no answer in flight to wait for).
    const { code, stdout, stderr } = await runCli(args, { ...shared, DATA_DIR: await dataDir('cli'), RETIRE_GRACE_SECONDS: '0' });
    return { code, output: stdout + stderr };
  };
  const booted = await cli(['bootstrap']);
  if (booted.code !== 0) throw new Error(`bootstrap failed: ${booted.output}`);

  const running: Supervised[] = [];
  const urls: string[] = [];
  try {
    const apis: Supervised[] = [];
    for (let i = 0; i < options.apis; i++) {
      const port = await freePort();
      urls.push(`http://127.0.0.1:${port}`);
      apis.push(supervise('serve', { ...shared, DATA_DIR: await dataDir('api'), PORT: String(port) }, running, { name: `api ${i}` }));
    }
    const workers: Supervised[] = [];
    for (let i = 0; i < options.workers; i++) workers.push(supervise('worker', { ...shared, DATA_DIR: await dataDir('worker') }, running, { name: `worker ${i}` }));
    const schedulers: Supervised[] = [];
    for (let i = 0; i < 2; i++) schedulers.push(supervise('scheduler', { ...shared, DATA_DIR: await dataDir('scheduler') }, running, { name: `scheduler ${i}`, infoLogs: true }));
    const diagnosis = () => running.map((p) => `--- ${p.name} (${p.crashes} kills)\n${p.output.slice(-2000)}`).join('\n');
    for (const url of urls) await until(() => fetch(`${url}/health`).then((r) => r.ok, () => false), 60_000, `${url} to listen`);

    const killable = [...apis, ...workers];
    const kills = () => killable.reduce((n, p) => n + p.crashes, 0);
    const started = Date.now();
    const posting = postWhile(urls, options.apiKey, (posted) => posted < options.reports * 10 && (posted < options.reports || kills() < options.minKills), (n) => options.reportOf(n, `first ${n}`));
    await killAtRandom(killable, posting, options.killEveryMs);
    const { ids, acked } = await posting;
    const lastKill = Math.max(...killable.map((p) => p.lastKillMs));

    // No operator action: restarted workers and redelivered messages finish the work.
    let ndjson: Map<string, string[]> | undefined;
    await until(async () => (ndjson = await answered(urls, 'ndjson'))?.size === acked.size, 300_000, 'every acknowledged report in the archive').catch((err: unknown) => {
      throw new Error(`${String(err)}\n${diagnosis()}`);
    });
    const convergedSeconds = (Date.now() - lastKill) / 1000;
    const answers = { ndjson: ndjson!, geojson: (await answered(urls, 'geojson'))!, csv: (await answered(urls, 'csv'))! };
    const secondVersions: number[] = [];
    for (const n of ids.slice(0, 20)) {
      const res = await fetch(`${urls[n % urls.length]}/feeds/partner`, { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Api-Key': options.apiKey }, body: JSON.stringify(options.reportOf(n, `second ${n}`)) });
      await res.arrayBuffer();
      secondVersions.push(res.status);
    }
    await Promise.all(running.map((p) => p.stop()));

    const dead = await aws.sqs.send(new GetQueueAttributesCommand({ QueueUrl: deadLetterQueue, AttributeNames: ['ApproximateNumberOfMessages'] }));
    const deadLettered = Number(dead.Attributes?.ApproximateNumberOfMessages ?? 0);
    const verify = await cli(['verify', '--from', '2026-11-19', '--to', '2026-11-19']);
    const downloaded = await dataDir('store');
    const storedBefore = await storedCopies(await download(aws.s3, bucket, 'flood/reports/v1/', downloaded));
    const broken: string[] = [];
    for (const file of await download(aws.s3, bucket, 'flood/changes/', downloaded)) {
      try {
        const body = await fs.readFile(file);
        JSON.parse((file.endsWith('.gz') ? gunzipSync(body) : body).toString('utf8'));
      } catch {
        broken.push(file);
      }
    }
    // Ready texts: the index line, then every hour's sections, each a gzip member whose CRC holds.
    for (const file of await download(aws.s3, bucket, 'flood/ready/', downloaded)) {
      const text = await fs.readFile(file);
      try {
        const eol = text.indexOf(10);
        const index = JSON.parse(text.subarray(0, eol).toString()) as { version?: number; hours: Record<string, [number, number]>[] };
        if (!(index.version! > 0)) broken.push(file);
        for (const hour of index.hours) for (const s of ['geojson', 'topojson', 'csv', 'arrow']) gunzipSync(text.subarray(eol + 1 + hour[s]![0], eol + 1 + hour[s]![1]));
      } catch {
        broken.push(file);
      }
    }
    const compact = await cli(['compact']);
    const storedAfter = await storedCopies(await download(aws.s3, bucket, 'flood/reports/v1/', await dataDir('compacted')));
    const tickFiles = await download(aws.s3, bucket, 'flood/jobs/runs/reconciliation/', downloaded);
    const lines = schedulers.flatMap((s) => s.output.split('\n')).filter((l) => l.includes('"job":"reconciliation"'));
    // Each tick by its name: its key in the store, and the log lines of its runs and skips.
    const tickSlots = new Set(tickFiles.map((f) => path.basename(f, '.json')));
    const logged = new Map<string, number>();
    for (const l of lines) {
      if (!/"msg":"job (finished|failed)"|skipping this tick/.test(l)) continue;
      const slot = (JSON.parse(l) as { slot?: string }).slot ?? '(no slot)';
      logged.set(slot, (logged.get(slot) ?? 0) + 1);
    }
    return {
      ids,
      acked,
      kills: kills(),
      convergedSeconds,
      seconds: (Date.now() - started) / 1000,
      answers,
      secondVersions,
      verify,
      storedBefore,
      storedAfter,
      deadLettered,
      compact,
      broken,
      ticks: tickSlots.size,
      ran: lines.filter((l) => /"msg":"job (finished|failed)"/.test(l)).length,
      skipped: lines.filter((l) => l.includes('skipping this tick')).length,
      tickRuns: {
        twice: [...logged].filter(([, n]) => n > 1).map(([slot]) => slot),
        neither: [...tickSlots].filter((slot) => !logged.has(slot)),
        withoutTick: [...logged.keys()].filter((slot) => !tickSlots.has(slot)),
      },
      diagnosis,
    };
  } finally {
    await Promise.all(running.map((p) => p.stop()));
    await fs.rm(dir, { recursive: true, force: true });
  }
}

async function until(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The day's answer in `format` from the first API that answers: pkey → titles (one per copy). */
async function answered(urls: readonly string[], format: 'ndjson' | 'geojson' | 'csv'): Promise<Map<string, string[]> | undefined> {
  for (const url of urls) {
    try {
      const res = await fetch(`${url}/reports/archive?${DAY_QUERY}&${format === 'geojson' ? 'geoformat=geojson' : `format=${format}`}`, { headers: { 'User-Agent': 'flood-bench/1.0' }, signal: AbortSignal.timeout(30_000) });
      if (res.status !== 200) continue;
      const text = await res.text();
      const rows: [string, string][] =
        format === 'ndjson'
          ? text
              .split('\n')
              .filter(Boolean)
              .map((l) => {
                const f = JSON.parse(l) as { properties: { pkey: string; title: string } };
                return [f.properties.pkey, f.properties.title];
              })
          : format === 'geojson'
            ? (JSON.parse(text) as { result: { features: { properties: { pkey: string; title: string } }[] } }).result.features.map((f) => [f.properties.pkey, f.properties.title])
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

/** pkey and title of each CSV row (the titles here hold no comma or quote). */
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
async function download(s3: S3Client, bucket: string, prefix: string, dir: string): Promise<string[]> {
  const files: string[] = [];
  let token: string | undefined;
  do {
    const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }));
    for (const { Key } of page.Contents ?? []) {
      const body = await (await s3.send(new GetObjectCommand({ Bucket: bucket, Key: Key! }))).Body!.transformToByteArray();
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
async function storedCopies(files: readonly string[]): Promise<Map<string, number>> {
  const parts = files.filter((f) => f.endsWith('.parquet'));
  if (parts.length === 0) return new Map();
  const duck = await DuckDBInstance.create(':memory:');
  const conn = await duck.connect();
  try {
    const list = parts.map((p) => `'${p.replace(/'/g, "''")}'`).join(', ');
    const rows = (await conn.runAndReadAll(`SELECT pkey, count(*)::INTEGER FROM read_parquet([${list}], hive_partitioning = false, union_by_name = true) GROUP BY pkey`)).getRowsJS() as [string, number][];
    return new Map(rows);
  } finally {
    conn.closeSync();
    duck.closeSync();
  }
}
