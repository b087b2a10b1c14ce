// The scheduler's run coordinator on the store: one run of a job at a time across processes, a
// lease past its time taken over, and a run that outlived its lease never ending its successor's.
import { describe, expect, it } from 'vitest';
import { StoreRunCoordinator } from '../../src/main/scheduler.js';
import { createLogger } from '../../src/shared/log.js';
import { FileObjectStore } from '../../src/store/fileStore.js';
import { tempDir } from '../support/env.js';

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
});
