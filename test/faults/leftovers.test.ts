// Files a kill -9 leaves half-written: swept when a worker starts, once no write in progress
// could own them; objects, and a temporary file young enough to be another process's write, stay.
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { keepSweeping } from '../../src/store/leftovers.js';
import { createLogger } from '../../src/shared/log.js';
import { eventually, startTestService, testConfig, testRuntime } from '../support/env.js';

async function plant(file: string, ageMs: number): Promise<string> {
  await fs.mkdir(path.dirname(file), { recursive: true });
  await fs.writeFile(file, 'x'.repeat(1000));
  const when = new Date(Date.now() - ageMs);
  await fs.utimes(file, when, when);
  return file;
}

const exists = (file: string) => fs.access(file).then(() => true, () => false);

describe('leftovers of a killed process', () => {
  it("are removed when a worker starts; stored objects, young temporary files, a stopped import's files and a running job's are kept", async () => {
    const config = await testConfig('embedded');
    const root = config.storageUrl.slice('file://'.length);
    const hour = path.join(root, 'reports/v1/year=2026/month=11/day=20/hour=05');
    const hourAgo = 3_600_000;
    const staleTemp = await plant(path.join(hour, 'part-01JZZZZZZZZZZZZZZZZZZZZZZZ.parquet.tmp-0a1b2c3d4e5f'), hourAgo);
    const staleFlush = await plant(path.join(config.dataDir, 'tmp/worker/flush-4f1c.parquet'), hourAgo);
    const youngTemp = await plant(path.join(hour, 'part-01JYYYYYYYYYYYYYYYYYYYYYYY.parquet.tmp-ffeeddccbbaa'), 5_000);
    const oldObject = await plant(path.join(root, 'jobs/compact/2026-11-19.json'), 30 * 86_400_000);
    // An import stopped an hour ago is resumed from these; one given up a fortnight ago is not.
    const stoppedImport = await plant(path.join(config.dataDir, 'tmp/import/01JRUN/staged-000001.parquet'), hourAgo);
    const givenUpImport = await plant(path.join(config.dataDir, 'tmp/import/01JOLD/sorted.parquet'), 15 * 86_400_000);
    // A release, a reprocess or a verify reads what it wrote first at its end, hours later in a long run.
    const runningRelease = await plant(path.join(config.dataDir, 'tmp/release/4b9d/2025-01.parquet'), hourAgo);
    const runningReprocess = await plant(path.join(config.dataDir, 'tmp/reprocess/part-01JX.parquet'), hourAgo);
    const runningVerify = await plant(path.join(config.dataDir, 'tmp/verify/5c2e/694.txt'), hourAgo);
    const crashedRelease = await plant(path.join(config.dataDir, 'tmp/release/77aa/2024-12.parquet'), 2 * 86_400_000);

    const svc = await startTestService(await testRuntime(config), { worker: true, reconcile: false });
    try {
      await eventually(async () => (!(await exists(staleTemp)) && !(await exists(staleFlush)) && !(await exists(givenUpImport)) && !(await exists(crashedRelease)) ? true : undefined), 10_000, 'the stale files to go');
      expect(await exists(youngTemp)).toBe(true);
      expect(await exists(stoppedImport)).toBe(true);
      expect([await exists(runningRelease), await exists(runningReprocess), await exists(runningVerify)]).toEqual([true, true, true]);
      expect(await exists(oldObject)).toBe(true);
    } finally {
      await svc.stop();
    }
  });

  it('left by a process killed just before this one started are removed later, while it runs: too young at its start, old enough at a later sweep', async () => {
    const config = await testConfig('embedded');
    const minute = 60_000;
    // Ten minutes old at the start: a killed process's, or a live one's write; either way kept then.
    const spill = await plant(path.join(config.dataDir, 'tmp/exports/parquet-1f2e/segments/0.parquet'), 10 * minute);
    const recent = await plant(path.join(config.dataDir, 'tmp/worker/flush-9a8b.parquet'), 10 * minute);
    // Later sweeps every 100 ms here (hourly in a service), of files older than 30 minutes here (6 hours).
    const stop = keepSweeping(config, createLogger('silent'), 100, 30 * minute);
    try {
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect([await exists(spill), await exists(recent)]).toEqual([true, true]);
      // Twenty minutes old once the first sweep is done: past its 15 minutes, short of the later sweeps' 30.
      const between = await plant(path.join(config.dataDir, 'tmp/exports/parquet-5d6c/segments/0.parquet'), 20 * minute);
      // The spill's process is long gone: past the later sweeps' age, it goes; the other, younger, stays.
      const past = new Date(Date.now() - 40 * minute);
      await fs.utimes(spill, past, past);
      await eventually(async () => (!(await exists(spill)) ? true : undefined), 10_000, 'the old spill to go');
      expect([await exists(recent), await exists(between)]).toEqual([true, true]);
    } finally {
      stop();
    }
  });
});

