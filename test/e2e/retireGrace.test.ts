// Parts merged away by compaction or rewritten by a reprocess stay readable for RETIRE_GRACE_SECONDS
// after their successor is stored: an answer that listed them before (a long pull, a page being
// built) still reads them, with every report once, on both backends. Then they are gone.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import path from 'node:path';
import { compact } from '../../src/ops/compact.js';
import { reprocess } from '../../src/ops/reprocess.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { allArchived, BACKENDS, eventually, keysUnder, pkeyOf, postReport, report, startTestService, tempDir, testConfig, testRuntime, type TestService } from '../support/env.js';

const DAY = Date.UTC(2026, 10, 18);
const DAY_MS = 86_400_000;
const GRACE_S = 3;

describe.each(BACKENDS)('retired parts on the %s backend', (kind) => {
  let emulator: Emulator | undefined;
  let svc: TestService;
  let dir: string;
  beforeAll(async () => {
    if (kind === 'aws') emulator = await startEmulator();
    svc = await startTestService(await testRuntime(await testConfig(kind, emulator, { RETIRE_GRACE_SECONDS: String(GRACE_S) }), emulator));
    dir = await tempDir();
    // Two parts in one hour of a closed day (a reprocess writes them as one), and another hour: compaction merges the day.
    for (const [id, hour] of [[1, 3], [2, 3], [3, 9]] as const) {
      expect((await postReport(svc.url, report(id, { created_at: new Date(DAY + hour * 3_600_000).toISOString() }))).status).toBe(201);
      await allArchived(svc.rt);
    }
  }, 60_000);
  afterAll(async () => {
    await svc?.stop();
    await emulator?.stop();
  });

  const parts = async () => (await keysUnder(svc.rt, 'reports/v1/year=2026/month=11/day=18/')).filter((k) => k.endsWith('.parquet'));
  const rowsOf = async (file: string) =>
    svc.rt.db.withConnection(async (conn) => (await conn.runAndReadAll(`SELECT pkey FROM read_parquet('${file}') ORDER BY pkey`)).getRowObjectsJS().map((r) => r.pkey));

  for (const job of ['reprocess', 'compaction'] as const) {
    it(`an answer planned before a ${job} reads the parts it listed after their successor is stored`, async () => {
      const before = await parts();
      expect(before.length).toBeGreaterThan(1);
      const window = await svc.rt.archive.open({ startMs: DAY, endMs: DAY + DAY_MS - 1, admin: undefined });
      const started = performance.now();
      const running = job === 'compaction' ? compact(svc.rt, { fromMs: DAY, toMs: DAY + DAY_MS - 1, closedBeforeMs: Date.now() }) : reprocess(svc.rt, { fromMs: DAY, toMs: DAY + DAY_MS - 1, dryRun: false });
      running.catch(() => undefined);
      // The successor is stored; the old parts are still there.
      await eventually(async () => ((await parts()).some((k) => !before.includes(k)) ? true : undefined), 20_000, 'the new part');
      // In the store itself (on S3 the window may read its copies in the part cache, which the job filled).
      expect((await parts()).filter((k) => before.includes(k)).sort()).toEqual([...before].sort());
      const file = path.join(dir, `${kind}-${job}.parquet`);
      await window.writeParquet(file);
      expect(await rowsOf(file)).toEqual([pkeyOf(1), pkeyOf(2), pkeyOf(3)]);
      await running;
      // Not before the grace: then the parts it replaced are gone (a reprocess rewrites the hour
      // of two parts; compaction, the whole day).
      expect(performance.now() - started).toBeGreaterThanOrEqual(GRACE_S * 1000 - 50);
      const replaced = before.filter((k) => job === 'compaction' || k.includes('/hour=03/'));
      expect(replaced.length).toBeGreaterThan(1);
      expect((await parts()).filter((k) => replaced.includes(k))).toEqual([]);
    }, 60_000);
  }
});
