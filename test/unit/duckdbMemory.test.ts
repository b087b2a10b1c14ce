// releaseAll and releaseMemory: what a long step left behind is collected, all of it, when the
// process has grown (releaseMemory) or before a step that needs much memory (releaseAll).
import { describe, expect, it } from 'vitest';
import { releaseAll, releaseMemory } from '../../src/archive/duckdbMemory.js';

/** Heap growth, and what is left of it after `release`, when about 200 MB of promoted objects are dropped. */
function garbageLeft(release: () => void): { grown: number; left: number } {
  releaseAll();
  const before = process.memoryUsage().heapUsed;
  let kept: { id: number; text: string }[][] = [];
  for (let round = 0; round < 20; round++) kept.push(Array.from({ length: 100_000 }, (_, i) => ({ id: i, text: `report ${round}-${i}` })));
  const grown = process.memoryUsage().heapUsed - before;
  kept = [];
  release();
  expect(kept).toEqual([]);
  return { grown, left: process.memoryUsage().heapUsed - before };
}

describe('collecting what a long step left behind', () => {
  it('releaseAll collects the garbage a long step left in the old generation, all of it at once', () => {
    const { grown, left } = garbageLeft(releaseAll);
    expect(grown).toBeGreaterThan(100 * 1024 ** 2);
    // Left to itself, V8 would keep most of it until its next full collection.
    expect(left).toBeLessThan(grown / 10);
  });

  it('releaseMemory, once the process has grown past its slack, collects all of it too', () => {
    const { grown, left } = garbageLeft(() => releaseMemory());
    expect(grown).toBeGreaterThan(100 * 1024 ** 2);
    expect(left).toBeLessThan(grown / 10);
  });
});
