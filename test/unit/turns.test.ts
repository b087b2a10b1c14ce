// A bulk job's writes go in timed turns: each sized from the last one's time so the write lock is
// held about `lockMs`, never fewer rows than the smallest. An import calls it once per batch,
// and each batch starts at the size the batch before it learned.
import { describe, expect, it } from 'vitest';
import { inTimedTurns, type TurnSize } from '../../src/sqlite/turns.js';

/** A write that keeps the thread busy `perItemMs` per item, and records each turn's size. */
function busyWrite(perItemMs: number, sizes: number[]) {
  return (chunk: readonly number[]) => {
    sizes.push(chunk.length);
    const until = performance.now() + chunk.length * perItemMs;
    while (performance.now() < until);
  };
}

const items = (n: number) => Array.from({ length: n }, (_, i) => i);

describe('inTimedTurns', () => {
  it('writes every item once, in order, starting at the smallest turn', async () => {
    const written: number[] = [];
    const sizes: number[] = [];
    await inTimedTurns(items(3_000), (chunk) => {
      sizes.push(chunk.length);
      written.push(...chunk);
    }, { lockMs: 5, othersWrote: () => false, smallest: 100 });
    expect(written).toEqual(items(3_000));
    expect(sizes[0]).toBe(100);
    expect(Math.min(...sizes.slice(0, -1))).toBeGreaterThanOrEqual(100);
  });

  it('starts a call at the size the call before it learned', async () => {
    const learned: TurnSize = { size: 0 };
    const first: number[] = [];
    // A lock time far above what any turn here takes, even on a loaded machine that deschedules
    // the writer mid-turn: the turns surely grow.
    await inTimedTurns(items(4_000), busyWrite(0.005, first), { lockMs: 1_000, othersWrote: () => false, smallest: 50, learned });
    // The turns grew past the smallest (each doubles at most), and the size reached was kept.
    expect(first[0]).toBe(50);
    expect(Math.max(...first)).toBeGreaterThan(50);
    expect(learned.size).toBeGreaterThan(50);
    const reached = learned.size;
    const second: number[] = [];
    await inTimedTurns(items(4_000), busyWrite(0.005, second), { lockMs: 1_000, othersWrote: () => false, smallest: 50, learned });
    // (Or the whole call, when it learned more than the call holds.)
    expect(second[0]).toBe(Math.min(reached, 4_000));
    // Without it, a call starts small again.
    const alone: number[] = [];
    await inTimedTurns(items(500), busyWrite(0.005, alone), { lockMs: 4, othersWrote: () => false, smallest: 50 });
    expect(alone[0]).toBe(50);
  });

  it('never starts below the smallest, whatever was learned', async () => {
    const sizes: number[] = [];
    await inTimedTurns(items(300), (chunk) => void sizes.push(chunk.length), { othersWrote: () => false, smallest: 100, learned: { size: 3 } });
    expect(sizes[0]).toBe(100);
  });
});
