/**
 * Runs `fn` over `items` with at most `limit` in flight. A failure stops what has not started,
 * and is thrown once what has started is done (mapWeighted): a failed flush's part writes do not
 * run on beside its retry.
 */
export function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  return mapWeighted(items, { limit, budget: Infinity, weight: () => 0 }, fn);
}

export interface WeightedLimits<T> {
  /** At most this many in flight. */
  limit: number;
  /** The weights in flight add up to at most this, but for an item that alone weighs more: it runs by itself. */
  budget: number;
  /** What an item holds while it runs (its reports, say). */
  weight(item: T): number;
}

/**
 * Runs `fn` over `items`, started in order, many small ones at once and a heavy one with few
 * others or alone (see WeightedLimits). A failure stops what has not started, and is thrown,
 * the first one, once what has started is done: nothing runs on after the call has settled.
 */
export function mapWeighted<T, R>(items: readonly T[], limits: WeightedLimits<T>, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  // Nothing would ever start, and the call never settle.
  if (!Number.isInteger(limits.limit) || limits.limit < 1) return Promise.reject(new RangeError(`a limit of at least one item in flight, not ${limits.limit}`));
  const out = new Array<R>(items.length);
  let next = 0;
  let running = 0;
  let load = 0;
  let failure: { err: unknown } | undefined;
  return new Promise((resolve, reject) => {
    const pump = () => {
      while (!failure && next < items.length && running < limits.limit) {
        const i = next;
        let weight: number;
        try {
          // One heavier than the budget counts as the whole of it (and Infinity - Infinity is no weight).
          weight = Math.min(limits.budget, Math.max(0, limits.weight(items[i]!)));
        } catch (err) {
          failure = { err };
          break;
        }
        if (running > 0 && load + weight > limits.budget) break;
        next += 1;
        running += 1;
        load += weight;
        // fn may throw before it returns a promise: the same as a rejection.
        Promise.resolve()
          .then(() => fn(items[i]!, i))
          .then(
            (result) => {
              out[i] = result;
            },
            (err: unknown) => {
              failure ??= { err };
            },
          )
          .finally(() => {
            running -= 1;
            load -= weight;
            pump();
          });
      }
      if (running > 0) return;
      if (failure) reject(failure.err);
      else if (next >= items.length) resolve(out);
    };
    pump();
  });
}

/**
 * Steps whose tails (a file written, a checkpoint saved) run one step behind their producer:
 * while one step's tail runs, the producer prepares the next step, whose tail starts once the
 * one before it is done. Tails run one at a time, in order. A failed tail fails the next call
 * of `then` and `settle`, and is never left unhandled.
 */
export class OneBehind {
  private tail: Promise<void> = Promise.resolve();

  /** Waits for the tail before, then starts `tail` without waiting for it. */
  async then(tail: () => Promise<void>): Promise<void> {
    await this.tail;
    const started = tail();
    // Its failure is thrown by the next `then` or `settle`, which await it.
    started.catch(() => undefined);
    this.tail = started;
  }

  /** The last tail, done (or its failure). */
  settle(): Promise<void> {
    return this.tail;
  }

  /** Once the last tail has ended, whichever way: for a producer that failed itself. */
  async idle(): Promise<void> {
    await this.tail.catch(() => undefined);
  }
}

/** Both to their end, whichever way the other ends (neither left running unwatched), then the first failure. */
export async function bothSettled(a: Promise<unknown>, b: Promise<unknown>): Promise<void> {
  const [first, second] = await Promise.allSettled([a, b]);
  if (first.status === 'rejected') throw first.reason;
  if (second.status === 'rejected') throw second.reason;
}

/**
 * `write` made a saver whose calls share writes: a call while one is under way waits for the
 * next, one write for every call made meanwhile, which reads the state as it is when it starts.
 * So a call resolves once a write begun after it is done (what it saved is on disk), and
 * writes never overlap or land out of order. A failed write fails the calls it served.
 */
export function coalescing(write: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  let next: Promise<void> | undefined;
  const start = () => (running = write().finally(() => (running = undefined)));
  return () => {
    if (next) return next;
    if (!running) return start();
    next = running.catch(() => undefined).then(() => {
      next = undefined;
      return start();
    });
    return next;
  };
}
