// Boundaries published while reports wait in a worker's buffer: the reports were tagged when
// received, with the boundaries then current. A reprocess run after the publish may already have
// rewritten their hour, so the worker tags them again with the boundaries published as it flushes
// (read afresh: a publish by another process may be seconds newer than what this one serves).
import path from 'node:path';
import fs from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { parsePartnerReport } from '../../src/partners/partnerReport.js';
import { BoundaryRepository } from '../../src/boundaries/repository.js';
import { Worker } from '../../src/worker/worker.js';
import { API_KEY_NAME, keysUnder, pkeyOf, report, testConfig, testRuntime } from '../support/env.js';
import { loadNationalBoundaries } from '../support/sharedData.js';

describe('boundaries published while reports wait in the buffer', () => {
  it('are the ones the reports are archived with', async () => {
    const config = await testConfig('embedded');
    const rt = await testRuntime(config);
    // The worker's own view of the boundaries, its pointer trusted for an hour rather than 5 s:
    // a publish elsewhere stays unseen by what its process serves for as long as the test runs.
    const workerBoundaries = new BoundaryRepository(rt.store, 3_600_000);
    const worker = new Worker(
      { store: rt.store, queue: rt.queue, ledger: rt.ledger, boundaries: workerBoundaries, db: rt.db, tmpDir: path.join(config.dataDir, 'tmp', 'w'), log: rt.log },
      { flushIntervalSeconds: 30, maxBufferedReports: 1000, visibilitySeconds: 60 },
    );
    try {
      await rt.boundaries.seedIfEmpty();
      const before = (await workerBoundaries.current()).version;
      const posted = parsePartnerReport(report(95, { created_at: '2026-11-24T06:00:00Z' }));
      await rt.intake.accept(posted, API_KEY_NAME);
      expect(await worker.pollOnce(1)).toBe(1);
      // The whole country published by another process just before the flush: the worker's has
      // not looked at the pointer since, and serves the version before.
      await rt.boundaries.publish(await loadNationalBoundaries());
      expect((await workerBoundaries.current()).version).toBe(before);
      await worker.flush();
      const now = await rt.boundaries.latest();
      expect(now.version).not.toBe(before);

      const [key] = (await keysUnder(rt, 'reports/v1/year=2026/month=11/day=24/hour=06/')).filter((k) => k.endsWith('.parquet'));
      const file = path.join(config.dataDir, 'part.parquet');
      await fs.writeFile(file, (await rt.store.get(key!))!.body);
      const rows = await rt.db.withConnection(async (conn) =>
        (await conn.runAndReadAll(`SELECT pkey, instance_region_code, local_area_id, province_code, region_code, boundary_version FROM read_parquet('${file}')`)).getRowObjectsJS(),
      );
      const tags = now.tagger.tag(posted.location.lng, posted.location.lat);
      expect(tags.region_code).not.toBeNull();
      expect(rows).toEqual([{ pkey: pkeyOf(95), ...tags, boundary_version: now.version }]);
    } finally {
      await worker.stop();
      workerBoundaries.close();
      await rt.close();
    }
  }, 60_000);
});
