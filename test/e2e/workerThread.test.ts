// The worker thread of `all` (src/worker/thread.ts), compiled as the service runs it: a start
// that fails says why as the CLI's exit codes need it, and a stop ends the thread.
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { UnavailableError } from '../../src/shared/errors.js';
import { pkeyOf, postReport, report, startTestService, testConfig, testRuntime } from '../support/env.js';

type ThreadModule = typeof import('../../src/worker/thread.js');
const compiled = (): Promise<ThreadModule> => import(path.resolve(import.meta.dirname, '../../dist/src/worker/thread.js')) as Promise<ThreadModule>;

describe('the worker thread of all', () => {
  it('archives what the API accepted, flushes it on stop, and ends', async () => {
    const config = await testConfig('embedded', undefined, { FLUSH_INTERVAL_SECONDS: '600' });
    const rt = await testRuntime(config);
    const api = await startTestService(rt, { worker: false, reconcile: false });
    const { startWorkerThread } = await compiled();
    const thread = await startWorkerThread(config);
    try {
      expect((await postReport(api.url, report(11))).status).toBe(201);
      // Received, then held until the flush interval (10 minutes) or the stop.
      const deadline = Date.now() + 20_000;
      while ((await rt.queue.depth()).inFlight === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(await rt.queue.depth()).toEqual({ visible: 0, inFlight: 1 });
      expect(await rt.ledger.isPending(pkeyOf(11))).toBe(true);
      const metrics = await thread.metrics();
      expect(metrics.find((m) => m.name === 'worker_reports_archived_total')?.values).toEqual([{ value: 0, labels: {} }]);
      await thread.stop();
      expect(await rt.ledger.isPending(pkeyOf(11))).toBe(false);
      const hour = path.join(config.dataDir, 'store/reports/v1/year=2026/month=11/day=21/hour=05');
      expect((await fs.readdir(hour)).filter((f) => f.endsWith('.parquet'))).toHaveLength(1);
    } finally {
      await thread.stop();
      await api.stop();
      await rt.close();
    }
  });

  it('rejects a start it cannot make with the same error a process would stop with', async () => {
    const config = await testConfig('embedded');
    const file = path.join(config.dataDir, 'not-a-directory');
    await fs.writeFile(file, 'x');
    const { startWorkerThread } = await compiled();
    const started = startWorkerThread({ ...config, dataDir: file });
    const err: unknown = await started.then(
      async (thread) => {
        await thread.stop();
        return undefined;
      },
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).name).toBe('UnavailableError');
    expect((err as UnavailableError).dependency).toBe('ledger');
  });
});
