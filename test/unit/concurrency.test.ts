// An import's batches are written one step behind their validation and acceptance: OneBehind
// overlaps a step's tail with the next step, runs tails one at a time in order, and hands a
// tail's failure to the producer.
// Bulk writes run many small parts at once and a storm's day with few others: mapWeighted keeps
// both bounds, starts parts in order, and on a failure starts nothing more and settles only once
// what had started is done (an import removes its scratch files after it).
// An import's checkpoint saves share writes (coalescing): each save resolves once a write begun
// after it is on disk, and writes never overlap.
import { describe, expect, it } from 'vitest';
import { coalescing, mapLimit, mapWeighted, OneBehind } from '../../src/ops/concurrency.js';

/** Runs mapWeighted over `weights`, each item held until released; records what ran at once. */
function harness(weights: number[], limit: number, budget: number, failing = new Set<number>()) {
  const release = new Map<number, () => void>();
  const running = new Set<number>();
  const overlaps: number[][] = [];
  const started: number[] = [];
  const finished: number[] = [];
  const done = mapWeighted(weights, { limit, budget, weight: (w) => w }, async (w, i) => {
    started.push(i);
    running.add(i);
    overlaps.push([...running].sort((a, b) => a - b));
    await new Promise<void>((r) => release.set(i, r));
    running.delete(i);
    finished.push(i);
    if (failing.has(i)) throw new Error(`item ${i} failed`);
    return w * 10;
  });
  const settle = async () => {
    // Let started items register, then release them one at a time, oldest first.
    for (;;) {
      await new Promise((r) => setImmediate(r));
      const next = [...release.keys()][0];
      if (next === undefined) break;
      release.get(next)!();
      release.delete(next);
    }
  };
  return { done, settle, overlaps, started, finished };
}

describe('mapWeighted', () => {
  it('keeps at most `limit` in flight and their weights within the budget, in order, with every result', async () => {
    const weights = [1, 1, 1, 1, 1, 5, 1, 6, 9, 1, 1];
    const h = harness(weights, 4, 8);
    const [results] = await Promise.all([h.done, h.settle()]);
    expect(results).toEqual(weights.map((w) => w * 10));
    expect(h.started).toEqual(weights.map((_, i) => i));
    for (const group of h.overlaps) {
      expect(group.length).toBeLessThanOrEqual(4);
      const load = group.reduce((sum, i) => sum + weights[i]!, 0);
      // Over the budget only when one item alone weighs more.
      if (group.length > 1) expect(load).toBeLessThanOrEqual(8);
    }
    // Small ones do go four at a time; the one of 9 ran alone.
    expect(Math.max(...h.overlaps.map((g) => g.length))).toBe(4);
    expect(h.overlaps.filter((g) => g.includes(8))).toEqual([[8]]);
  });

  it('starts nothing after a failure and rejects with the first one once what had started is done', async () => {
    const h = harness([1, 1, 1, 1, 1, 1, 1, 1], 3, 100, new Set([1, 2]));
    const [outcome] = await Promise.all([h.done.then(() => 'resolved', (err: Error) => err.message), h.settle()]);
    expect(outcome).toBe('item 1 failed');
    // 0, 1 and 2 started at once; 3 took 0's place before 1 failed; nothing after.
    expect(h.started).toEqual([0, 1, 2, 3]);
    expect(h.finished.sort()).toEqual([0, 1, 2, 3]);
  });

  it('resolves at once with nothing to do, and treats a throwing fn as a failure', async () => {
    await expect(mapWeighted([], { limit: 2, budget: 1, weight: () => 1 }, async () => 1)).resolves.toEqual([]);
    await expect(
      mapWeighted([1, 2], { limit: 2, budget: 10, weight: () => 1 }, (w) => {
        if (w === 2) throw new Error('sync throw');
        return Promise.resolve(w);
      }),
    ).rejects.toThrow('sync throw');
  });
});

describe('mapLimit', () => {
  it('starts nothing after a failure, and rejects once what had started is done (a failed flush writes no more parts)', async () => {
    const started: number[] = [];
    const finished: number[] = [];
    let settled = false;
    const run = mapLimit([0, 1, 2, 3, 4, 5], 2, async (i) => {
      started.push(i);
      await new Promise((r) => setTimeout(r, i === 0 ? 5 : 30));
      if (i === 0) throw new Error('store refused');
      finished.push(i);
      return i;
    }).finally(() => (settled = true));
    await expect(run).rejects.toThrow('store refused');
    expect(settled).toBe(true);
    // 0 failed while 1 ran: 1 finished before the rejection, and nothing after them started.
    expect([started, finished]).toEqual([[0, 1], [1]]);
  });
});

describe('OneBehind', () => {
  it('lets the producer go on while a tail runs, and starts a tail only once the one before it is done', async () => {
    const steps = new OneBehind();
    const log: string[] = [];
    const release: (() => void)[] = [];
    const tail = (n: number) => async () => {
      log.push(`start ${n}`);
      await new Promise<void>((r) => release.push(r));
      log.push(`end ${n}`);
    };
    await steps.then(tail(1));
    log.push('produced 2'); // while tail 1 is still running
    const second = steps.then(tail(2));
    await new Promise((r) => setImmediate(r));
    expect(log).toEqual(['start 1', 'produced 2']);
    release.shift()!();
    await second;
    expect(log).toEqual(['start 1', 'produced 2', 'end 1', 'start 2']);
    release.shift()!();
    await steps.settle();
    expect(log).toEqual(['start 1', 'produced 2', 'end 1', 'start 2', 'end 2']);
  });

  it("hands a tail's failure to the next step and to settle, never unhandled", async () => {
    const steps = new OneBehind();
    await steps.then(async () => {
      throw new Error('disk full');
    });
    let ran = false;
    await expect(
      steps.then(async () => {
        ran = true;
      }),
    ).rejects.toThrow('disk full');
    expect(ran).toBe(false);
    await expect(steps.settle()).rejects.toThrow('disk full');
    await expect(steps.idle()).resolves.toBeUndefined();
  });
});

describe('coalescing', () => {
  it('serves the saves made during a write with one write begun after them, never two at once', async () => {
    let state = 0;
    const written: number[] = [];
    const release: (() => void)[] = [];
    let writing = 0;
    let most = 0;
    const save = coalescing(async () => {
      const seen = state;
      most = Math.max(most, ++writing);
      await new Promise<void>((r) => release.push(r));
      written.push(seen);
      writing -= 1;
    });
    state = 1;
    const first = save();
    state = 2;
    const second = save();
    state = 3;
    const third = save();
    await new Promise((r) => setImmediate(r));
    expect(release).toHaveLength(1); // the second and third wait for one write after the first
    release.shift()!();
    await first;
    expect(written).toEqual([1]);
    await new Promise((r) => setImmediate(r));
    expect(release).toHaveLength(1);
    release.shift()!();
    await Promise.all([second, third]);
    // What the later saves saw is on disk: the state when their write began.
    expect(written).toEqual([1, 3]);
    expect(most).toBe(1);
    // Idle again: the next save writes at once.
    state = 4;
    const fourth = save();
    await new Promise((r) => setImmediate(r));
    release.shift()!();
    await fourth;
    expect(written).toEqual([1, 3, 4]);
  });

  it('fails the saves a failed write served, and writes again for the next', async () => {
    let fail = true;
    const save = coalescing(async () => {
      if (fail) throw new Error('disk full');
    });
    await expect(save()).rejects.toThrow('disk full');
    fail = false;
    await expect(save()).resolves.toBeUndefined();
  });
});
