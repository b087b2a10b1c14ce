// What the `subscriptions` command does, apart from argument parsing and printing.
import type { Runtime } from '../runtime.js';
import { CLOUDEVENT_TYPE } from './events.js';
import type { EventLog } from './eventLog.js';
import { HostPolicy } from './hostPolicy.js';
import { newSubscription, SubscriptionError, type Subscription, type SubscriptionInput } from './subscriptions.js';
import { cloudEventBody, post, signedHeaders, type Attempt } from './webhook.js';
import { ulid } from 'ulid';

export const TEST_EVENT_TYPE = 'ph.floodarchive.test.v1';

export function eventLogOf(rt: Runtime): EventLog {
  if (!rt.events) {
    throw new SubscriptionError([
      'webhook subscriptions are kept in the embedded backend\'s event log (QUEUE_URL=sqlite:); not on AWS',
    ]);
  }
  return rt.events;
}

/** The stored form without its secret: what list and add print. */
export function shown(s: Subscription, backlog?: { pending: number; setAside: number }) {
  const { secret: _secret, ...rest } = s;
  return { ...rest, pending: backlog?.pending ?? 0, setAside: backlog?.setAside ?? 0 };
}

export async function addSubscription(rt: Runtime, input: SubscriptionInput): Promise<Subscription> {
  const log = eventLogOf(rt);
  const set = (await rt.boundaries.current()).set;
  const sub = newSubscription(input, new HostPolicy(rt.config.events.webhookAllowHosts), {
    cities: new Set(set.cities.features.map((f) => f.properties.code)),
    localAreas: new Set(set.localAreas.features.map((f) => f.properties.psgc)),
  });
  log.addSubscription(sub);
  return sub;
}

export function findSubscription(rt: Runtime, id: string): Subscription {
  const sub = eventLogOf(rt).subscription(id);
  if (!sub) throw new SubscriptionError([`no subscription ${JSON.stringify(id)} (see: subscriptions list)`]);
  return sub;
}

/** Sends a signed test event (an empty FeatureCollection) to a subscription now. */
export async function testSubscription(rt: Runtime, id: string): Promise<Attempt & { id: string }> {
  const sub = findSubscription(rt, id);
  const eventId = ulid();
  const body = cloudEventBody({ id: eventId, type: TEST_EVENT_TYPE, timeMs: Date.now() }, '[]');
  const attempt = await post(sub.url, body, signedHeaders(eventId, sub.secret, body), new HostPolicy(rt.config.events.webhookAllowHosts), rt.config.events.webhookTimeoutMs);
  return { ...attempt, id: eventId };
}

export { CLOUDEVENT_TYPE };
