// DuckDb.withMemory: an answer's query that runs the engine out of memory runs again while other
// connections are (or were, during its run) in use (their work gives memory back in a moment), and
// once more alone after a full collection; then the OverloadedError (a 503 before an answer's
// first byte).
import { describe, expect, it } from 'vitest';
import { OverloadedError } from '../../src/shared/errors.js';
import { scratch } from '../support/scratch.js';

/** A list of ten million numbers, held whole in memory: more than the engine's 16 MB, however long it waits. */
const TOO_LARGE = 'SELECT len(list(range)) FROM range(10000000)';

describe("an answer's query out of the engine's memory", () => {
  const work = scratch('with-memory-', { memoryLimit: '16MB', threads: 1 });

  it('alone on the engine, runs once more after a collection, then is an OverloadedError', async () => {
    let runs = 0;
    const query = work.db.withMemory(async (conn) => {
      runs += 1;
      return conn.runAndReadAll(TOO_LARGE);
    });
    await expect(query).rejects.toBeInstanceOf(OverloadedError);
    expect(runs).toBe(2);
  });

  it('runs again while another connection is in use, and gives up once it is alone', async () => {
    let release!: () => void;
    const other = work.db.withConnection(() => new Promise<void>((resolve) => (release = resolve)));
    let runs = 0;
    const query = work.db.withMemory(async (conn) => {
      runs += 1;
      return conn.runAndReadAll(TOO_LARGE);
    });
    let settled = false;
    void query.catch(() => undefined).finally(() => (settled = true));
    // The other connection ends once the query has run a third time (however long a busy host
    // takes to get there), unless it gave up before.
    while (runs < 3 && !settled) await new Promise((resolve) => setTimeout(resolve, 10));
    const runsWhileOther = runs;
    // Still trying, a third time, while the other connection is in use.
    expect(settled).toBe(false);
    release();
    await other;
    await expect(query).rejects.toBeInstanceOf(OverloadedError);
    // Once alone: one run, a collection, one more; and the run that may have begun while the
    // other connection was still in use, counted before it ended.
    expect(runs - runsWhileOther).toBeLessThanOrEqual(3);
  });

  it('runs again when another connection was in use during its run, though closed by the time it failed', async () => {
    // Another answer between two of its queries: in use while this one ran, closed when it failed.
    let runs = 0;
    const rows = await work.db.withMemory(async (conn) => {
      runs += 1;
      await work.db.withConnection((other) => other.run('SELECT 1'));
      // The third run finds the memory the other answer held given back.
      return (await conn.runAndReadAll(runs < 3 ? TOO_LARGE : 'SELECT 42::INTEGER')).getRowsJS();
    });
    expect(rows).toEqual([[42]]);
    expect(runs).toBe(3);
  });

  it('a query that fits is answered at once', async () => {
    const rows = await work.db.withMemory(async (conn) => (await conn.runAndReadAll('SELECT count(*)::INTEGER FROM range(1000)')).getRowsJS());
    expect(rows).toEqual([[1000]]);
  });
});
