// Webhook subscriptions: what ops give the CLI, checked in full before anything is stored.
import { randomBytes } from 'node:crypto';
import type { AdminAreas } from '../boundaries/adminAreas.js';
import { EVENT_TYPES, type EventKind } from './events.js';
import type { HostPolicy } from './hostPolicy.js';

export interface Subscription {
  id: string;
  url: string;
  /** Key of the HMAC-SHA256 signature on every delivery. */
  secret: string;
  /**
   * Codes of cities, provinces or regions: a report matches when its city, province or region tag
   * is one of them (so a province keeps covering its cities as new boundaries draw them).
   * Subscriptions made before reports carried province tags hold the cities a province covered.
   * Empty: everywhere.
   */
  admins: string[];
  /** Barangay PSGC codes (local_area_id); empty: every barangay. */
  localAreas: string[];
  events: EventKind[];
  createdAt: string;
}

export interface SubscriptionInput {
  url: string;
  secret: string;
  admins: string[];
  localAreas: string[];
  events: string[];
}

/** What the current boundaries know, to refuse filters that could never match. */
export interface KnownAreas {
  /** The areas --admin may name (a city, or nationally a province or region). */
  areas: Pick<AdminAreas, 'get' | 'problem'>;
  localAreas: ReadonlySet<string>;
}

export const MIN_SECRET_LENGTH = 24;

export class SubscriptionError extends Error {
  override name = 'SubscriptionError';
  constructor(readonly problems: string[]) {
    super(`subscription refused: ${problems.join('; ')}`);
  }
}

/** What is wrong with a signing secret (nothing: empty). */
export function secretProblems(secret: string): string[] {
  if (secret.length < MIN_SECRET_LENGTH) return [`the secret must be at least ${MIN_SECRET_LENGTH} characters (e.g. openssl rand -hex 32)`];
  if (secret.length > 512) return ['the secret must be at most 512 characters'];
  return [];
}

/** A new subscription from ops' input, or SubscriptionError listing every problem. */
export function newSubscription(input: SubscriptionInput, policy: HostPolicy, known: KnownAreas, now = new Date()): Subscription {
  const problems: string[] = [];
  const whyUrl = policy.refuseUrl(input.url);
  if (whyUrl) problems.push(`--url ${JSON.stringify(input.url.slice(0, 200))} ${whyUrl}`);
  problems.push(...secretProblems(input.secret));
  for (const code of input.admins) {
    if (!known.areas.get(code)) problems.push(`--admin ${JSON.stringify(code)} ${known.areas.problem(code)}`);
  }
  for (const code of input.localAreas) if (!known.localAreas.has(code)) problems.push(`--local-area ${JSON.stringify(code)} is not a barangay PSGC code of the current boundaries`);
  const events = input.events.length === 0 ? ['archived'] : input.events;
  for (const e of events) if (!(EVENT_TYPES as readonly string[]).includes(e)) problems.push(`--events ${JSON.stringify(e)} is not one of ${EVENT_TYPES.join(', ')}`);
  if (problems.length > 0) throw new SubscriptionError(problems);
  return {
    id: `sub_${randomBytes(9).toString('base64url')}`,
    url: input.url,
    secret: input.secret,
    admins: [...new Set(input.admins)],
    localAreas: [...new Set(input.localAreas)],
    events: [...new Set(events)] as EventKind[],
    createdAt: now.toISOString(),
  };
}

/** Splits a comma-separated option into its non-empty parts. */
export function listOption(value: string | boolean | undefined): string[] {
  if (typeof value !== 'string') return [];
  return value.split(',').map((v) => v.trim()).filter((v) => v !== '');
}
