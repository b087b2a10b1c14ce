// A read whose parts keep going from under it (jobs retiring them) is tried again over new
// listings while each finds parts gone, spread over seconds, and gives up with a 503's error,
// never the engine's; a read that failed for another reason is not tried again.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { withReplan } from '../../src/archive/replan.js';
import type { DayPlan } from '../../src/archive/plan.js';
import { OverloadedError } from '../../src/shared/errors.js';

const DAY = Date.UTC(2026, 10, 18);
const planOf = (n: number): DayPlan[] => [{ dayMs: DAY, whole: [{ key: `reports/v1/part-${n}.parquet`, size: 1, etag: `"${n}"`, lastModified: new Date(DAY) }], hours: [] }];
const gone = () => new Error('IO Error: No files found that match the pattern');

describe('withReplan', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('tries again while each new listing finds a part of the one before gone, pausing longer each time', async () => {
    const triedAt: number[] = [];
    let listings = 0;
    const result = withReplan({ signal: undefined, replan: async () => planOf(++listings) }, planOf(0), async (days) => {
      triedAt.push(Date.now());
      if (triedAt.length < 6) throw gone();
      return days[0]!.whole[0]!.key;
    });
    await vi.runAllTimersAsync();
    expect(await result).toBe('reports/v1/part-5.parquet');
    const pauses = triedAt.slice(1).map((t, i) => t - triedAt[i]!);
    // At once after the first (its listing merely old), then 100 ms doubling.
    expect(pauses).toEqual([0, 100, 200, 400, 800]);
  });

  it('gives up after 30 s of it with an OverloadedError (a 503 to try again), its cause the read\'s', async () => {
    const started = Date.now();
    let tries = 0;
    const result = withReplan({ signal: undefined, replan: async () => planOf(tries) }, planOf(0), async () => {
      tries += 1;
      throw gone();
    });
    const settled = result.then(() => undefined, (err: unknown) => err);
    await vi.runAllTimersAsync();
    const err = await settled;
    expect(err).toBeInstanceOf(OverloadedError);
    expect(String((err as Error).cause)).toMatch(/No files found/);
    expect(Date.now() - started).toBeLessThanOrEqual(30_000);
    expect(Date.now() - started).toBeGreaterThan(25_000);
    expect(tries).toBeGreaterThan(10);
  });

  it('does not try again a read that failed while all its parts are still there', async () => {
    let tries = 0;
    const result = withReplan({ signal: undefined, replan: async () => undefined }, planOf(0), async () => {
      tries += 1;
      throw new Error('Out of Memory Error');
    });
    await expect(result).rejects.toThrow('Out of Memory Error');
    expect(tries).toBe(1);
  });

  it('stops for a client that hung up during a pause', async () => {
    const hangUp = new AbortController();
    let tries = 0;
    const result = withReplan({ signal: hangUp.signal, replan: async () => planOf(tries) }, planOf(0), async () => {
      tries += 1;
      if (tries === 2) setTimeout(() => hangUp.abort(new Error('the client closed the connection')), 50);
      throw gone();
    });
    const settled = result.then(() => undefined, (err: unknown) => err);
    await vi.runAllTimersAsync();
    expect(String(await settled)).toMatch(/the client closed the connection/);
    // The try after the pause is not made.
    expect(tries).toBe(2);
  });
});
