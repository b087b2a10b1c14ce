// Turns of heavy answers: a bounded number at once, a share of them per client address, and the
// refusals past the queue's wait (503 when the process is busy, 429 when a client's own answers
// are what it waited on).
import { describe, expect, it } from 'vitest';
import { Admission } from '../../src/http/admission.js';
import { HttpError, OverloadedError } from '../../src/shared/errors.js';

/** Whether `p` has settled within a turn of the event loop. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  p.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((r) => setImmediate(r));
  return done;
}

describe('admission', () => {
  it("gives one client at most its share, and the turns it cannot take to the clients behind it", async () => {
    const admission = new Admission(4, 2, 60_000);
    const a1 = await admission.enter('a');
    await admission.enter('a');
    // A's third waits though two turns are free; B's go at once.
    const a3 = admission.enter('a');
    expect(await settled(a3)).toBe(false);
    await admission.enter('b');
    const b2 = await admission.enter('b');
    expect(admission.load).toEqual({ running: 4, waiting: 1 });
    // Full: C waits behind A's third.
    const c1 = admission.enter('c');
    expect(await settled(c1)).toBe(false);
    // A turn of B's ends: A is still at its share, so C (behind it) takes the turn.
    b2();
    expect(await settled(c1)).toBe(true);
    expect(await settled(a3)).toBe(false);
    // One of A's ends: A's third takes it.
    a1();
    expect(await settled(a3)).toBe(true);
    expect(admission.load).toEqual({ running: 4, waiting: 0 });
  });

  it('refuses past the wait: 429 for a client at its share, 503 when the process is full', async () => {
    const admission = new Admission(2, 1, 50);
    const a = await admission.enter('a');
    const own = await admission.enter('a').catch((err: unknown) => err);
    expect(own).toBeInstanceOf(HttpError);
    expect((own as HttpError).statusCode).toBe(429);
    expect((own as HttpError).headers['Retry-After']).toBe('1');
    await admission.enter('b');
    const busy = await admission.enter('c').catch((err: unknown) => err);
    expect(busy).toBeInstanceOf(OverloadedError);
    // Full, and at its share too: the process's refusal, as another turn of its own would wait as well.
    const both = await admission.enter('a').catch((err: unknown) => err);
    expect(both).toBeInstanceOf(OverloadedError);
    // Given back once only, however often the answer's end is reported.
    a();
    a();
    expect(admission.load).toEqual({ running: 1, waiting: 0 });
  });

  it('drops a waiter whose client leaves, and its turn stays free', async () => {
    const admission = new Admission(1, 1, 60_000);
    const first = await admission.enter('a');
    const gone = new AbortController();
    const waiting = admission.enter('b', gone.signal);
    gone.abort(new Error('the client closed the connection'));
    await expect(waiting).rejects.toThrow('closed the connection');
    first();
    expect(admission.load).toEqual({ running: 0, waiting: 0 });
    await admission.enter('c');
    expect(admission.load).toEqual({ running: 1, waiting: 0 });
  });

  describe('slow readers', () => {
    const WINDOW_MS = 300;
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    /**
     * A reader taking `bytesPerSecond`, its answer waiting on it all along (or, `waiting` false,
     * never: an answer slow to make); `cuts` counts its cuts, and a cut gives its turn back as
     * the answer's close would.
     */
    function reader(bytesPerSecond: number, waiting = true) {
      const start = performance.now();
      const state = { cuts: 0, leave: undefined as (() => void) | undefined };
      return {
        state,
        bytesTaken: () => Math.floor(((performance.now() - start) * bytesPerSecond) / 1000),
        waitedMs: () => (waiting ? performance.now() - start : 0),
        cut: () => {
          state.cuts += 1;
          setImmediate(() => state.leave?.());
        },
      };
    }

    it('cuts the slowest reader below the floor over the window when an answer waits, and its turn goes to it', async () => {
      const admission = new Admission(2, 2, 5_000, { minBytesPerSecond: 10_000, windowMs: WINDOW_MS });
      const trickle = reader(1_000);
      const slower = reader(100);
      trickle.state.leave = await admission.enter('a', undefined, trickle);
      slower.state.leave = await admission.enter('b', undefined, slower);
      // Nobody waits: both keep their turns past the window.
      await sleep(WINDOW_MS * 2);
      expect([trickle.state.cuts, slower.state.cuts]).toEqual([0, 0]);
      // One waits: the slower is cut, and the waiter takes its turn (well within its wait).
      const waiter = await admission.enter('c');
      expect([trickle.state.cuts, slower.state.cuts]).toEqual([0, 1]);
      expect(admission.load).toEqual({ running: 2, waiting: 0 });
      waiter();
      trickle.state.leave();
    });

    it('cuts one reader for one waiter, though the cut one leaves a moment later', async () => {
      const admission = new Admission(2, 2, 5_000, { minBytesPerSecond: 10_000, windowMs: WINDOW_MS });
      const readers = [reader(0), reader(0)];
      for (const r of readers) {
        const leave = await admission.enter('a', undefined, { ...r, cut: () => ((r.state.cuts += 1), setTimeout(() => leave(), WINDOW_MS)) });
        r.state.leave = leave;
      }
      await sleep(WINDOW_MS * 1.5);
      const waiter = await admission.enter('b');
      // Samplings ran while the cut one had not left: still one cut.
      expect(readers.map((r) => r.state.cuts).sort()).toEqual([0, 1]);
      waiter();
      for (const r of readers) r.state.leave?.();
    });

    it('keeps a reader above the floor, and a turn younger than the window', async () => {
      const admission = new Admission(1, 1, WINDOW_MS * 2, { minBytesPerSecond: 10_000, windowMs: WINDOW_MS });
      const fast = reader(1_000_000);
      fast.state.leave = await admission.enter('a', undefined, fast);
      await sleep(WINDOW_MS * 2);
      // The waiter is refused after its wait; the fast reader is never cut.
      await expect(admission.enter('b')).rejects.toBeInstanceOf(OverloadedError);
      expect(fast.state.cuts).toBe(0);
      fast.state.leave();

      const young = reader(0);
      young.state.leave = await admission.enter('a', undefined, young);
      // A waiter arriving at once waits until the new turn is a window old, then takes it.
      const started = performance.now();
      const waiter = await admission.enter('b');
      expect(performance.now() - started).toBeGreaterThanOrEqual(WINDOW_MS * 0.9);
      expect(young.state.cuts).toBe(1);
      waiter();
    });

    it('cuts no answer for being slow to make: only one that waited on its client', async () => {
      const admission = new Admission(1, 1, WINDOW_MS * 2, { minBytesPerSecond: 10_000, windowMs: WINDOW_MS });
      const making = reader(0, false);
      making.state.leave = await admission.enter('a', undefined, making);
      await sleep(WINDOW_MS * 2);
      await expect(admission.enter('b')).rejects.toBeInstanceOf(OverloadedError);
      expect(making.state.cuts).toBe(0);
      making.state.leave();
    });

    it('cuts nobody for a waiter at its own share: that would not give it a turn', async () => {
      const admission = new Admission(2, 1, WINDOW_MS * 3, { minBytesPerSecond: 10_000, windowMs: WINDOW_MS });
      const own = reader(0);
      const other = reader(0);
      own.state.leave = await admission.enter('a', undefined, own);
      other.state.leave = await admission.enter('b', undefined, other);
      await sleep(WINDOW_MS * 2);
      // Full, and at its share: refused after its wait (the process's refusal), nobody cut.
      await expect(admission.enter('a')).rejects.toBeInstanceOf(OverloadedError);
      expect([own.state.cuts, other.state.cuts]).toEqual([0, 0]);
      own.state.leave();
      other.state.leave();
    });
  });
});
