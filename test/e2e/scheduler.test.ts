// The scheduler: node-cron with a run coordinator on the object store.
import { describe, expect, it } from 'vitest';
import { JOBS } from '../../jobs/index.js';
import { startScheduler, type JobDefinition } from '../../src/main/scheduler.js';
import { withStoreLock } from '../../src/ops/storeLock.js';
import type { IngestRecord } from '../../src/ingest/intake.js';
import { parsePartnerReport } from '../../src/partners/partnerReport.js';
import { eventually, report, testConfig, testRuntime } from '../support/env.js';

describe('scheduler', () => {
  it('has the compaction, reconciliation, verify and release jobs on their configured schedules', async () => {
    const config = await testConfig('embedded', undefined, { SCHEDULE_COMPACT: '7 * * * *', SCHEDULE_RECONCILE: '*/3 * * * *', SCHEDULE_VERIFY: '0 4 * * *', SCHEDULE_RELEASE: '0 5 3 * *' });
    expect(JOBS.map((j) => [j.name, j.schedule(config)])).toEqual([
      ['compaction', '7 * * * *'],
      ['reconciliation', '*/3 * * * *'],
      ['verification', '0 4 * * *'],
      ['release', '0 5 3 * *'],
    ]);
  });

  // The embedded store's create-if-absent is O_EXCL; S3, LocalStack and MinIO enforce
  // If-None-Match the same way, which the in-process S3 emulator does not, so this runs embedded.
  it('two schedulers started together run each job once per tick, and a slow run never overlaps the next', async () => {
    const config = await testConfig('embedded');
    const a = await testRuntime(config);
    const b = await testRuntime(config);
    const runs: { job: string; owner: string; second: number }[] = [];
    let slowRunning = 0;
    let overlapped = false;
    const recorder = (owner: string): JobDefinition[] => [
      {
        name: 'tick',
        schedule: () => '* * * * * *',
        run: async () => void runs.push({ job: 'tick', owner, second: Math.floor(Date.now() / 1000) }),
      },
      {
        name: 'slow',
        schedule: () => '* * * * * *',
        run: async () => {
          if (slowRunning > 0) overlapped = true;
          slowRunning += 1;
          runs.push({ job: 'slow', owner, second: Math.floor(Date.now() / 1000) });
          await new Promise((r) => setTimeout(r, 2500));
          slowRunning -= 1;
        },
      },
    ];
    const sa = startScheduler(a, recorder('a'), 'a');
    const sb = startScheduler(b, recorder('b'), 'b');
    await new Promise((r) => setTimeout(r, 5500));
    await Promise.all([sa.stop(), sb.stop()]);
    await Promise.all([a.close(), b.close()]);

    const ticks = runs.filter((r) => r.job === 'tick');
    // A loaded machine may miss a tick; what matters is that no tick ran twice.
    expect(ticks.length).toBeGreaterThanOrEqual(2);
    const perSecond = new Map<number, number>();
    for (const t of ticks) perSecond.set(t.second, (perSecond.get(t.second) ?? 0) + 1);
    expect([...perSecond.values()].every((n) => n === 1)).toBe(true);
    const slow = runs.filter((r) => r.job === 'slow');
    // 2.5 s runs in a 5.5 s span: never more than three, and never two at once.
    expect(slow.length).toBeGreaterThanOrEqual(1);
    expect(slow.length).toBeLessThanOrEqual(3);
    expect(overlapped).toBe(false);
    // The ticks that came while a slow run went on were counted, by job, where it ran.
    const overlappedTicks = async (rt: typeof a) => (await rt.metrics.registry.getSingleMetric('job_runs_total')!.get()).values.filter((v) => v.labels.job === 'slow' && v.labels.result === 'overlapped').reduce((n, v) => n + v.value, 0);
    expect((await overlappedTicks(a)) + (await overlappedTicks(b))).toBeGreaterThanOrEqual(1);
    expect((await overlappedTicks(a)) + (await overlappedTicks(b))).toBeLessThanOrEqual(2 * 6);
  });

  it('the verification job fails its run on a lost report, as verify exits 1', async () => {
    const rt = await testRuntime(await testConfig('embedded'));
    try {
      const verification = JOBS.find((j) => j.name === 'verification')!;
      await expect(verification.run(rt)).resolves.toMatchObject({ ok: true });
      // Accepted an hour ago and recorded as archived, with no part holding it: lost.
      const created = new Date(Date.now() - 3_600_000).toISOString();
      const record: IngestRecord = { v: 1, pkey: 'partner-9501', source: 'partner', post_id: 9501, received_at: created, report: parsePartnerReport(report(9501, { created_at: created })) };
      await rt.ledger.accept(record);
      await rt.ledger.markArchived([record.pkey]);
      await expect(verification.run(rt)).rejects.toThrow(/verify found 0 damaged parts, 1 lost reports and 0 archived at another time/);
    } finally {
      await rt.close();
    }
  });

  it('runs a tick the process reached late (a stalled event loop), and counts one it could not claim as skipped, giving the tick back', async () => {
    const config = await testConfig('embedded');
    const rt = await testRuntime(config);
    const ran: number[] = [];
    const late = startScheduler(rt, [{ name: 'late', schedule: () => '*/10 * * * * *', run: async () => void ran.push(Date.now()) }], 'late');
    try {
      // The loop held past the next tick by 2.5 s (a long synchronous step): the tick still runs.
      const next = late.tasks[0]!.getNextRun()!.getTime();
      while (Date.now() < next + 2500) {
        // busy: nothing else runs on this thread meanwhile
      }
      await eventually(async () => (ran.length > 0 ? true : undefined), 15_000, 'the late tick');
      // That tick, not the one after it (node-cron's default would have passed it by as missed):
      // the run claimed it by its time, however long a loaded machine took to start it.
      expect(ran[0]).toBeGreaterThanOrEqual(next + 2500);
      const claimedTicks: string[] = [];
      for await (const info of rt.store.list({ prefix: 'jobs/runs/late/' })) claimedTicks.push(info.key);
      expect(claimedTicks).toContain(`jobs/runs/late/${new Date(next).toISOString().replace(/[^A-Za-z0-9._-]/g, '-')}.json`);
    } finally {
      await late.stop();
    }
    // The store fails once the tick is claimed (reading the run's lease): the tick is given back,
    // counted as skipped, and logged.
    let failLease = true;
    const flaky = Object.assign(Object.create(rt.store) as typeof rt.store, {
      get: async (key: string) => {
        if (key.startsWith('jobs/leases/') && failLease) {
          failLease = false;
          throw new Error('store unavailable');
        }
        return rt.store.get(key);
      },
    });
    const skipped = startScheduler({ ...rt, store: flaky }, [{ name: 'claimed', schedule: () => '* * * * * *', run: async () => undefined }], 'claimed');
    let slot: string | undefined;
    skipped.tasks[0]!.on('execution:skipped', (context) => void (slot ??= context.date.toISOString()));
    try {
      const counted = (result: string) => async () => ((await rt.metrics.registry.getSingleMetricAsString('job_runs_total')).includes(`job="claimed",result="${result}"`) ? true : undefined);
      await eventually(counted('skipped'), 10_000, 'a skipped tick counted');
      await eventually(counted('ok'), 10_000, 'a later tick run');
      const claimed: string[] = [];
      for await (const info of rt.store.list({ prefix: 'jobs/runs/claimed/' })) claimed.push(info.key);
      // The ticks that ran keep their keys; the one given back has none.
      expect(claimed.length).toBeGreaterThan(0);
      expect(claimed).not.toContain(`jobs/runs/claimed/${slot!.replace(/[^A-Za-z0-9._-]/g, '-')}.json`);
    } finally {
      await skipped.stop();
      await rt.close();
    }
  }, 30_000);

  it('a stop waits for runs under way up to its grace, then gives their leases back, and their locks once their jobs stop at a step: the next scheduler runs the next tick at once', async () => {
    const config = await testConfig('embedded');
    const rt = await testRuntime(config);
    let started = 0;
    const forever: JobDefinition[] = [{ name: 'endless', schedule: () => '* * * * * *', run: () => { started += 1; return new Promise(() => undefined); } }];
    const first = startScheduler(rt, forever, 'first', { stopGraceMs: 1_000 });
    try {
      await eventually(async () => (started > 0 ? true : undefined), 10_000, 'the endless run');
      // Locks the run holds in the store (a compaction's, say): one whose job goes on step by step,
      // given back with its lease once the job stops at its next step; one whose job stays in a
      // step (a write under way), left to go stale rather than given back under that write.
      const lockOf = (key: string) => ({ store: rt.store, key, what: 'endless job', log: rt.log, errors: { running: (m: string) => new Error(m), lost: (m: string) => new Error(m) } });
      const stepping = withStoreLock(lockOf('jobs/locks/endless.json'), async (stillHeld) => {
        for (;;) {
          stillHeld();
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      });
      const stuck = withStoreLock(lockOf('jobs/locks/stuck.json'), () => new Promise(() => undefined));
      for (const job of [stepping, stuck]) void job.catch(() => undefined);
      await eventually(async () => ((await rt.store.get('jobs/locks/endless.json')) && (await rt.store.get('jobs/locks/stuck.json')) ? true : undefined), 10_000, 'the locks taken');
      expect(await rt.store.get('jobs/leases/endless.json')).toBeDefined();
      await first.stop();
      expect(await rt.store.get('jobs/leases/endless.json')).toBeUndefined();
      expect(await rt.store.get('jobs/locks/endless.json')).toBeUndefined();
      expect(await rt.store.get('jobs/locks/stuck.json')).toBeDefined();
      // The next scheduler's next tick runs: no lease holds it back.
      const ran: number[] = [];
      const next = startScheduler(rt, [{ name: 'endless', schedule: () => '* * * * * *', run: async () => void ran.push(Date.now()) }], 'next');
      await eventually(async () => (ran.length > 0 ? true : undefined), 10_000, 'the next tick');
      await next.stop();
    } finally {
      await rt.close();
    }
  }, 30_000);
});
