// kill -9 at random moments, as a crashing host or an OOM killer does: the compiled CLI's
// processes on one DATA_DIR, a client posting reports and retrying the same body on any error,
// each process restarted after its crash as a supervisor would. Afterwards, with no operator
// action, every acknowledged report is archived exactly once, with the version first accepted.
import fs from 'node:fs';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterEach, describe, expect, it } from 'vitest';
import { API_KEY, eventually, report, tempDir, pkeyOf } from '../support/env.js';
import { freePort } from '../support/net.js';
import { runCli } from '../support/cli.js';
import { killAtRandom, postWhile, supervise, type Supervised } from '../../bench/supervision.js';

const running: Supervised[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => p.stop()));
});

const REPORTS = 1_200;
const MIN_KILLS = 6;
const MAX_REPORTS = 30_000;
const DAY = Date.UTC(2026, 10, 20); // a closed day, so compaction takes all of it

function reportOf(id: number, version: string) {
  return report(id, {
    created_at: new Date(DAY + (id % 24) * 3_600_000 + (id % 60) * 1000).toISOString(),
    title: `${version} ${id}`,
  });
}

/** What a reader gets for the day: one feature per report, as the service answers. */
async function archivedTitles(url: string): Promise<Map<string, string[]>> {
  const res = await fetch(`${url}/reports/archive?start=2026-11-20T00:00:00Z&end=2026-11-20T23:59:59Z&format=ndjson`, {
    headers: { 'User-Agent': 'flood-tests/1.0' },
  });
  if (res.status !== 200) throw new Error(`archive answered ${res.status}`);
  const out = new Map<string, string[]>();
  for (const line of (await res.text()).split('\n')) {
    if (!line) continue;
    const f = JSON.parse(line);
    out.set(f.properties.pkey, [...(out.get(f.properties.pkey) ?? []), f.properties.title]);
  }
  return out;
}

/** Rows per pkey in the stored parts themselves (no read-time de-duplication). */
async function storedCopies(dataDir: string): Promise<Map<string, number>> {
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  try {
    const glob = path.join(dataDir, 'store/reports/v1/**/*.parquet');
    const reader = await conn.runAndReadAll(`SELECT pkey, count(*)::INTEGER AS n FROM read_parquet('${glob}', hive_partitioning = false) GROUP BY pkey`);
    return new Map(reader.getRowObjects().map((r) => [String(r.pkey), Number(r.n)]));
  } finally {
    conn.closeSync();
    db.closeSync();
  }
}

async function crashRun(commands: string[]): Promise<void> {
  const dataDir = await tempDir('flood-crash-');
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const env = {
    PATH: process.env.PATH ?? '',
    TZ: 'UTC',
    DATA_DIR: dataDir,
    PORT: String(port),
    API_KEYS: API_KEY,
    FLUSH_INTERVAL_SECONDS: '1',
    // A killed worker's messages come back 15 s on, and a report whose API died between accepting
    // and enqueueing it is sent again 10 s on (the defaults, 32 and 60 s, leave room for long
    // flushes and would make most of this test a wait). Not much less: processes killed every
    // 0.5–2 s each receive a message and die before flushing it, and its fifth receive would
    // send it to the dead letters, which only an operator's redrive brings back.
    QUEUE_VISIBILITY_SECONDS: '15',
    RECONCILE_AFTER_SECONDS: '10',
    RATE_LIMIT_FEED_PER_MINUTE: '1000000',
    LOG_LEVEL: 'warn',
  };
  const processes = commands.map((c) => supervise(c, env, running));
  const diagnose = () => processes.map((p) => `--- ${p.name} (${p.crashes} kills)\n${p.output.slice(-3000)}`).join('\n');
  await eventually(() => fetch(`${url}/health`).then((r) => (r.ok ? true : undefined)), 30_000, 'the API to listen');

  // At least REPORTS reports, and as many more as it takes for MIN_KILLS crashes to happen
  // while posting goes on (a fast machine posts REPORTS in a few seconds).
  const kills = () => processes.reduce((n, p) => n + p.crashes, 0);
  const posting = postWhile([url], API_KEY, (posted) => posted < MAX_REPORTS && (posted < REPORTS || kills() < MIN_KILLS), (id) => reportOf(id, 'first'));
  await killAtRandom(processes, posting);
  const { ids, acked } = await posting.catch((err: unknown) => {
    throw new Error(`${String(err)}\n${diagnose()}`);
  });
  expect(acked.size, diagnose()).toBe(ids.length);
  expect(kills()).toBeGreaterThanOrEqual(MIN_KILLS);

  // A second version of every report, after its first was acknowledged: never archived. (A kill
  // just as the posting ended may still have the API starting again.)
  await eventually(() => fetch(`${url}/health`).then((r) => (r.ok ? true : undefined)), 30_000, 'the API to listen again');
  for (const id of ids.slice(0, 50)) {
    const res = await fetch(`${url}/feeds/partner`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Api-Key': API_KEY },
      body: JSON.stringify(reportOf(id, 'second')),
    });
    expect(res.status).toBe(200);
  }

  // No operator action: the restarted processes finish the work on their own (messages a
  // killed worker held come back after their visibility timeout, maybe while another worker is
  // still flushing them).
  const titles = await eventually(
    async () => {
      const got = await archivedTitles(url);
      return got.size === ids.length ? got : undefined;
    },
    120_000,
    'every acknowledged report in the archive',
  ).catch(async (err) => {
    // How far it got, and whether the missing ones sit in the dead letters (five receives, each by a process killed before its flush).
    const got = await archivedTitles(url).catch(() => new Map<string, string[]>());
    const missing = ids.filter((id) => !got.has(pkeyOf(id)));
    const dead = await runCli(['dlq', 'list'], env).catch((e: unknown) => ({ stdout: String(e), stderr: '' }));
    throw new Error(`${String(err)}: ${got.size} of ${ids.length} archived, missing ${missing.slice(0, 10).join(', ')}${missing.length > 10 ? ', …' : ''}\ndlq list: ${(dead.stdout + dead.stderr).slice(0, 2000)}\n${diagnose()}`);
  });
  for (const id of ids) expect(titles.get(pkeyOf(id))).toEqual([`first ${id}`]);

  await Promise.all(processes.map((p) => p.stop()));
  const verified = await runCli(['verify', '--from', '2026-11-20', '--to', '2026-11-20'], env);
  expect(verified.code, verified.stdout + verified.stderr).toBe(0);
  // Compaction leaves exactly one stored row per report.
  const compacted = await runCli(['compact'], { ...env, RETIRE_GRACE_SECONDS: '0' });
  expect(compacted.code, compacted.stdout + compacted.stderr).toBe(0);
  const copies = await storedCopies(dataDir);
  expect(copies.size).toBe(ids.length);
  expect([...copies.values()].every((n) => n === 1)).toBe(true);
  fs.rmSync(dataDir, { recursive: true, force: true });
}

describe('kill -9 at random moments', () => {
  it('serve and worker as separate processes on one DATA_DIR: every acknowledged report archived once, first version', async () => {
    await crashRun(['serve', 'worker']);
  }, 360_000);

  it('all in one process: every acknowledged report archived once, first version', async () => {
    await crashRun(['all']);
  }, 360_000);
});
