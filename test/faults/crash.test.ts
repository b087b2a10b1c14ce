// kill -9 at random moments, as a crashing host or an OOM killer does: the compiled CLI's
// processes on one DATA_DIR, a client posting reports and retrying the same body on any error,
// each process restarted after its crash as a supervisor would. Afterwards, with no operator
// action, every acknowledged report is archived exactly once, with the version first accepted.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterEach, describe, expect, it } from 'vitest';
import { API_KEY, eventually, report, tempDir, pkeyOf } from '../support/env.js';
import { freePort } from '../support/net.js';
import { CLI, runCli } from '../support/cli.js';

const REPORTS = 1_200;
const MIN_KILLS = 6;
const MAX_REPORTS = 30_000;
const DAY = Date.UTC(2026, 10, 20); // a closed day, so compaction takes all of it

interface Supervised {
  name: string;
  child?: ChildProcess;
  /** Whether the current process has started (a crash is a crash of a running process). */
  up: boolean;
  crashes: number;
  output: string;
  /** Stops restarting and ends the process. */
  stop(): Promise<void>;
}

const running: Supervised[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => p.stop()));
});

/** Runs `flood-archive <command>` and starts it again whenever it dies, as systemd or ECS would. */
function supervise(command: string, env: Record<string, string>): Supervised {
  let stopping = false;
  const p: Supervised = {
    name: command,
    up: false,
    crashes: 0,
    output: '',
    async stop() {
      stopping = true;
      const child = p.child;
      if (!child || child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
  const launch = () => {
    // Info level for the worker only: its "started" line says when it runs.
    const level = command === 'worker' ? { LOG_LEVEL: 'info' } : {};
    const child = spawn(process.execPath, [CLI, command], { env: { ...env, ...level }, stdio: ['ignore', 'pipe', 'pipe'] });
    p.child = child;
    p.up = false;
    const keep = (d: Buffer) => {
      const text = d.toString();
      if (/listening on|"msg":"started"/.test(text)) p.up = true;
      p.output = (p.output + text).slice(-20_000);
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    child.once('exit', () => {
      if (!stopping) setTimeout(launch, 100 + Math.random() * 200);
    });
  };
  launch();
  running.push(p);
  return p;
}

/** SIGKILLs one of the running processes every 0.5–2 s until `until` settles. */
async function killAtRandom(targets: Supervised[], until: Promise<unknown>): Promise<void> {
  let done = false;
  until.then(
    () => (done = true),
    () => (done = true),
  );
  while (!done) {
    await new Promise((r) => setTimeout(r, 500 + Math.random() * 1500));
    if (done) break;
    const up = targets.filter((t) => t.up && t.child && t.child.exitCode === null && t.child.signalCode === null);
    const target = up[Math.floor(Math.random() * up.length)];
    if (target) {
      target.up = false;
      target.child!.kill('SIGKILL');
      target.crashes += 1;
    }
  }
}

/**
 * Posts reports with new post_ids while `more(posted)` says so, each retried with the same body
 * on any error or 5xx; returns the post_ids sent and those acknowledged.
 */
async function postWhile(url: string, more: (posted: number) => boolean, concurrency = 8): Promise<{ ids: number[]; acked: Set<number> }> {
  const acked = new Set<number>();
  const ids: number[] = [];
  const one = async (id: number) => {
    const body = JSON.stringify(reportOf(id, 'first'));
    const giveUpAt = Date.now() + 120_000;
    for (;;) {
      try {
        const res = await fetch(`${url}/feeds/partner`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', 'X-Api-Key': API_KEY },
          body,
          signal: AbortSignal.timeout(10_000),
        });
        await res.arrayBuffer();
        if (res.status === 201 || res.status === 200) {
          acked.add(id);
          return;
        }
        // Only unavailability is retried; anything else is a failure of the test.
        if (res.status !== 503 && res.status !== 502) throw new Error(`post ${id}: unexpected ${res.status}`);
      } catch (err) {
        if (err instanceof Error && err.message.startsWith('post ')) throw err;
      }
      if (Date.now() > giveUpAt) throw new Error(`post ${id}: never acknowledged in 120 s`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (more(ids.length)) {
        const id = 1_000_000 + ids.length;
        ids.push(id);
        await one(id);
      }
    }),
  );
  return { ids, acked };
}

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
    RATE_LIMIT_FEED_PER_MINUTE: '1000000',
    LOG_LEVEL: 'warn',
  };
  const processes = commands.map((c) => supervise(c, env));
  const diagnose = () => processes.map((p) => `--- ${p.name} (${p.crashes} kills)\n${p.output.slice(-3000)}`).join('\n');
  await eventually(() => fetch(`${url}/health`).then((r) => (r.ok ? true : undefined)), 30_000, 'the API to listen');

  // At least REPORTS reports, and as many more as it takes for MIN_KILLS crashes to happen
  // while posting goes on (a fast machine posts REPORTS in a few seconds).
  const kills = () => processes.reduce((n, p) => n + p.crashes, 0);
  const posting = postWhile(url, (posted) => posted < MAX_REPORTS && (posted < REPORTS || kills() < MIN_KILLS));
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
  // killed worker held come back after their visibility timeout).
  const titles = await eventually(
    async () => {
      const got = await archivedTitles(url);
      return got.size === ids.length ? got : undefined;
    },
    120_000,
    'every acknowledged report in the archive',
  ).catch((err) => {
    throw new Error(`${String(err)}\n${diagnose()}`);
  });
  for (const id of ids) expect(titles.get(pkeyOf(id))).toEqual([`first ${id}`]);

  await Promise.all(processes.map((p) => p.stop()));
  const verified = await runCli(['verify', '--from', '2026-11-20', '--to', '2026-11-20'], env);
  expect(verified.code, verified.stdout + verified.stderr).toBe(0);
  // Compaction leaves exactly one stored row per report.
  const compacted = await runCli(['compact'], env);
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
