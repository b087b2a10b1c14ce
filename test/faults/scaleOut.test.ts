// Past one machine, under faults (bench/scaleOut.ts runs it): three API processes and three
// workers on moto's S3 and SQS, two schedulers, a partner posting round-robin across the APIs and
// retrying the same body, SIGKILLs of random APIs and workers with restarts, a 2 s visibility
// timeout. Afterwards, with no operator action: every acknowledged report archived exactly once
// with its first version, in every answer format and in verify; every stored part, sidecar and
// change log whole; each scheduled tick run by one scheduler, once.
import { afterAll, describe, expect, it } from 'vitest';
import { scaleOutRun } from '../../bench/scaleOut.js';
import { API_KEY, pkeyOf, report } from '../support/env.js';
import type { Emulator } from '../support/fauxqs.js';
import { HAS_MOTO, MOTO_MISSING, startMoto } from '../support/moto.js';

const DAY = Date.UTC(2026, 10, 19);
if (!HAS_MOTO) console.warn(MOTO_MISSING);

let moto: Emulator | undefined;
afterAll(async () => {
  await moto?.stop();
});

describe.skipIf(!HAS_MOTO)('three APIs, three workers and two schedulers on S3 and SQS (moto), APIs and workers killed at random', () => {
  it('archives every acknowledged report exactly once with its first version, leaves nothing half-written, and runs each tick once', async () => {
    // moto without the costs S3 and SQS do not have (bench/moto_lean.py; the port contract tests
    // run both): on moto as it is, one Python process, the run was bound by moto's own listing,
    // dispatch and queue scans, and took two to four times as long.
    moto = await startMoto({ lean: true });
    const run = await scaleOutRun(moto, {
      reports: 500,
      minKills: 6,
      // A kill every 2–8 s: at 0.5–2 s, restarts (a process start each) kept two cores busy, and
      // the same proof took three times as long.
      killEveryMs: 2_000,
      apis: 3,
      workers: 3,
      apiKey: API_KEY,
      reportOf: (n, title) => report(n, { created_at: new Date(DAY + (n % 24) * 3_600_000 + (n % 60) * 1000).toISOString(), title }),
    });
    const why = run.diagnosis();
    expect(run.acked.size, why).toBe(run.ids.length);
    expect(run.kills).toBeGreaterThanOrEqual(6);
    for (const format of ['ndjson', 'geojson', 'csv'] as const) {
      const answer = run.answers[format];
      expect(answer.size, format).toBe(run.ids.length);
      for (const n of run.ids) expect(answer.get(pkeyOf(n)), format).toEqual([`first ${n}`]);
    }
    // A second version after the first was acknowledged: a repeat, not archived.
    expect(run.secondVersions).toEqual(Array(20).fill(200));
    expect(run.verify.code, run.verify.output).toBe(0);
    // Every part reads back and holds only acknowledged reports; each is stored once after
    // compaction, however many workers wrote it.
    expect(new Set(run.storedBefore.keys())).toEqual(new Set(run.ids.map((n) => pkeyOf(n))));
    expect(run.compact.code, run.compact.output).toBe(0);
    expect(run.storedAfter.size).toBe(run.ids.length);
    expect([...run.storedAfter.values()].every((copies) => copies === 1)).toBe(true);
    expect(run.broken).toEqual([]);
    // Each reconciliation tick won in the store by one scheduler, and run or skipped once, by name.
    expect(run.ticks).toBeGreaterThanOrEqual(3);
    expect(run.tickRuns, why).toEqual({ twice: [], neither: [], withoutTick: [] });
    expect(run.ran + run.skipped).toBe(run.ticks);
    console.log(JSON.stringify({ scaleOut: { posted: run.ids.length, acknowledged: run.acked.size, archived: run.answers.ndjson.size, kills: run.kills, convergedSeconds: run.convergedSeconds, seconds: run.seconds, storedRows: [...run.storedBefore.values()].reduce((a, b) => a + b, 0), deadLettered: run.deadLettered, ticks: run.ticks, ran: run.ran } }));
  }, 900_000);
});
