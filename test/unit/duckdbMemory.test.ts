// releaseAll: what a long step left behind is collected before a step that needs much memory.
import { describe, expect, it } from 'vitest';
import { releaseAll } from '../../src/archive/duckdbMemory.js';

describe('releaseAll', () => {
  it('collects the garbage a long step left in the old generation, all of it at once', () => {
    releaseAll();
    const before = process.memoryUsage().heapUsed;
    // About 200 MB of objects that survive long enough to be promoted, then dropped.
    let kept: { id: number; text: string }[][] = [];
    for (let round = 0; round < 20; round++) kept.push(Array.from({ length: 100_000 }, (_, i) => ({ id: i, text: `report ${round}-${i}` })));
    const grown = process.memoryUsage().heapUsed;
    expect(grown - before).toBeGreaterThan(100 * 1024 ** 2);
    kept = [];
    releaseAll();
    // Left to itself, V8 would keep most of it until its next full collection.
    expect(process.memoryUsage().heapUsed - before).toBeLessThan((grown - before) / 10);
    expect(kept).toEqual([]);
  });
});
