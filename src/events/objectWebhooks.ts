// Webhooks on the AWS backend, kept in the archive's bucket beside the event log:
//   events/v1/subscriptions/<id>.json        one object per subscription (created if absent, deleted on remove)
//   events/v1/consumers/webhook-<id>/…       its durable cursor in the log (DurableCursor)
//   events/v1/set-aside/<id>/<batch>.json    batches that failed for WEBHOOK_RETRY_HOURS
// Nothing is read, changed and written back unconditionally: subscriptions are written whole
// once (a new secret replaces one only while it is the version read), a cursor advances by
// conditional appends, a set-aside batch is its own object. So any number
// of workers send deliveries (each subscription's batches one at a time, in log order, at
// least once under a stable id) and a restart carries on from the cursor, backoff included.
import { randomUUID } from 'node:crypto';
import type { Logger } from '../shared/log.js';
import type { ObjectStore } from '../store/objectStore.js';
import { LogConsumer, type Batch } from './consumer.js';
import { DurableCursor } from './cursor.js';
import { matches, type Delivery } from './eventLog.js';
import { CLOUDEVENT_TYPE, type EventFeed, type EventKind } from './events.js';
import type { ReportFeature } from './feature.js';
import type { HostPolicy } from './hostPolicy.js';
import { ConsumerRunner } from './runner.js';
import type { Subscription } from './subscriptions.js';
import { cloudEventBody, post, signedHeaders } from './webhook.js';

export const SUBSCRIPTIONS_PREFIX = 'events/v1/subscriptions/';
export const SET_ASIDE_PREFIX = 'events/v1/set-aside/';

/** A subscription as stored: it receives the events recorded after `startAfter`. */
export interface StoredSubscription extends Subscription {
  startAfter: number;
}

/** A batch set aside, with what is needed to send it again. */
export interface SetAsideBatch extends Delivery {
  features: ReportFeature[];
}

const MAX_BATCH = 500;

export class ObjectWebhooks {
  constructor(
    private readonly store: ObjectStore,
    private readonly feed: EventFeed,
  ) {}

  private key(id: string): string {
    return `${SUBSCRIPTIONS_PREFIX}${id}.json`;
  }

  cursor(s: StoredSubscription): DurableCursor {
    return new DurableCursor(this.store, `webhook-${s.id}`, async () => {
      // No state yet: a new subscription, or one removed with its states, which a worker's list
      // still holds for a few seconds and which must not start again from its beginning.
      if (!(await this.store.get(this.key(s.id)))) throw new Error(`subscription ${s.id} was removed`);
      return { upto: s.startAfter };
    });
  }

  async add(s: Subscription): Promise<StoredSubscription> {
    const stored: StoredSubscription = { ...s, startAfter: await this.feed.lastSeq() };
    if (!(await this.store.putIfAbsent(this.key(s.id), JSON.stringify(stored)))) throw new Error(`subscription ${s.id} exists already`);
    return stored;
  }

