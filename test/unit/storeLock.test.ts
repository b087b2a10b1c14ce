// A process stopped by a signal gives its store locks back only once their jobs have stopped: a
// write of the job still under way could otherwise land after the next run took the lock (a
// release's manifest over files its successor had removed).
import { describe, expect, it } from 'vitest';
import { giveBackLocks, withStoreLock, type StoreLock } from '../../src/ops/storeLock.js';
import { FileObjectStore } from '../../src/store/fileStore.js';
import { pause } from '../../src/shared/pause.js';
import { eventually, tempDir } from '../support/env.js';

const KEY = 'jobs/locks/test-job.json';

class LostError extends Error {}

function lockIn(store: StoreLock['store']): StoreLock {
  return { store, key: KEY, what: 'test job', log: { warn: () => undefined }, errors: { running: (m) => new Error(m), lost: (m) => new LostError(m) } };
}

/** A promise and what settles it: a write under way, held as long as the test likes. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  return { opened: new Promise<void>((resolve) => (open = resolve)), open };
}

describe('store locks stopped by a signal', () => {
  it('are given back once the job reaches its next step, not while a write of its is under way', async () => {
    const store = new FileObjectStore(await tempDir());
    const write = gate();
    let steps = 0;
    const job = withStoreLock(lockIn(store), async (stillHeld) => {
      for (;;) {
        stillHeld();
        steps += 1;
        await write.opened; // a PUT in flight
        await store.put(`written/${steps}`, 'x');
      }
    });
    void job.catch(() => undefined);
    await eventually(async () => (steps === 1 ? true : undefined), 15_000, 'the job in its first step');
    expect(await store.head(KEY)).toBeDefined();
    const givenBack = giveBackLocks(10_000);
    await pause(200);
    // The job is still in its step: its lock stays.
    expect(await store.head(KEY)).toBeDefined();
    write.open();
    await givenBack;
    // Its write landed while it held the lock, and it stopped at the step after.
    await expect(job).rejects.toBeInstanceOf(LostError);
    expect(await store.head('written/1')).toBeDefined();
    expect(steps).toBe(1);
    expect(await store.head(KEY)).toBeUndefined();
  });

  it('are left to go stale when the job stays in its step past the wait', async () => {
    const store = new FileObjectStore(await tempDir());
    const step = gate();
    let inStep = false;
    const job = withStoreLock(lockIn(store), () => ((inStep = true), step.opened));
    await eventually(async () => (inStep ? true : undefined), 15_000, 'the job in its step');
    await giveBackLocks(300);
    expect(await store.head(KEY)).toBeDefined();
    // Its step ends (in a process that exits on the signal, it would not): it ends as it would have.
    step.open();
    await job;
    expect(await store.head(KEY)).toBeUndefined();
  });

  it('taken while the signal came: the job never starts, and the lock is given back', async () => {
    const real = new FileObjectStore(await tempDir());
    const create = gate();
    let creating = false;
    const slow: StoreLock['store'] = {
      description: real.description,
      get: (key) => real.get(key),
      putIfMatch: (key, body, etag) => real.putIfMatch(key, body, etag),
      delete: (keys) => real.delete(keys),
      putIfAbsent: async (key, body) => {
        creating = true;
        await create.opened;
        return real.putIfAbsent(key, body);
      },
    };
    let started = false;
    const job = withStoreLock(lockIn(slow), async () => {
      started = true;
    });
    void job.catch(() => undefined);
    await eventually(async () => (creating ? true : undefined), 15_000, 'the lock being taken');
    const givenBack = giveBackLocks(10_000);
    create.open();
    await givenBack;
    await expect(job).rejects.toBeInstanceOf(LostError);
    expect(started).toBe(false);
    expect(await real.head(KEY)).toBeUndefined();
  });
});

describe("a store lock at its job's end", () => {
  /** The store, its deletes of the lock failing the first `failing` times. */
  function failingDeletes(store: FileObjectStore, failing: number): StoreLock['store'] {
    let failed = 0;
    return {
      description: store.description,
      get: (key) => store.get(key),
      putIfAbsent: (key, body) => store.putIfAbsent(key, body),
      putIfMatch: (key, body, etag) => store.putIfMatch(key, body, etag),
      delete: async (keys) => {
        if (keys.includes(KEY) && failed++ < failing) throw new Error('object store request failed (InternalError)');
        await store.delete(keys);
      },
    };
  }

  it("is given back when a delete fails once, and a lock left is told in the log, the job's result standing", async () => {
    const files = new FileObjectStore(await tempDir());
    expect(await withStoreLock(lockIn(failingDeletes(files, 1)), async () => 'done')).toBe('done');
    expect(await files.head(KEY)).toBeUndefined();

    const warned: string[] = [];
    const warn = ((_o: object, message: string) => void warned.push(message)) as StoreLock['log']['warn'];
    const lock = { ...lockIn(failingDeletes(files, Infinity)), log: { warn } };
    expect(await withStoreLock(lock, async () => 'done')).toBe('done');
    expect(await files.head(KEY)).toBeDefined();
    expect(warned).toEqual([expect.stringMatching(/test job's lock could not be given back: another process's test job waits until it is stale \(5 minutes\)/)]);
  });
});
