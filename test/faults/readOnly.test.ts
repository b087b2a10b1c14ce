// DATA_DIR on a read-only mount (a volume remounted read-only after disk errors, a snapshot):
// a process started there stops with the "unavailable" exit code and a message instead of
// answering posts it cannot keep, and what the directory held is intact when it is writable again.
import { execFileSync, spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { acceptedPkeys, postReport, report, startTestService, tempDir, testConfig, testRuntime, pkeyOf } from '../support/env.js';

const CLI = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../dist/src/main/flood-archive.cjs');

function mount(args: string[]): boolean {
  try {
    execFileSync('mount', args, { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

describe('a read-only DATA_DIR', () => {
  const mounted: string[] = [];
  afterAll(() => {
    for (const dir of mounted) execFileSync('umount', ['-l', dir]);
  });

  it('the process exits with the "unavailable" code (69) and says why; the data is intact', async (ctx) => {
    const dir = await tempDir('flood-ro-');
    if (!mount(['-t', 'tmpfs', '-o', 'size=64m', 'tmpfs', dir])) {
      ctx.skip('skipped: this process may not mount a tmpfs (needs root)');
      return;
    }
    mounted.push(dir);
    const config = await testConfig('embedded', undefined, { DATA_DIR: dir });
    const svc = await startTestService(await testRuntime(config), { worker: false, reconcile: false });
    expect((await postReport(svc.url, report(1))).status).toBe(201);
    await svc.stop();
    expect(mount(['-o', 'remount,ro', dir])).toBe(true);

    const child = spawn(process.execPath, [CLI, 'all'], { env: { PATH: process.env.PATH ?? '', DATA_DIR: dir, PORT: '0', LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code, out).toBe(69);
    expect(out).toMatch(/read-only|unavailable/i);
    expect(out).not.toMatch(/listening on/);

    expect(mount(['-o', 'remount,rw', dir])).toBe(true);
    const rt = await testRuntime(config);
    try {
      expect(await acceptedPkeys(rt)).toEqual([pkeyOf(1)]);
    } finally {
      await rt.close();
    }
  });
});
