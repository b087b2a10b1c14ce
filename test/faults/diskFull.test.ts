// A full disk: every post is refused (503), so /ready must say 503 too, and both recover
// when space is freed. On a real, small tmpfs where this process may mount one; everywhere,
// with the store's writes failing as a full disk makes them fail.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { UnavailableError } from '../../src/shared/errors.js';
import { FileObjectStore } from '../../src/store/fileStore.js';
import type { ObjectStore } from '../../src/store/objectStore.js';
import { eventually, postReport, report, startTestService, tempDir, testConfig, testRuntime, type TestService } from '../support/env.js';
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
    const svc = await startTestService(await testRuntime(config), { worker: false, reconcile: false });
    cleanups.push(() => svc.stop());
    expect((await postReport(svc.url, report(1))).status).toBe(201);
    expect((await fetch(`${svc.url}/ready`)).status).toBe(200);

    const filler = await fill(dir);
    await expectRefusedAndNotReady(svc, 2);
    await fs.rm(filler);
    await expectRecovered(svc, 3);
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
