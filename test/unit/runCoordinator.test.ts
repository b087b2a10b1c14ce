// The scheduler's run coordinator on the store: one run of a job at a time across processes, a
// lease past its time taken over, and a run that outlived its lease never ending its successor's.
import { describe, expect, it } from 'vitest';
import { startScheduler, StoreRunCoordinator } from '../../src/main/scheduler.js';
import { createLogger } from '../../src/shared/log.js';
import { FileObjectStore } from '../../src/store/fileStore.js';
import { tempDir, testConfig, testRuntime } from '../support/env.js';

describe('the run coordinator', () => {
  it("takes over a lapsed lease, and the lapsed run's end leaves the new run's lease", async () => {
    const store = new FileObjectStore(await tempDir('flood-runs-'));
    const log = createLogger('silent');
    const [a, b, c] = ['a', 'b', 'c'].map((owner) => new StoreRunCoordinator(store, owner, log)) as [StoreRunCoordinator, StoreRunCoordinator, StoreRunCoordinator];
    expect(await a.shouldRun('compaction:2026-11-30T10:00:00.000Z')).toBe(true);
    // Another process's next tick: A's run is still going.
    expect(await b.shouldRun('compaction:2026-11-30T11:00:00.000Z')).toBe(false);
    // A's run goes on past its lease (as a scheduler that died mid-run would leave it).
    const lease = JSON.parse((await store.get('jobs/leases/compaction.json'))!.body.toString('utf8')) as { until: number };
    await store.put('jobs/leases/compaction.json', JSON.stringify({ ...lease, until: Date.now() - 1 }));
    expect(await b.shouldRun('compaction:2026-11-30T12:00:00.000Z')).toBe(true);
    // A ends at last: B's run still holds its lease, so C's tick waits.
    await a.onComplete('compaction:2026-11-30T10:00:00.000Z');
    expect(await c.shouldRun('compaction:2026-11-30T13:00:00.000Z')).toBe(false);
    // B's end gives it back.
    await b.onComplete('compaction:2026-11-30T12:00:00.000Z');
    expect(await c.shouldRun('compaction:2026-11-30T14:00:00.000Z')).toBe(true);
  });

  it('lets one of two schedulers take a lapsed lease that both read as lapsed: the lease is written over the version read', async () => {
    const store = new FileObjectStore(await tempDir('flood-runs-'));
    const log = createLogger('silent');
    await store.put('jobs/leases/compaction.json', JSON.stringify({ owner: 'gone', slot: 'x', until: Date.now() - 1 }));
    // B reads the lapsed lease too, and takes it just before A writes: A's write is refused.
    const b = new StoreRunCoordinator(store, 'b', log);
    let raced = false;
    const racing = Object.assign(Object.create(store) as FileObjectStore, {
      putIfMatch: async (key: string, body: string, etag: string) => {
        if (key === 'jobs/leases/compaction.json' && !raced) {
          raced = true;
          expect(await b.shouldRun('compaction:2026-11-30T10:00:00.000Z')).toBe(true);
        }
        return store.putIfMatch(key, body, etag);
      },
    });
    const late = new StoreRunCoordinator(racing, 'a', log);
    expect(await late.shouldRun('compaction:2026-11-30T11:00:00.000Z')).toBe(false);
    expect(JSON.parse((await store.get('jobs/leases/compaction.json'))!.body.toString('utf8')).owner).toBe('b');
    await b.releaseAll();
  });

  it('renews a lease while its run goes on, and gives it back when its scheduler stops', async () => {
    const store = new FileObjectStore(await tempDir('flood-runs-'));
    const log = createLogger('silent');
    const a = new StoreRunCoordinator(store, 'a', log, 300);
    const b = new StoreRunCoordinator(store, 'b', log, 300);
    expect(await a.shouldRun('compaction:2026-11-30T10:00:00.000Z')).toBe(true);
    // Twice the lease's time later A's run is still going: its lease was renewed.
    await new Promise((r) => setTimeout(r, 700));
    expect(await b.shouldRun('compaction:2026-11-30T11:00:00.000Z')).toBe(false);
    await a.releaseAll();
    expect(await store.get('jobs/leases/compaction.json')).toBeUndefined();
    expect(await b.shouldRun('compaction:2026-11-30T12:00:00.000Z')).toBe(true);
  });

  it('gives its lease back for good when a renewal is under way (the renewal does not write it back after)', async () => {
    const files = new FileObjectStore(await tempDir('flood-runs-'));
    // The store answers the lease's writes slowly: a renewal is still writing when the run ends.
    const slow = new Proxy(files, {
      get(target, name) {
        const value = Reflect.get(target, name, target) as unknown;
        if (name !== 'put' && name !== 'putIfMatch') return typeof value === 'function' ? value.bind(target) : value;
        return async (...args: unknown[]) => {
          await new Promise((r) => setTimeout(r, 150));
          return (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        };
      },
    });
    const a = new StoreRunCoordinator(slow, 'a', createLogger('silent'), 300);
    expect(await a.shouldRun('compaction:2026-11-30T10:00:00.000Z')).toBe(true);
    await new Promise((r) => setTimeout(r, 130)); // a renewal has begun (every 100 ms)
    await a.releaseAll();
    await new Promise((r) => setTimeout(r, 400));
    expect(await files.get('jobs/leases/compaction.json')).toBeUndefined();
  });

  it('takes a tick whose key it created itself (a create retried after its answer was lost), and only that one', async () => {
    const store = new FileObjectStore(await tempDir('flood-runs-'));
    const log = createLogger('silent');
    await store.put('jobs/runs/compaction/2026-11-30T10-00-00.000Z.json', JSON.stringify({ owner: 'a', at: new Date().toISOString() }));
    expect(await new StoreRunCoordinator(store, 'b', log).shouldRun('compaction:2026-11-30T10:00:00.000Z')).toBe(false);
    expect(await new StoreRunCoordinator(store, 'a', log).shouldRun('compaction:2026-11-30T10:00:00.000Z')).toBe(true);
  });

  it('a scheduler stopped in the middle of a run leaves no lease behind for the next one', async () => {
    const rt = await testRuntime(await testConfig('embedded'));
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const scheduler = startScheduler(rt, [{ name: 'slow', schedule: () => '* * * * * *', run: async () => (started(), await new Promise((r) => setTimeout(r, 1000))) }], 'a');
    try {
      await running;
      await scheduler.stop();
      expect(await rt.store.get('jobs/leases/slow.json')).toBeUndefined();
    } finally {
      await rt.close();
    }
  });
});
