// A webhook subscription on AWS behind a long outage: each waiting batch is retried until
// WEBHOOK_RETRY_HOURS after its events were recorded, then set aside, so the whole backlog is
// set aside (and redrivable) before the event log's retention would drop any of it. The real
// event log, subscriptions and cursor on the file store; the clock is the test's.
import { describe, expect, it } from 'vitest';
import { LogConsumer } from '../../src/events/consumer.js';
import { ObjectEventLog } from '../../src/events/objectEventLog.js';
import { ObjectWebhooks } from '../../src/events/objectWebhooks.js';
import type { ArchiveRow } from '../../src/archive/partColumns.js';
import { FileObjectStore } from '../../src/store/fileStore.js';
import { tempDir } from '../support/env.js';

const HOUR = 3_600_000;

describe('a webhook behind an outage longer than its retry period', () => {
  it('sets every waiting batch aside once its retry period has passed since it was recorded, not one period after the batch before', async () => {
    let now = Date.parse('2026-11-21T00:00:00Z');
    const store = new FileObjectStore(await tempDir('flood-hooks-'));
    const log = new ObjectEventLog(store, () => now);
    const hooks = new ObjectWebhooks(store, log);
    const sub = await hooks.add({ id: 'sub_outage', url: 'https://hooks.example.org/flood', secret: 's'.repeat(32), admins: [], localAreas: [], events: ['archived'], createdAt: new Date(now).toISOString() });
    const row = (n: number): ArchiveRow => ({
      pkey: `partner-a-${n}`, created_at_ms: now, source: 'partner', status: 'confirmed', url: null, image_url: null, disaster_type: 'flood', report_data: null,
      instance_region_code: 'PH-QC', local_area_id: null, title: '', text: '', lng: 121.05, lat: 14.65, post_id: n, partner_city: 'Quezon City', received_at_ms: now, boundary_version: 'v1',
    } as ArchiveRow);
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
});
