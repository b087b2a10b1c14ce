// What the `subscriptions` command does, apart from argument parsing and printing, on either
// backend: the embedded event log (SQLite) or the AWS bucket (objectWebhooks.ts).
import { newUlid } from '../shared/ulid.js';
import type { BoundaryRepository } from '../boundaries/repository.js';
import type { EventsConfig } from '../shared/config.js';
import { CLOUDEVENT_TYPE } from './events.js';
import type { Delivery, EventLog } from './eventLog.js';
import { HostPolicy } from './hostPolicy.js';
import type { ObjectWebhooks } from './objectWebhooks.js';
import { newSubscription, secretProblems, SubscriptionError, type Subscription, type SubscriptionInput } from './subscriptions.js';
import { cloudEventBody, post, signedHeaders, type Attempt } from './webhook.js';
import { mapLimit } from '../ops/concurrency.js';

export const TEST_EVENT_TYPE = 'ph.floodarchive.test.v1';

export interface RedriveResult {
  /** Set-aside deliveries queued again (embedded) or sent now and delivered (AWS). */
  redriven: number;
  /** AWS: those sent now that failed again and stay set aside. */
  stillFailing: number;
}

/** Where subscriptions and their set-aside deliveries are kept. */
export interface WebhookAdmin {
  add(s: Subscription): Promise<void>;
  list(): Promise<Subscription[]>;
  get(id: string): Promise<Subscription | undefined>;
  remove(id: string): Promise<boolean>;
  /** Replaces the signing secret, keeping what waits to be delivered; false when there is no such subscription. */
  setSecret(id: string, secret: string): Promise<boolean>;
  backlog(subs: readonly Subscription[]): Promise<Map<string, { pending: number; setAside: number }>>;
  failed(): Promise<Delivery[]>;
  redrive(subscriptionId: string | undefined, policy: HostPolicy, timeoutMs: number): Promise<RedriveResult>;
  /**
   * Takes retracted reports out of the deliveries set aside; the batches changed. The embedded log
   * does so as each retraction is made (none left here); on AWS the purge does, for the retractions
   * it purges.
   */
  scrub(pkeys: ReadonlySet<string>): Promise<number>;
}

export function sqliteAdmin(log: EventLog): WebhookAdmin {
  return {
    add: async (s) => log.addSubscription(s),
    list: async () => log.subscriptions(),
    get: async (id) => log.subscription(id),
    remove: async (id) => log.removeSubscription(id),
    setSecret: async (id, secret) => log.setSecret(id, secret),
    backlog: async () => log.backlog(),
    failed: async () => log.deliveries('set_aside'),
    // The dispatcher sends them again from a fresh start, with its backoff.
    redrive: async (id) => ({ redriven: log.redrive(id), stillFailing: 0 }),
    scrub: async () => 0,
  };
}

/**
 * `isRetracted`: the ledger's word (retractions are kept for good): a batch may be set aside
 * longer than the event log keeps its marks of retracted reports.
 */
