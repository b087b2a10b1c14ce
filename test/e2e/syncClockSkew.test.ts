// A sync's pages when the worker's clock runs behind the API's: a report's change is logged
// under the worker's time, earlier than the report's received_at (the API's time). The first page
// holds the changes logged up to its watermark, and every page after it must hold the same set:
// the pages are bounded by the changes, not by when each report was received.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ChangeLog } from '../../src/archive/changes.js';
import { Worker } from '../../src/worker/worker.js';
import { postReport, report, startTestService, testConfig, testRuntime } from '../support/env.js';

const UA = { 'User-Agent': 'flood-mirror/1.0' };

describe("a sync's pages, the worker's clock two minutes behind the API's", () => {
  it('hold every changed report, on the first page and on the pages after it', async () => {
    const config = await testConfig('embedded', undefined, { SYNC_SETTLE_SECONDS: '60' });
    const rt = await testRuntime(config);
    const svc = await startTestService(rt, { worker: false, reconcile: false });
    const worker = new Worker(
      {
        store: rt.store,
        queue: rt.queue,
        ledger: rt.ledger,
        boundaries: rt.boundaries,
        db: rt.db,
        changes: new ChangeLog(rt.store, config.syncSettleMs, config.syncRetentionMs, () => Date.now() - 120_000),
        tmpDir: path.join(config.dataDir, 'tmp', 'behind'),
        log: rt.log,
      },
      { flushIntervalSeconds: 0.2, maxBufferedReports: 1000, visibilitySeconds: 30 },
    );
    try {
      const since = new Date(Date.now() - 600_000).toISOString();
      for (const id of [1, 2, 3]) expect((await postReport(svc.url, report(id, { created_at: `2026-11-21T0${id}:00:00Z` }))).status).toBe(201);
      worker.start();
      while ((await rt.queue.depth()).visible + (await rt.queue.depth()).inFlight > 0) await new Promise((r) => setTimeout(r, 50));
      await worker.stop();
      const pkeys: string[] = [];
      let next: string | undefined = `${svc.url}/reports/archive?format=ndjson&updated_after=${encodeURIComponent(since)}&limit=1`;
      while (next) {
        const res: Response = await fetch(next, { headers: UA });
        expect(res.status).toBe(200);
        for (const line of (await res.text()).split('\n')) if (line) pkeys.push(JSON.parse(line).properties.pkey);
        next = /<([^>]+)>; rel="next"/.exec(res.headers.get('link') ?? '')?.[1];
      }
      expect(pkeys).toHaveLength(3);
      expect(new Set(pkeys).size).toBe(3);
    } finally {
      await worker.stop();
      await svc.stop();
    }
  });
});
