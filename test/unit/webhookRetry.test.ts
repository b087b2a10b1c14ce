// A webhook subscription on AWS behind a long outage: each waiting batch is retried until
// WEBHOOK_RETRY_HOURS after its events were recorded, then set aside, so the whole backlog is
// set aside (and redrivable) before the event log's retention would drop any of it. The real
// event log, subscriptions and cursor on the file store; the clock is the test's.
import { describe, expect, it } from 'vitest';
import { LogConsumer } from '../../src/events/consumer.js';
import { archivedRow, eventLogOnFiles } from '../support/eventLogs.js';

const HOUR = 3_600_000;

describe('a webhook behind an outage longer than its retry period', () => {
  it('sets every waiting batch aside once its retry period has passed since it was recorded, not one period after the batch before', async () => {
    let now = Date.parse('2026-11-21T00:00:00Z');
    const { log, hooks, subscribe } = await eventLogOnFiles(() => now);
    const sub = await subscribe('sub_outage');
    const row = (n: number) => archivedRow(n, now);
    // Four batches of 500, a minute apart.
    for (let i = 0; i < 4; i++) {
      await log.archived(Array.from({ length: 500 }, (_, k) => row(i * 500 + k)));
      now += 60_000;
    }
    const setAside: number[] = [];
    const consumer = new LogConsumer(
      log,
      {
        cursor: hooks.cursor(sub),
        wants: () => true,
        retryForMs: 24 * HOUR,
        send: async () => ({ ok: false, error: 'connect ECONNREFUSED' }),
        setAside: async (batch) => void setAside.push(batch.events.length),
      },
      { holder: 'worker-1', leaseMs: 40_000, maxBatch: 500, retryBaseMs: 10_000, retryMaxMs: HOUR, now: () => now },
    );
    // A worker steps it every five minutes for 25 hours, the receiver down all along.
    for (let m = 0; m < 25 * 60; m += 5) {
      now += 5 * 60_000;
      await consumer.step();
    }
    expect(setAside).toEqual([500, 500, 500, 500]);
  });

  it('reads its cursor in the store every ten seconds at most while it waits out a back-off, not at every step', async () => {
    let now = Date.parse('2026-11-21T00:00:00Z');
    const { log, hooks, subscribe } = await eventLogOnFiles(() => now);
    const sub = await subscribe('sub_down');
    await log.archived([archivedRow(1, now)]);
    const cursor = hooks.cursor(sub);
    let reads = 0;
    const counted = Object.assign(Object.create(cursor) as typeof cursor, { current: () => (reads++, cursor.current()) });
    let sends = 0;
    const consumer = new LogConsumer(
      log,
      { cursor: counted, wants: () => true, send: async () => (sends++, { ok: false, error: 'connect ECONNREFUSED' }) },
      { holder: 'worker-1', leaseMs: 40_000, maxBatch: 500, retryBaseMs: 40_000, retryMaxMs: HOUR, now: () => now },
    );
    expect(await consumer.step()).toBe('failed');
    reads = 0;
    // The runner steps every consumer every 250 ms: a minute of its back-off.
    const results = new Set<string>();
    for (let t = 0; t < 60_000; t += 250) {
      now += 250;
      results.add(await consumer.step());
    }
    expect(results.has('waiting')).toBe(true);
    // Its retry came when due (a first failure's back-off is 32 to 48 s here; the second's longer than the rest of the minute).
    expect(sends).toBe(2);
    expect(reads).toBeLessThanOrEqual(8);
  });
});
