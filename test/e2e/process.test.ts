// The real entry point, as `npm start` runs it: key generation, SIGTERM flush, bad config.
import { afterEach, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { getJson, postReport, report, tempDir } from '../support/env.js';
import { freePort } from '../support/net.js';

const MAIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../dist/src/main/flood-archive.cjs');
const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
});

function start(env: Record<string, string>): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, [MAIN, 'all'], {
    env: { PATH: process.env.PATH ?? '', TZ: 'UTC', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, output: () => out, exited };
}

async function waitFor(output: () => string, pattern: RegExp, ms = 20_000): Promise<RegExpMatchArray> {
  const deadline = Date.now() + ms;
  for (;;) {
    const m = pattern.exec(output());
    if (m) return m;
    if (Date.now() > deadline) throw new Error(`no ${pattern} in output:\n${output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('the service process', () => {
  it('creates an API key once (mode 0600), flushes buffered reports on SIGTERM, and serves them after a restart', async () => {
    // A DATA_DIR that does not exist yet: the service makes it.
    const dataDir = path.join(await tempDir(), 'data');
    const env = { DATA_DIR: dataDir, PORT: '0', FLUSH_INTERVAL_SECONDS: '600' };
    const first = start(env);
    const url = (await waitFor(first.output, /listening on (http:\/\/\S+)/))[1]!;
    const key = (await waitFor(first.output, /Partner API key \(created [^)]+\): (\S+)/))[1]!;
    // Keys, the ledger and the webhook secrets are the owner's alone, the databases' journals too.
    const mode = async (name: string) => (await fs.stat(path.join(dataDir, name))).mode & 0o777;
    expect(await mode('.')).toBe(0o700);
    for (const name of ['api-key', 'ledger.sqlite', 'ledger.sqlite-wal', 'ledger.sqlite-shm', 'events.sqlite', 'events.sqlite-wal', 'events.sqlite-shm']) {
      expect(await mode(name), name).toBe(0o600);
    }

    expect((await postReport(url, report(7), { key })).status).toBe(201);
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    const hour = path.join(dataDir, 'store/reports/v1/year=2026/month=11/day=21/hour=05');
    expect((await fs.readdir(hour)).filter((f) => f.endsWith('.parquet'))).toHaveLength(1);

    // A database an earlier release left readable by others is made private at the next start.
    await fs.chmod(path.join(dataDir, 'ledger.sqlite'), 0o644);
    const second = start(env);
    const url2 = (await waitFor(second.output, /listening on (http:\/\/\S+)/))[1]!;
    // The key is printed when it is created, never again: output ends up in logs.
    await waitFor(second.output, /Partner API key: in \S+api-key/);
    expect(second.output()).not.toContain(key);
    expect(await mode('ledger.sqlite')).toBe(0o600);
    const res = await getJson(`${url2}/reports/archive?start=2026-11-21T00:00:00%2B0000&end=2026-11-21T23:59:59%2B0000&geoformat=geojson`);
    expect(res.body.result.features.map((f: any) => f.properties.pkey)).toEqual(['partner-local-7']);
    expect((await postReport(url2, report(7), { key })).status).toBe(200);
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  });

  it('runs the worker beside the API: what it archives is counted on the API\'s /metrics, with the process\'s own metrics once', async () => {
    // A fixed METRICS_PORT, as a deployment sets it: the API's thread binds it, the worker's does not.
    const metricsPort = await freePort();
    const svc = start({ DATA_DIR: await tempDir(), PORT: '0', METRICS_PORT: String(metricsPort), FLUSH_INTERVAL_SECONDS: '0.5', API_KEYS: 'p:key-0123456789abcdef', LOG_LEVEL: 'info' });
    const url = (await waitFor(svc.output, /listening on (http:\/\/\S+)/))[1]!;
    const metricsUrl = (await waitFor(svc.output, /Prometheus metrics on (http:\/\/\S+)/))[1]!;
    expect(metricsUrl).toBe(`http://127.0.0.1:${metricsPort}/metrics`);
    // Without METRICS_HOST the port is open on every interface, and the line says so, once.
    expect(svc.output().match(/Prometheus metrics on http:\/\/127\.0\.0\.1:\d+\/metrics \(bound to 0\.0\.0\.0: every interface\)/g)).toHaveLength(1);
    for (const id of [1, 2, 3]) expect((await postReport(url, report(id), { key: 'key-0123456789abcdef' })).status).toBe(201);
    let text = '';
    const deadline = Date.now() + 20_000;
    while (!/^worker_reports_archived_total 3$/m.test(text) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      text = await (await fetch(metricsUrl)).text();
    }
    expect(text).toMatch(/^worker_reports_archived_total 3$/m);
    expect(text).toMatch(/^reports_total\{outcome="accepted"\} 3$/m);
    expect(text).toMatch(/^worker_flush_duration_seconds_count [1-9]\d*$/m);
    expect(text.match(/^nodejs_version_info\{/gm)).toHaveLength(1);
    // Summed over two threads it would be twice a date: it is when this process started.
    const started = Number(text.match(/^process_start_time_seconds (\d+)$/m)?.[1]);
    expect(Math.abs(started - Date.now() / 1000)).toBeLessThan(120);
    svc.child.kill('SIGTERM');
    expect(await svc.exited).toBe(0);
    // The worker's lines reach stdout through the API thread's writer, whole.
    const lines = svc.output().split('\n').filter((l) => l.startsWith('{'));
    const records = lines.map((l) => JSON.parse(l) as { msg: string; reports?: number });
    expect(records.filter((r) => r.msg === 'flushed').reduce((n, r) => n + (r.reports ?? 0), 0)).toBe(3);
    expect(records.some((r) => r.msg === 'request completed')).toBe(true);
  });

  it('gives the service 16 threads in Node\'s thread pool, or as many as UV_THREADPOOL_SIZE says, so that DuckDB\'s calls cannot hold them all', async () => {
    // The pool's threads start together at its first use (the service's start uses it): a
    // process's threads beyond another's, the same service given four, are the pool's beyond four.
    const threads = async (env: Record<string, string>) => {
      const svc = start({ DATA_DIR: await tempDir(), PORT: '0', API_KEYS: 'p:key-0123456789abcdef', ...env });
      const url = (await waitFor(svc.output, /listening on (http:\/\/\S+)/))[1]!;
      expect((await fetch(`${url}/ready`)).status).toBe(200);
      const count = (await fs.readdir(`/proc/${svc.child.pid}/task`)).length;
      svc.child.kill('SIGTERM');
      expect(await svc.exited).toBe(0);
      return count;
    };
    const four = await threads({ UV_THREADPOOL_SIZE: '4' });
    expect((await threads({})) - four).toBe(12);
    expect((await threads({ UV_THREADPOOL_SIZE: '6' })) - four).toBe(2);
  });

  it('a SIGTERM while the service starts (its worker up, its API not yet) stops it gracefully once started: exit 0', async () => {
    const svc = start({ DATA_DIR: await tempDir(), PORT: '0', API_KEYS: 'p:key-0123456789abcdef', LOG_LEVEL: 'info' });
    await new Promise<void>((resolve) => svc.child.stdout!.on('data', (d: Buffer) => void (String(d).includes('"role":"worker (thread)"') && resolve())));
    svc.child.kill('SIGTERM');
    expect(await svc.exited).toBe(0);
    expect(svc.output()).toMatch(/"signal":"SIGTERM","msg":"stopping"/);
  });

  it('stops with a message naming the variable when the config is bad', async () => {
    const bad = start({ DATA_DIR: await tempDir(), PORT: 'eighty', STORAGE_URL: 'ftp://nowhere' });
    expect(await bad.exited).toBe(78);
    expect(bad.output()).toMatch(/PORT="eighty"/);
    expect(bad.output()).toMatch(/STORAGE_URL="ftp:\/\/nowhere"/);
  });
});
