// A cold window on S3: a process with an empty part cache answers a window of many days, and
// fetches the ready texts of the days ahead while it prepares one, several GETs at once (on
// S3 each waits 20–50 ms for its first byte), and answers what the parts hold.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storePartPublisher } from '../../src/archive/partPublisher.js';
import { newDayPartKey } from '../../src/store/layout.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { writePartFile } from '../support/parts.js';
import { startTestService, testConfig, testRuntime, type TestService } from '../support/env.js';

const DAYS = 14;
const PER_DAY = 200;
const FIRST_DAY_MS = Date.parse('2026-11-01T00:00:00Z');

let emulator: Emulator;
let svc: TestService;
/** GETs of ready texts under way, and the most at once. */
let inFlight = 0;
let most = 0;

beforeAll(async () => {
  emulator = await startEmulator();
  emulator.s3.middlewareStack.add(
    (next) => async (args) => {
      const key = (args.input as { Key?: string }).Key ?? '';
      if (!key.includes('/ready/')) return next(args);
      most = Math.max(most, ++inFlight);
      try {
        return await next(args);
      } finally {
        inFlight -= 1;
      }
    },
    { step: 'initialize', name: 'countReadyGets' },
  );
  svc = await startTestService(await testRuntime(await testConfig('aws', emulator), emulator), { worker: false, reconcile: false });
  for (let d = 0; d < DAYS; d++) {
    const file = path.join(svc.rt.config.dataDir, `day-${d}.parquet`);
    const dayMs = FIRST_DAY_MS + d * 86_400_000;
    await writePartFile(svc.rt.db, file, d * PER_DAY, PER_DAY, dayMs, Math.floor(86_400_000 / PER_DAY));
    await storePartPublisher(svc.rt).publish(newDayPartKey(dayMs), file);
  }
  most = 0;
}, 120_000);
afterAll(async () => {
  await svc?.stop();
  await emulator?.stop();
});

describe('a cold window on S3', () => {
  it('fetches the ready texts of the days ahead several at a time, and answers every report once', async () => {
    const res = await fetch(`${svc.url}/reports/archive?start=2026-11-01T00:00:00Z&end=2026-11-14T23:59:59.999Z&format=ndjson`, { headers: { 'User-Agent': 'cold-read-tests/1.0' } });
    expect(res.status).toBe(200);
    const pkeys = (await res.text()).trim().split('\n').map((l) => (JSON.parse(l) as { properties: { pkey: string } }).properties.pkey);
    expect(pkeys).toHaveLength(DAYS * PER_DAY);
    expect(new Set(pkeys).size).toBe(DAYS * PER_DAY);
    // One day at a time (the one prepared and the one sent) is two GETs at most.
    expect(most).toBeGreaterThanOrEqual(4);
  });
});
