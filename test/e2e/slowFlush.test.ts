// A flush slower than the queue's visibility timeout (a backlog, a store that keeps failing):
// the worker keeps its messages hidden meanwhile, so no other worker receives them, and none
// comes back counted towards the dead-letter queue.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parsePartnerReport } from '../../src/partners/partnerReport.js';
import { Worker } from '../../src/worker/worker.js';
import { report, testConfig, testRuntime } from '../support/env.js';

describe('a flush slower than the visibility timeout', () => {
  it('keeps its messages hidden from other consumers until it has archived and deleted them', async () => {
    const config = await testConfig('embedded', undefined, { FLUSH_INTERVAL_SECONDS: '1', QUEUE_VISIBILITY_SECONDS: '3' });
    const rt = await testRuntime(config);
    try {
      await rt.boundaries.seedIfEmpty();
      await rt.intake.accept(parsePartnerReport(report(90_001)));
      // Parts take three visibility timeouts to store.
      let storing = false;
      const slow = Object.assign(Object.create(rt.store) as typeof rt.store, {
        put: async (key: string, body: Buffer | string) => {
          if (key.startsWith('reports/')) {
            storing = true;
            await new Promise((r) => setTimeout(r, 9_000));
          }
          return rt.store.put(key, body);
        },
      });
      const worker = new Worker(
        { store: slow, queue: rt.queue, ledger: rt.ledger, boundaries: rt.boundaries, db: rt.db, tmpDir: path.join(config.dataDir, 'tmp', 'slow'), log: rt.log },
        { flushIntervalSeconds: 1, maxBufferedReports: 1000, visibilitySeconds: 3 },
      );
      worker.start();
      // Another consumer polls all along the flush: it never receives the message.
      const seen: number[] = [];
      while (!storing) await new Promise((r) => setTimeout(r, 50));
      const until = Date.now() + 8_500;
      while (Date.now() < until) {
        const got = await rt.queue.receive({ maxMessages: 10, waitSeconds: 0, visibilitySeconds: 3 });
        seen.push(...got.map((m) => m.receiveCount));
        await new Promise((r) => setTimeout(r, 200));
      }
      await worker.stop();
      expect(seen).toEqual([]);
      expect(await rt.ledger.isPending('partner-90001')).toBe(false);
      expect(await rt.queue.depth()).toEqual({ visible: 0, inFlight: 0 });
    } finally {
      await rt.close();
    }
  }, 30_000);
});