  async list(): Promise<StoredSubscription[]> {
    const keys: string[] = [];
    for await (const info of this.store.list({ prefix: SUBSCRIPTIONS_PREFIX })) if (info.key.endsWith('.json')) keys.push(info.key);
    const out: StoredSubscription[] = [];
    for (let i = 0; i < keys.length; i += 16) {
      const got = await Promise.all(keys.slice(i, i + 16).map((k) => this.store.get(k)));
      for (const o of got) if (o) out.push(JSON.parse(o.body.toString('utf8')) as StoredSubscription);
    }
    return out.sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.id < b.id ? -1 : 1));
  }

  async get(id: string): Promise<StoredSubscription | undefined> {
    return (await this.stored(id))?.sub;
  }

  /** A subscription as stored, with the ETag of that version; undefined when there is none. */
  private async stored(id: string): Promise<{ sub: StoredSubscription; etag: string } | undefined> {
    if (!/^sub_[A-Za-z0-9_-]{1,40}$/.test(id)) return undefined;
    const o = await this.store.get(this.key(id));
    return o ? { sub: JSON.parse(o.body.toString('utf8')) as StoredSubscription, etag: o.etag } : undefined;
  }

  /** Replaces a subscription's signing secret (its cursor, so what waits, is kept); false when there is none. */
  async setSecret(id: string, secret: string): Promise<boolean> {
    // Replaced only while it is the version read: a removal meanwhile is not undone (a put would
    // bring the subscription back without its cursor, resending everything kept).
    for (;;) {
      const found = await this.stored(id);
      if (!found) return false;
      if (await this.store.putIfMatch(this.key(id), JSON.stringify({ ...found.sub, secret }), found.etag)) return true;
    }
  }

  /** Whether subscription `id` is kept (not removed). */
  async exists(id: string): Promise<boolean> {
    return (await this.store.head(this.key(id))) !== undefined;
  }

  /** Drops the cursor states of a subscription found removed (a step under way at its removal may have written one after). */
  async dropCursor(s: StoredSubscription): Promise<void> {
    await this.cursor(s).drop(this.store);
  }

  /** Removes a subscription, its cursor and what was set aside for it; false when there was none. */
  async remove(id: string): Promise<boolean> {
    const s = await this.get(id);
    if (!s) return false;
    await this.store.delete([this.key(id)]);
    await this.cursor(s).drop(this.store);
    await this.store.delete((await this.setAsideKeys(id)).map((k) => k));
    return true;
  }

  /** Reports waiting for each subscription (recorded and not yet delivered), and batches set aside. */
  async backlog(subs: readonly StoredSubscription[]): Promise<Map<string, { pending: number; setAside: number }>> {
    const out = new Map<string, { pending: number; setAside: number }>();
    for (const s of subs) {
      const { state } = await this.cursor(s).current();
      const waiting = (await this.feed.since(state.upto, 10_000)).filter((e) => s.events.includes(e.kind) && matches(s, e.feature));
      out.set(s.id, { pending: waiting.length, setAside: (await this.setAsideKeys(s.id)).length });
    }
    return out;
  }

  private async setAsideKeys(subscriptionId?: string): Promise<string[]> {
    const keys: string[] = [];
    for await (const info of this.store.list({ prefix: `${SET_ASIDE_PREFIX}${subscriptionId === undefined ? '' : `${subscriptionId}/`}` })) keys.push(info.key);
    return keys;
  }

  async setAside(subscriptionId: string, batch: Batch, error: string): Promise<void> {
    const body: SetAsideBatch = {
      id: batch.id,
      subscriptionId,
      kind: batch.kind,
      atMs: batch.events[0]!.at_ms,
      retryFromMs: batch.firstAttemptMs,
      count: batch.events.length,
      attempts: batch.attempts,
      nextAttemptMs: 0,
      state: 'set_aside',
      lastError: error.slice(0, 500),
      features: batch.events.map((e) => e.feature),
    };
    await this.store.put(`${SET_ASIDE_PREFIX}${subscriptionId}/${batch.id}.json`, JSON.stringify(body));
  }

  async setAsideBatches(subscriptionId?: string): Promise<SetAsideBatch[]> {
    const out: SetAsideBatch[] = [];
    for (const key of await this.setAsideKeys(subscriptionId)) {
      const o = await this.store.get(key);
      if (o) out.push(JSON.parse(o.body.toString('utf8')) as SetAsideBatch);
    }
    return out.sort((a, b) => a.atMs - b.atMs || (a.id < b.id ? -1 : 1));
  }

  /**
   * Takes `pkeys` (retracted reports) out of the batches of archived reports set aside: a batch
   * is rewritten without them, or dropped when they were all it held. Over the batch as read: one
   * redriven and dropped meanwhile is not put back. Returns the batches changed.
   */
  async scrubSetAside(pkeys: ReadonlySet<string>): Promise<number> {
    let changed = 0;
    for (const key of await this.setAsideKeys()) {
      const o = await this.store.get(key);
      if (!o) continue;
      const batch = JSON.parse(o.body.toString('utf8')) as SetAsideBatch;
      if (batch.kind !== 'archived') continue;
      const features = batch.features.filter((f) => !pkeys.has(f.properties.pkey));
      if (features.length === batch.features.length) continue;
      if (features.length === 0) await this.store.delete([key]);
      else if (!(await this.store.putIfMatch(key, JSON.stringify({ ...batch, features, count: features.length } satisfies SetAsideBatch), o.etag))) continue;
      changed += 1;
    }
    return changed;
  }

  /**
   * Counts a redrive that failed on the batch set aside, with its error, as the embedded log's
   * deliveries do: over the batch as stored, so one dropped or scrubbed meanwhile stays so.
   */
  async recordFailedRedrive(b: SetAsideBatch, error: string): Promise<void> {
    const key = `${SET_ASIDE_PREFIX}${b.subscriptionId}/${b.id}.json`;
    const o = await this.store.get(key);
    if (!o) return;
    const stored = JSON.parse(o.body.toString('utf8')) as SetAsideBatch;
    await this.store.putIfMatch(key, JSON.stringify({ ...stored, attempts: stored.attempts + 1, lastError: error.slice(0, 500) } satisfies SetAsideBatch), o.etag);
  }

  async dropSetAside(b: SetAsideBatch): Promise<void> {
    await this.store.delete([`${SET_ASIDE_PREFIX}${b.subscriptionId}/${b.id}.json`]);
  }
}

