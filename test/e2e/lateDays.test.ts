// Reports posted late into days older than the compaction job's week (a partner's history, a
// phone that was offline): each flush stores a small part there, and the scheduled job merges
// those days too, found from the change logs written since its last run.
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compaction } from '../../jobs/compaction.js';
import { listWindowParts } from '../../src/archive/partListing.js';
import { lateDays } from '../../src/ops/lateDays.js';
import { createLogger } from '../../src/shared/log.js';
import { DAY_MS, LATE_DAYS_READ_KEY } from '../../src/store/layout.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { allArchived, BACKENDS, postReport, report, startTestService, testConfig, testRuntime, type TestService } from '../support/env.js';

const SETTLE_MS = 300;

describe.each(BACKENDS)('the compaction job and late reports (%s)', (kind) => {
  let emulator: Emulator | undefined;
  let svc: TestService;
  beforeAll(async () => {
    if (kind === 'aws') emulator = await startEmulator();
    svc = await startTestService(await testRuntime(await testConfig(kind, emulator, { SYNC_SETTLE_SECONDS: String(SETTLE_MS / 1000) }), emulator));
  });
  afterAll(async () => {
    await svc?.stop();
    await emulator?.stop();
  });

  const partsOf = async (dayMs: number) => (await listWindowParts(svc.rt.store, dayMs, dayMs + DAY_MS - 1)).flatMap((h) => h.parts.map((p) => [h.wholeDay, p.key] as const));
  const answer = async (dayMs: number) => (await fetch(`${svc.url}/reports/archive?start=${new Date(dayMs).toISOString()}&end=${new Date(dayMs + DAY_MS - 1).toISOString()}&format=ndjson`)).text();

  it('merges a day a month back that late posts gave several parts, and looks no further back than its last run', async () => {
    const month = Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth() - 1, 10);
    const twoMonths = month - 31 * DAY_MS;
    // Two flushes into each day: two parts each.
    for (const [i, dayMs] of [month, twoMonths].entries()) {
      for (const hour of [3, 9]) {
        expect((await postReport(svc.url, report(800 + i * 10 + hour, { created_at: new Date(dayMs + hour * 3_600_000).toISOString() }))).status).toBe(201);
        await allArchived(svc.rt);
      }
    }
    expect(await partsOf(month)).toHaveLength(2);
    const before = await answer(month);
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const ran = (await compaction.run(svc.rt)) as { lateDays: string[]; lateDaysCompacted: number };
    expect(ran).toMatchObject({ lateDays: [new Date(twoMonths).toISOString().slice(0, 10), new Date(month).toISOString().slice(0, 10)], lateDaysCompacted: 2 });
    for (const dayMs of [month, twoMonths]) expect((await partsOf(dayMs)).map(([wholeDay]) => wholeDay)).toEqual([true]);
    expect(await answer(month)).toBe(before);
    expect(await svc.rt.store.get(LATE_DAYS_READ_KEY)).toBeDefined();

    // The next run reads only the logs written since: a day merged before is not looked at again.
    expect((await postReport(svc.url, report(850, { created_at: new Date(month + 5 * 3_600_000).toISOString() }))).status).toBe(201);
    await allArchived(svc.rt);
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    expect(await compaction.run(svc.rt)).toMatchObject({ lateDays: [new Date(month).toISOString().slice(0, 10)], lateDaysCompacted: 1 });
    expect(await partsOf(month)).toHaveLength(1);
    expect(await compaction.run(svc.rt)).toMatchObject({ lateDays: [], lateDaysCompacted: 0 });
  });

  it('leaves the days past its cap to the next run, from the same logs, and warns of a span whose logs were pruned', async () => {
    // Three days two months back, each given two hours' parts by one flush.
    const first = Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth() - 2, 3);
    const days = [first, first + DAY_MS, first + 2 * DAY_MS];
    for (const [i, dayMs] of days.entries()) {
      for (const hour of [4, 7]) expect((await postReport(svc.url, report(900 + i * 10 + hour, { created_at: new Date(dayMs + hour * 3_600_000).toISOString() }))).status).toBe(201);
    }
    await allArchived(svc.rt);
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const warned: string[] = [];
    const sink = new Writable({ write: (chunk: Buffer, _encoding, done) => done(void warned.push(JSON.parse(chunk.toString('utf8')).msg)) });
    const deps = { store: svc.rt.store, changes: svc.rt.changes, log: createLogger('warn', sink) };
    const now = Date.now();
    const marker = async () => (await svc.rt.store.get(LATE_DAYS_READ_KEY))?.body.toString('utf8');
    const readBefore = await marker();

    // Two a run: the oldest two now, and the logs' end not recorded, so the third is found again.
    const capped = await lateDays(deps, now - 7 * DAY_MS, now, 3_600_000, 2);
    expect(capped.days).toEqual(days.slice(0, 2));
    await capped.done();
    expect(await marker()).toBe(readBefore);
    const uncapped = await lateDays(deps, now - 7 * DAY_MS, now, 3_600_000);
    expect(uncapped.days).toEqual(days);
    await uncapped.done();
    expect(await marker()).not.toBe(readBefore);
    expect(warned).toEqual([]);

    // A last look older than the logs kept: the days written since the horizon, and a warning for the span before it.
    await svc.rt.store.put(LATE_DAYS_READ_KEY, JSON.stringify({ v: 1, readUpToMs: Date.UTC(2001, 0, 1) }));
    const horizon = await svc.rt.changes.horizon();
    expect(horizon).toBeGreaterThan(Date.UTC(2001, 0, 1));
    expect((await lateDays(deps, now - 7 * DAY_MS, now, 3_600_000)).days).toEqual(days);
    expect(warned).toEqual([expect.stringMatching(/pruned: run compact --from --to/)]);
  });
});