export function objectAdmin(hooks: ObjectWebhooks, isRetracted: (pkey: string) => Promise<boolean>): WebhookAdmin {
  return {
    add: async (s) => void (await hooks.add(s)),
    list: () => hooks.list(),
    get: (id) => hooks.get(id),
    remove: (id) => hooks.remove(id),
    setSecret: (id, secret) => hooks.setSecret(id, secret),
    backlog: async (subs) => hooks.backlog(await Promise.all(subs.map(async (s) => (await hooks.get(s.id))!))),
    failed: async () => (await hooks.setAsideBatches()).map(({ features: _features, ...d }) => d),
    scrub: (pkeys) => hooks.scrubSetAside(pkeys),
    // Each set-aside batch is sent now, once, under its own id; those delivered are dropped.
    async redrive(id, policy, timeoutMs) {
      const subs = new Map((await hooks.list()).map((s) => [s.id, s]));
      let redriven = 0;
      let stillFailing = 0;
      for (const b of await hooks.setAsideBatches(id)) {
        const sub = subs.get(b.subscriptionId);
        if (!sub) continue;
        // A report retracted since the batch was set aside is not sent with its personal fields.
        const retracted = b.kind === 'archived' ? await mapLimit(b.features, 16, (f) => isRetracted(f.properties.pkey)) : [];
        const features = b.features.filter((_, i) => !retracted[i]);
        if (features.length === 0) {
          await hooks.dropSetAside(b);
          continue;
        }
        const body = cloudEventBody({ id: b.id, type: CLOUDEVENT_TYPE[b.kind], timeMs: b.atMs }, JSON.stringify(features));
        const attempt = await post(sub.url, body, signedHeaders(b.id, sub.secret, body), policy, timeoutMs);
        if (attempt.ok) {
          await hooks.dropSetAside(b);
          redriven += 1;
        } else {
          stillFailing += 1;
          // Only a count on the batch kept aside: a store that fails it stops no other batch.
          await hooks.recordFailedRedrive(b, attempt.error ?? 'failed').catch(() => undefined);
        }
      }
      return { redriven, stillFailing };
    },
  };
}

/** What the `subscriptions` command uses: where subscriptions are kept, the boundaries (to check codes), the webhook settings. */
export interface SubscriptionDeps {
  webhookAdmin: WebhookAdmin;
  boundaries: Pick<BoundaryRepository, 'latest'>;
  config: { events: Pick<EventsConfig, 'webhookAllowHosts' | 'webhookTimeoutMs'> };
}

export function adminOf(rt: Pick<SubscriptionDeps, 'webhookAdmin'>): WebhookAdmin {
  return rt.webhookAdmin;
}

/** The stored form without its secret: what list and add print. */
export function shown(s: Subscription, backlog?: { pending: number; setAside: number }) {
  const { secret: _secret, ...rest } = s as Subscription & { startAfter?: number };
  const { startAfter: _startAfter, ...plain } = rest;
  return { ...plain, pending: backlog?.pending ?? 0, setAside: backlog?.setAside ?? 0 };
}

export async function addSubscription(rt: SubscriptionDeps, input: SubscriptionInput): Promise<Subscription> {
  const { levels, adminAreas } = await rt.boundaries.latest();
  const sub = newSubscription(input, new HostPolicy(rt.config.events.webhookAllowHosts), {
    areas: adminAreas,
    localAreas: new Set(levels.localAreas.properties.map((p) => p.psgc)),
  });
  await adminOf(rt).add(sub);
  return sub;
}

export async function findSubscription(rt: Pick<SubscriptionDeps, 'webhookAdmin'>, id: string): Promise<Subscription> {
  const sub = await adminOf(rt).get(id);
  if (!sub) throw new SubscriptionError([`no subscription ${JSON.stringify(id)} (see: subscriptions list)`]);
  return sub;
}

/** Gives a subscription a new signing secret; its undelivered events are kept and signed with it. */
export async function rotateSecret(rt: Pick<SubscriptionDeps, 'webhookAdmin'>, id: string, secret: string): Promise<void> {
  const problems = secretProblems(secret);
  if (problems.length > 0) throw new SubscriptionError(problems);
  if (!(await adminOf(rt).setSecret(id, secret))) throw new SubscriptionError([`no subscription ${JSON.stringify(id)} (see: subscriptions list)`]);
}

/** Sends a signed test event (an empty FeatureCollection) to a subscription now. */
export async function testSubscription(rt: SubscriptionDeps, id: string): Promise<Attempt & { id: string }> {
  const sub = await findSubscription(rt, id);
  const eventId = newUlid();
  const body = cloudEventBody({ id: eventId, type: TEST_EVENT_TYPE, timeMs: Date.now() }, '[]');
  const attempt = await post(sub.url, body, signedHeaders(eventId, sub.secret, body), new HostPolicy(rt.config.events.webhookAllowHosts), rt.config.events.webhookTimeoutMs);
  return { ...attempt, id: eventId };
}

export { CLOUDEVENT_TYPE };