export interface ObjectDispatcherOptions {
  webhookTimeoutMs: number;
  webhookRetryBaseMs: number;
  webhookRetryForMs: number;
  retentionMs: number;
  concurrency: number;
}

/** How a worker sends one subscription's batches. */
export interface WebhookSending {
  holder: string;
  policy: HostPolicy;
  webhookTimeoutMs: number;
  webhookRetryBaseMs: number;
  webhookRetryForMs: number;
}

/**
 * The consumer of one subscription's events. It holds `sub`, so a rotated secret set on that
 * object signs the next attempt; it sends nothing once the subscription is removed.
 */
export function webhookConsumer(hooks: ObjectWebhooks, feed: EventFeed, sub: StoredSubscription, sending: WebhookSending, log: Logger): LogConsumer {
  return new LogConsumer(
    feed,
    {
      cursor: hooks.cursor(sub),
      wants: (e) => sub.events.includes(e.kind) && matches(sub, e.feature),
      retryForMs: sending.webhookRetryForMs,
      async send(batch) {
        const body = cloudEventBody({ id: batch.id, type: CLOUDEVENT_TYPE[batch.kind as EventKind], timeMs: batch.events[0]!.at_ms }, JSON.stringify(batch.events.map((e) => e.feature)));
        const attempt = await post(sub.url, body, signedHeaders(batch.id, sub.secret, body), sending.policy, sending.webhookTimeoutMs);
        if (attempt.ok) log.debug({ delivery: batch.id, subscription: sub.id, reports: batch.events.length, ms: attempt.ms }, 'webhook delivered');
        else log.info({ delivery: batch.id, subscription: sub.id, attempt: batch.attempts + 1, error: attempt.error }, 'webhook delivery failed; will retry');
        return attempt.ok ? { ok: true } : { ok: false, error: attempt.error ?? 'failed' };
      },
      async setAside(batch, error) {
        await hooks.setAside(sub.id, batch, error);
        log.warn({ delivery: batch.id, subscription: sub.id, attempts: batch.attempts, error }, 'webhook delivery set aside');
      },
      exists: () => hooks.exists(sub.id),
      gone: () => hooks.dropCursor(sub),
    },
    { holder: sending.holder, leaseMs: sending.webhookTimeoutMs + 30_000, maxBatch: MAX_BATCH, retryBaseMs: sending.webhookRetryBaseMs, retryMaxMs: 3_600_000 },
  );
}

/** Sends every subscription's batches from the log; also prunes the log and the cursors. */
export function objectWebhookDispatcher(hooks: ObjectWebhooks, feed: EventFeed, policy: HostPolicy, options: ObjectDispatcherOptions, log: Logger): ConsumerRunner {
  const sending: WebhookSending = { holder: randomUUID(), policy, ...options };
  const consumers = new Map<string, { sub: StoredSubscription; consumer: LogConsumer }>();
  return new ConsumerRunner(
    {
      concurrency: options.concurrency,
      refreshMs: 5_000,
      async consumers() {
        const subs = await hooks.list();
        const ids = new Set(subs.map((s) => s.id));
        for (const id of consumers.keys()) if (!ids.has(id)) consumers.delete(id);
        for (const sub of subs) {
          const known = consumers.get(sub.id);
          // A rotated secret signs the next attempt (the consumer holds this object).
          if (known) known.sub.secret = sub.secret;
          else consumers.set(sub.id, { sub, consumer: webhookConsumer(hooks, feed, sub, sending, log) });
        }
        return [...consumers.values()].map((c) => c.consumer);
      },
      async housekeeping() {
        const pruned = await feed.prune(options.retentionMs);
        for (const { sub } of consumers.values()) await hooks.cursor(sub).prune(Date.now() - 3_600_000);
        if (pruned > 0) log.info({ batches: pruned }, 'pruned the event log');
      },
    },
    log,
    'webhooks',
  );
}
