// The runner that steps log consumers (webhooks and SNS on AWS) gives its slots in turn: a
// consumer early in the list that always has work cannot keep every slot from the ones after it.
// The real event log, subscriptions and cursors on the file store.
import { describe, expect, it } from 'vitest';
import { LogConsumer } from '../../src/events/consumer.js';
import { ConsumerRunner } from '../../src/events/runner.js';
import { createLogger } from '../../src/shared/log.js';
import { eventually } from '../support/env.js';
import { archivedRow, eventLogOnFiles } from '../support/eventLogs.js';

describe('the consumers runner', () => {
  it('gives a free slot to the next consumer in turn, not back to the first one with work', async () => {
    const { log, hooks, subscribe } = await eventLogOnFiles();
    const sent: string[] = [];
    const consumers = await Promise.all(
      ['sub_a', 'sub_b', 'sub_c'].map(async (id) => {
        const sub = await subscribe(id);
        // One event a batch: every subscriber has 300 sends of work.
        return new LogConsumer(log, { cursor: hooks.cursor(sub), wants: () => true, send: async () => (sent.push(id), { ok: true }) }, { holder: 'worker-1', leaseMs: 30_000, maxBatch: 1, retryBaseMs: 1_000, retryMaxMs: 60_000 });
      }),
    );
    // Recorded after the subscriptions were made: a subscription gets the events from then on.
    await log.archived(Array.from({ length: 300 }, (_, n) => archivedRow(n, Date.now())));
    const runner = new ConsumerRunner({ concurrency: 1, consumers: async () => consumers, refreshMs: 60_000 }, createLogger('silent'), 'webhooks');
    runner.start();
    try {
      await eventually(async () => (sent.length >= 300 ? true : undefined), 60_000, '300 sends');
    } finally {
      await runner.stop();
    }
    // A consumer keeps its slot for a run of sends (up to 100), then the next one has it.
    const first = sent.slice(0, 300);
    expect(['sub_a', 'sub_b', 'sub_c'].map((id) => first.filter((s) => s === id).length)).toEqual([100, 100, 100]);
  });
});
