// A backlog reaches the archive in day parts: a flush that touches many hours (a backfill, or
// the queue after an outage) writes each closed day's reports into one part, as compaction
// would leave them, instead of one small part per hour; readers answer the same.
import { describe, expect, it } from 'vitest';
import { getJson, keysUnder, startTestService, testConfig, testRuntime, report } from '../support/env.js';
import { parsePartnerReport } from '../../src/partners/partnerReport.js';

const DAYS = 10;
const REPORTS = 300; // one every 48 minutes: 300 different hours over 10 closed days
const START = Date.UTC(2026, 9, 1);

describe('a backlog flush', () => {
  it('writes one part per closed day, and the archive answers every report once', async () => {
    const rt = await testRuntime(await testConfig('embedded'));
    const svc = await startTestService(rt, { worker: false, reconcile: false });
    try {
      for (let i = 0; i < REPORTS; i++) {
        const created = new Date(START + i * 48 * 60_000).toISOString();
        await rt.intake.accept(parsePartnerReport(report(80_000 + i, { created_at: created, title: `t${i}` })));
      }
      // Everything waiting in one flush, as a worker catching up holds it.
      while (rt.worker.buffered < REPORTS) if ((await rt.worker.pollOnce(0)) === 0) break;
      expect(rt.worker.buffered).toBe(REPORTS);
      const flushed = await rt.worker.flush();

      expect(flushed.parts).toHaveLength(DAYS);
      const parts = (await keysUnder(rt, 'reports/v1/')).filter((k) => k.endsWith('.parquet'));
      expect(parts).toHaveLength(DAYS);
      for (const key of parts) expect(key).toMatch(/\/hour=all\/part-[0-9A-Z]{26}\.parquet$/);

      const window = 'start=2026-10-01T00:00:00%2B0000&end=2026-10-10T23:59:59%2B0000';
      expect((await getJson(`${svc.url}/reports/archive/count?${window}`)).body.result.count).toBe(REPORTS);
      const oneHour = await getJson(`${svc.url}/reports/archive?start=2026-10-01T00:00:00%2B0000&end=2026-10-01T00:59:59%2B0000&geoformat=geojson`);
      expect(oneHour.body.result.features.map((f: any) => f.properties.title).sort()).toEqual(['t0', 't1']); // 00:00 and 00:48
    } finally {
      await svc.stop();
    }
  });

  it('a flush of a few hours still writes hourly parts', async () => {
    const rt = await testRuntime(await testConfig('embedded'));
    const svc = await startTestService(rt, { worker: false, reconcile: false });
    try {
      for (let i = 0; i < 5; i++) {
        await rt.intake.accept(parsePartnerReport(report(81_000 + i, { created_at: new Date(START + i * 3_600_000).toISOString() })));
      }
      await rt.worker.pollOnce(0);
      expect((await rt.worker.flush()).parts).toHaveLength(5);
      for (const key of await keysUnder(rt, 'reports/v1/')) if (key.endsWith('.parquet')) expect(key).toMatch(/\/hour=\d\d\/part-/);
    } finally {
      await svc.stop();
    }
  });
});
