// A full disk: every post is refused (503), so /ready must say 503 too, and both recover
// when space is freed; an import that fills the disk stops, shows nothing half-written, and
// finishes when run again. On a real, small tmpfs where this process may mount one; everywhere,
// with the store's writes failing as a full disk makes them fail.
import { execFileSync, spawn } from 'node:child_process';
import Database from 'better-sqlite3';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { importFile } from '../../src/ops/importFile.js';
import { isDiskFull, UnavailableError } from '../../src/shared/errors.js';
import { FileObjectStore } from '../../src/store/fileStore.js';
import type { ObjectStore } from '../../src/store/objectStore.js';
import { CLI, runCli } from '../support/cli.js';
import { allArchived, API_KEY, eventually, getJson, pendingCount, postReport, report, startTestService, tempDir, testConfig, testRuntime, type TestService } from '../support/env.js';
import { expectErrorShape } from './support.js';

/** Mounts a tmpfs of `megabytes` on a new directory; undefined when this process may not. */
function mountTmpfs(dir: string, megabytes: number): boolean {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${megabytes}m`, 'tmpfs', dir], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Writes until the file system refuses: ENOSPC. */
async function fill(dir: string): Promise<string> {
  const file = path.join(dir, 'filler');
  const handle = await fs.open(file, 'w');
  const chunk = Buffer.alloc(64 * 1024, 1);
  try {
    for (;;) await handle.write(chunk);
  } catch (err) {
    if ((err as { code?: string }).code !== 'ENOSPC') throw err;
  }
  // Then byte by byte, so not even one page is left.
  try {
    for (;;) await handle.write(Buffer.alloc(1));
  } catch (err) {
    if ((err as { code?: string }).code !== 'ENOSPC') throw err;
  } finally {
    await handle.close();
  }
  return file;
}

async function expectRefusedAndNotReady(svc: TestService, postId: number): Promise<void> {
  const post = await postReport(svc.url, report(postId));
  expect(post.status).toBe(503);
  expectErrorShape(post.body, 503);
  // The write probe's result stands a few seconds: readiness follows within them.
  const ready = await eventually(async () => {
    const res = await fetch(`${svc.url}/ready`);
    return res.status === 503 ? ((await res.json()) as any) : undefined;
  }, 15_000, '/ready 503');
  expectErrorShape(ready, 503);
  expect(ready.message).toMatch(/writes to the object store fail/);
}

async function expectRecovered(svc: TestService, postId: number): Promise<void> {
  await eventually(async () => ((await fetch(`${svc.url}/ready`)).status === 200 ? true : undefined), 15_000, '/ready 200 again');
  expect((await postReport(svc.url, report(postId))).status).toBe(201);
}

describe('a full disk', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  });

  it('on a real tmpfs: posts 503, /ready 503; both recover when space is freed', async (ctx) => {
    const dir = await tempDir('flood-full-');
    if (!mountTmpfs(dir, 24)) {
      ctx.skip('skipped: this process may not mount a tmpfs (needs root); the injected variant below still runs');
      return;
    }
    cleanups.push(async () => {
      execFileSync('umount', ['-l', dir]);
    });
    const config = await testConfig('embedded', undefined, { DATA_DIR: dir });
    const svc = await startTestService(await testRuntime(config), { reconcile: false });
    cleanups.push(() => svc.stop());
    expect((await postReport(svc.url, report(1))).status).toBe(201);
    // Two reports archived: a page of one of them has a next page, and its cursor.
    expect((await postReport(svc.url, report(11, { created_at: '2026-11-20T03:00:00Z' }))).status).toBe(201);
    expect((await postReport(svc.url, report(12, { created_at: '2026-11-20T04:00:00Z' }))).status).toBe(201);
    await allArchived(svc.rt);
    expect((await fetch(`${svc.url}/ready`)).status).toBe(200);

    const filler = await fill(dir);
    await expectRefusedAndNotReady(svc, 2);
    // A page's cursor needs the key this process has not made yet: it cannot be written, a 503.
    const window = 'start=2026-11-01T00:00:00%2B0000&end=2026-11-30T00:00:00%2B0000&limit=1';
    const refused = await getJson(`${svc.url}/reports/archive?${window}`);
    expect(refused.status).toBe(503);
    expectErrorShape(refused.body, 503);
    await fs.rm(filler);
    await expectRecovered(svc, 3);
    // Nothing the failed write left behind stops it now.
    expect((await getJson(`${svc.url}/reports/archive?${window}`)).status).toBe(200);
    expect((await fs.readFile(path.join(dir, 'cursor-secret'), 'utf8')).trim().length).toBeGreaterThanOrEqual(32);
  });

  it('on a real tmpfs: `all` stopped while its worker cannot flush what it holds exits 1 saying so; the reports are archived after a restart', async (ctx) => {
    const dir = await tempDir('flood-full-');
    if (!mountTmpfs(dir, 24)) return ctx.skip('skipped: this process may not mount a tmpfs (needs root)');
    cleanups.push(async () => {
      execFileSync('umount', ['-l', dir]);
    });
    const env = { PATH: process.env.PATH ?? '', TZ: 'UTC', DATA_DIR: dir, PORT: '0', API_KEYS: API_KEY, LOG_LEVEL: 'warn' };
    const start = (flushSeconds: number) => {
      const child = spawn(process.execPath, [CLI, 'all'], { env: { ...env, FLUSH_INTERVAL_SECONDS: String(flushSeconds) }, stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      child.stdout!.on('data', (d) => (output += d));
      child.stderr!.on('data', (d) => (output += d));
      const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
      cleanups.push(async () => void child.kill('SIGKILL'));
      return { child, output: () => output, exited };
    };
    const first = start(15);
    const url = await eventually(async () => /listening on (http:\/\/\S+)/.exec(first.output())?.[1], 20_000, 'listening');
    for (const id of [1, 2, 3]) expect((await postReport(url, report(id))).status).toBe(201);
    // The worker holds them, received and not yet flushed (its interval 15 s): hidden in the queue.
    const ledger = new Database(path.join(dir, 'ledger.sqlite'), { readonly: true });
    try {
      await eventually(async () => ((ledger.prepare('SELECT count(*) AS n FROM queue WHERE receive_count > 0').get() as { n: number }).n === 3 ? true : undefined), 10_000, 'the worker holding the reports');
    } finally {
      ledger.close();
    }
    const filler = await fill(dir);
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(1);
    expect(first.output()).toMatch(/the worker did not stop cleanly/);
    await fs.rm(filler);
    const second = start(1);
    const again = await eventually(async () => /listening on (http:\/\/\S+)/.exec(second.output())?.[1], 20_000, 'listening again');
    // Delivered again once their hiding (two of the first process's intervals) lapses, and flushed.
    await eventually(async () => {
      const res = await getJson(`${again}/reports/archive/count?start=2026-11-21T00:00:00%2B0000&end=2026-11-21T23:59:59%2B0000`);
      return res.status === 200 && res.body.result?.count === 3 ? true : undefined;
    }, 90_000, 'the held reports archived');
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  }, 180_000);

  /** A tmpfs for DATA_DIR (unmounted after the suite), and a file of `n` reports over June's closed days on a disk with room. */
  async function importSetup(ctx: { skip: (note: string) => void }, n: number): Promise<{ dir: string; file: string } | undefined> {
    const dir = await tempDir('flood-full-import-');
    if (!mountTmpfs(dir, 48)) {
      ctx.skip('skipped: this process may not mount a tmpfs (needs root)');
      return undefined;
    }
    cleanups.push(async () => {
      execFileSync('umount', ['-l', dir]);
    });
    // The file, its checkpoint and its rejects beside it.
    const file = path.join(await tempDir('flood-full-import-file-'), 'backfill.ndjson');
    const start = Date.UTC(2026, 5, 1);
    await fs.writeFile(file, Array.from({ length: n }, (_, i) => JSON.stringify(report(i + 1, { created_at: new Date(start + ((i * 7_919) % (30 * 24)) * 3_600_000).toISOString(), title: `r${i + 1}` }))).join('\n'));
    return { dir, file };
  }

  /** June's answers through a service on the data dir: each report at most once, by pkey its title; and what is still pending. */
  async function archivedJune(dataDir: string): Promise<{ titles: Map<string, string>; pending: number }> {
    const svc = await startTestService(await testRuntime(await testConfig('embedded', undefined, { DATA_DIR: dataDir })), { worker: false, reconcile: false });
    try {
      const res = await getJson(`${svc.url}/reports/archive?start=2026-06-01T00:00:00%2B0000&end=2026-06-30T23:59:59%2B0000&geoformat=geojson`);
      expect(res.status).toBe(200);
      const titles = new Map<string, string>();
      for (const f of res.body.result.features) {
        expect(titles.has(f.properties.pkey)).toBe(false);
        titles.set(f.properties.pkey, f.properties.title);
      }
      return { titles, pending: await pendingCount(svc.rt) };
    } finally {
      await svc.stop();
    }
  }

  /** Every report of the file archived once, with its own title, none pending, and verify content. */
  async function expectWhole(dataDir: string, n: number): Promise<void> {
    const { titles, pending } = await archivedJune(dataDir);
    expect(titles.size).toBe(n);
    for (let id = 1; id <= n; id++) expect(titles.get(`partner-${id}`)).toBe(`r${id}`);
    expect(pending).toBe(0);
    expect((await runCli(['verify', '--from', '2026-06-01', '--to', '2026-06-30'], { DATA_DIR: dataDir })).code).toBe(0);
  }

  it('on a real tmpfs: an import that fills the disk as its ledger grows stops saying so, and finishes when run again once space is freed', async (ctx) => {
    const n = 6_000;
    const setup = await importSetup(ctx, n);
    if (!setup) return;
    const env = { DATA_DIR: setup.dir };
    // A data dir with its ledger, then 2 MB left: less than the ledger's rows for the file.
    expect((await runCli(['verify', '--from', '2026-06-01', '--to', '2026-06-30'], env)).code).toBe(0);
    const filler = await fill(setup.dir);
    await fs.truncate(filler, (await fs.stat(filler)).size - 2 * 1024 * 1024);

    const failed = await runCli(['import', '--file', setup.file, '--json'], env);
    expect(failed.code).toBe(69);
    expect(failed.stderr).toMatch(/the disk is full: free space on the disk holding DATA_DIR, then run the same command again/);
    expect(failed.stderr).toMatch(/run the same command again to resume from its checkpoint/);
    await fs.rm(filler);
    expect((await archivedJune(setup.dir)).titles.size).toBe(0);

    const resumed = await runCli(['import', '--file', setup.file, '--json'], env);
    expect(resumed.stderr).toBe('');
    expect(resumed.code).toBe(0);
    await expectWhole(setup.dir, n);
  });

  it('on a real tmpfs: an import whose working files (DuckDB\'s) fill the disk stops with 69 and says to free space', async (ctx) => {
    const dataDir = await tempDir('flood-full-tmp-');
    const tmp = path.join(dataDir, 'tmp');
    await fs.mkdir(tmp);
    if (!mountTmpfs(tmp, 1)) return ctx.skip('skipped: this process may not mount a tmpfs (needs root)');
    cleanups.push(async () => {
      execFileSync('umount', ['-l', tmp]);
    });
    const file = path.join(await tempDir('flood-full-tmp-file-'), 'backfill.ndjson');
    const start = Date.UTC(2026, 5, 1);
    await fs.writeFile(file, Array.from({ length: 40_000 }, (_, i) => JSON.stringify(report(i + 1, { created_at: new Date(start + (i % 720) * 3_600_000).toISOString(), title: `r${i + 1} ${'x'.repeat(80)}` }))).join('\n'));
    const failed = await runCli(['import', '--file', file, '--json'], { DATA_DIR: dataDir });
    expect(failed.code).toBe(69);
    expect(failed.stderr).toMatch(/No space left on device.*the disk is full: free space on the disk holding DATA_DIR/s);
  });

  it('on a real tmpfs: an export whose folder fills stops with 69 naming that disk, and keeps the file it would have replaced', async (ctx) => {
    const dataDir = await tempDir('flood-full-export-');
    const outDir = await tempDir('flood-full-export-out-');
    if (!mountTmpfs(outDir, 1)) return ctx.skip('skipped: this process may not mount a tmpfs (needs root)');
    cleanups.push(async () => {
      execFileSync('umount', ['-l', outDir]);
    });
    const file = path.join(dataDir, 'backfill.ndjson');
    const start = Date.UTC(2026, 5, 1);
    // Some 3 MB of CSV, and 1.5 MB of Parquet (titles that do not compress), on a disk of 1 MB.
    await fs.writeFile(file, Array.from({ length: 6_000 }, (_, i) => JSON.stringify(report(i + 1, { created_at: new Date(start + (i % 720) * 3_600_000).toISOString(), title: randomBytes(240).toString('base64') }))).join('\n'));
    expect((await runCli(['import', '--file', file, '--json'], { DATA_DIR: dataDir })).code).toBe(0);
    const out = path.join(outDir, 'june.csv');
    await fs.writeFile(out, 'the last export');
    for (const format of ['csv', 'parquet']) {
      const failed = await runCli(['export', '--from', '2026-06-01', '--to', '2026-06-30', '--format', format, '--out', out, '--json'], { DATA_DIR: dataDir });
      expect([failed.code, failed.stderr]).toEqual([69, expect.stringMatching(/the disk is full: free space on the disk holding --out \(the export is written beside it\) or TMP_DIR, then run the same command again/)]);
      expect(await fs.readFile(out, 'utf8')).toBe('the last export');
      expect(await fs.readdir(outDir)).toEqual(['june.csv']);
    }
  });

  it('on a real tmpfs: an import whose disk fills while it stores its parts stops, shows each report once at most, and finishes when run again', async (ctx) => {
    const n = 6_000;
    const setup = await importSetup(ctx, n);
    if (!setup) return;
    // A service on the data dir publishes the default boundaries, as a first start does.
    const svc = await startTestService(await testRuntime(await testConfig('embedded', undefined, { DATA_DIR: setup.dir })), { worker: false, reconcile: false });
    const rt = svc.rt;
    // The disk fills, for real, once ten of the thirty day parts are stored: the parts, sidecars,
    // change logs and ledger writes after them meet ENOSPC from the file system.
    let parts = 0;
    let filler: string | undefined;
    const store = new Proxy(rt.store, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver) as unknown;
        if (prop !== 'put') return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
        return async (key: string, body: Buffer | string) => {
          await target.put(key, body);
          if (key.startsWith('reports/v1/') && key.endsWith('.parquet') && ++parts === 10) filler = await fill(setup.dir);
        };
      },
    }) as ObjectStore;
    try {
      const err = await importFile({ ...rt, store }, { file: setup.file }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeDefined();
      expect(isDiskFull(err)).toBe(true);
    } finally {
      await svc.stop();
    }
    expect(filler).toBeDefined();
    await fs.rm(filler!);
    const partial = await archivedJune(setup.dir);
    // Parts are answered from when they are stored, before their reports are marked archived.
    expect(partial.titles.size).toBeGreaterThan(0);
    expect(partial.pending).toBeGreaterThan(0);
    for (const [pkey, title] of partial.titles) expect(title).toBe(`r${pkey.slice('partner-'.length)}`);

    const resumed = await runCli(['import', '--file', setup.file, '--json'], { DATA_DIR: setup.dir });
    expect(resumed.stderr).toBe('');
    expect(resumed.code).toBe(0);
    await expectWhole(setup.dir, n);
  });

  it('with the store failing every write as a full disk does: reports are still accepted into the ledger, /ready says parts cannot be written', async () => {
    const config = await testConfig('embedded');
    const real = new FileObjectStore(config.storageUrl.slice('file://'.length));
    let full = false;
    const enospc = () => new UnavailableError('storage', 'ENOSPC: no space left on device, write');
    // Reads and pings still work on a full disk; creating and writing files does not.
    const store = new Proxy(real, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver) as unknown;
        if (typeof value !== 'function') return value;
        if (full && ['put', 'putIfAbsent'].includes(String(prop))) return async () => Promise.reject(enospc());
        return (value as (...args: unknown[]) => unknown).bind(target);
      },
    }) as ObjectStore;
    const svc = await startTestService(await testRuntime(config, undefined, { store }), { worker: false, reconcile: false });
    cleanups.push(() => svc.stop());
    expect((await postReport(svc.url, report(1))).status).toBe(201);
    expect((await fetch(`${svc.url}/ready`)).status).toBe(200);
    full = true;
    // The embedded ledger is SQLite, not the store: an acceptance needs no store write, and the
    // report waits in the ledger until parts can be written again.
    expect((await postReport(svc.url, report(2))).status).toBe(201);
    const ready = await eventually(async () => {
      const res = await fetch(`${svc.url}/ready`);
      return res.status === 503 ? ((await res.json()) as any) : undefined;
    }, 15_000, '/ready 503');
    expectErrorShape(ready, 503);
    expect(ready.message).toMatch(/writes to the object store fail/);
    full = false;
    await expectRecovered(svc, 3);
  });
});
