// The SNS topic's outbox: the event log. The worker's flush only records its reports in the log
// (the store it writes anyway); this relay, a log consumer stepped apart from the flushes,
// publishes them, archived and retracted alike, retrying with backoff (up to five minutes
// apart) for as long as the log keeps them. An SNS outage therefore never holds the archive:
// announcements wait in the log and go out once SNS answers again. Its cursor lives in the
// store (events/v1/consumers/sns/), so a restart or another worker carries on where it stopped.
import { randomUUID } from 'node:crypto';
import type { SNSClient } from '@aws-sdk/client-sns';
import type { Logger } from '../shared/log.js';
import type { ObjectStore } from '../store/objectStore.js';
import { LogConsumer } from './consumer.js';
import { DurableCursor } from './cursor.js';
import type { EventFeed } from './events.js';
import { ConsumerRunner } from './runner.js';
import { publish, publishBoundMs } from './snsPublisher.js';

export interface SnsRelayOptions {
  topicArn: string;
  /** First retry delay; each retry doubles it, up to `retryMaxMs`. */
  retryBaseMs: number;
  retryMaxMs: number;
  /** Longer than one PublishBatch call can take, its retries included (the SNS client's bounds). */
  callMs: number;
}

/** Beyond a batch's rounds of calls (publishBoundMs): reading the log, writing the cursor. */
const LEASE_MARGIN_MS = 30_000;
/** Reports a relay batch carries at most. */
const MAX_BATCH = 500;

export function snsRelay(feed: EventFeed, store: ObjectStore, sns: SNSClient, options: SnsRelayOptions, log: Logger): ConsumerRunner {
  // A new relay starts with what the log keeps: nothing recorded before it is lost.
  const cursor = new DurableCursor(store, 'sns', async () => ({ upto: 0 }));
  const consumer = new LogConsumer(
    feed,
    {
      cursor,
      wants: () => true,
      // As long as the batch's calls may take: a lease that ran out mid-batch would have another
      // worker publish it again beside this one.
      leaseFor: (events) => publishBoundMs(events.map((e) => e.feature), events[0]!.kind, options.callMs) + LEASE_MARGIN_MS,
      async send(batch) {
        try {
          await publish(sns, options.topicArn, batch.kind, batch.events.map((e) => e.feature), batch.events[0]!.at_ms);
          log.debug({ reports: batch.events.length, kind: batch.kind }, 'published on SNS');
          return { ok: true };
        } catch (err) {
          const error = err instanceof Error ? err.message : String(err);
          log.warn({ reports: batch.events.length, attempt: batch.attempts + 1, err: error }, 'SNS publish failed; will retry');
          return { ok: false, error };
        }
      },
    },
    { holder: randomUUID(), leaseMs: options.callMs + LEASE_MARGIN_MS, maxBatch: MAX_BATCH, retryBaseMs: options.retryBaseMs, retryMaxMs: options.retryMaxMs },
  );
  return new ConsumerRunner(
    {
      concurrency: 1,
      refreshMs: Number.MAX_SAFE_INTEGER,
      consumers: async () => [consumer],
      // Two states a batch, for ever otherwise: the newest ones are all a step reads.
      housekeeping: async () => void (await cursor.prune(Date.now() - 3_600_000)),
    },
    log,
    'SNS relay',
  );
}
