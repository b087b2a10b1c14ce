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
});
