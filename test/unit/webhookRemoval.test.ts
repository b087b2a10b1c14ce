// A webhook subscription removed while a worker is sending it a batch: the step under way ends
// by writing its cursor's next state after the removal dropped them all. The worker's consumer
// must not take that state as leave to carry on: nothing recorded after the removal is sent,
// and what the late step wrote is cleared. The real event log, subscriptions and cursor on the
// file store, a loopback receiver, the worker's own consumer.
import { afterEach, describe, expect, it } from 'vitest';
import { HostPolicy } from '../../src/events/hostPolicy.js';
import { CONSUMERS_PREFIX } from '../../src/events/cursor.js';
import { webhookConsumer } from '../../src/events/objectWebhooks.js';
import { createLogger } from '../../src/shared/log.js';
import { archivedRow, eventLogOnFiles } from '../support/eventLogs.js';
import { pkeysOf, startReceiver, type Receiver } from '../support/webhookReceiver.js';

const receivers: Receiver[] = [];
afterEach(async () => {
  for (const r of receivers.splice(0)) await r.close();
});

describe('a webhook subscription removed while its batch is being sent', () => {
  it('sends nothing recorded after the removal, and leaves no cursor state behind', async () => {
    const { log, hooks, store } = await eventLogOnFiles();
    const hook = await startReceiver();
    receivers.push(hook);
    const sub = await hooks.add({ id: 'sub_removed', url: hook.url, secret: 's'.repeat(32), admins: [], localAreas: [], events: ['archived'], createdAt: new Date().toISOString() });
    const consumer = webhookConsumer(
      hooks,
      log,
      sub,
      { holder: 'worker-1', policy: new HostPolicy(['127.0.0.1']), webhookTimeoutMs: 10_000, webhookRetryBaseMs: 1_000, webhookRetryForMs: 3_600_000 },
      createLogger('silent'),
    );

    // The receiver holds its answer to the first batch until the subscription is removed.
    let answer!: () => void;
    const held = new Promise<void>((resolve) => (answer = resolve));
    const arrived = new Promise<void>((resolve) => {
      hook.answer = () => {
        resolve();
        return { status: 204, until: held };
      };
    });
    await log.archived([archivedRow(1, Date.now())]);
    const stepping = consumer.step();
    await arrived;
    hook.answer = () => ({ status: 204 });
    expect(await hooks.remove(sub.id)).toBe(true);
    answer();
    // The step records its batch as sent: a state written after the removal dropped every one.
    expect(await stepping).toBe('sent');

    await log.archived([archivedRow(2, Date.now())]);
    expect(await consumer.step()).toBe('removed');
    expect(await consumer.step()).toBe('removed');
    expect(hook.received.flatMap((g) => pkeysOf(g.body))).toEqual(['partner-a-1']);
    const left: string[] = [];
    for await (const o of store.list({ prefix: `${CONSUMERS_PREFIX}webhook-${sub.id}/` })) left.push(o.key);
    expect(left).toEqual([]);
  });
});
