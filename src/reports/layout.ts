// Where everything lives in the object store, and how keys are named.
// Report parts: reports/v1/year=YYYY/month=MM/day=DD/hour=HH/part-<ulid>.parquet
import { ulid } from 'ulid';

export const SOURCE = 'partner';
export const REPORTS_PREFIX = 'reports/v1/';
const PART_KEY = /^reports\/v1\/year=(\d{4})\/month=(\d{2})\/day=(\d{2})\/hour=(\d{2})\/part-[0-9A-Z]{26}\.parquet$/;

/** The archive key of a report, fixed at acceptance: no retry can mint another. */
export function pkeyOf(source: string, postId: number): string {
  return `${source}-${postId}`;
}

export function idempotencyKey(source: string, postId: number): string {
  return `ingest/keys/${source}/${postId}.json`;
}

export function pendingKey(source: string, postId: number): string {
  return `ingest/pending/${source}/${postId}.json`;
}

export const PENDING_PREFIX = 'ingest/pending/';
export const IDEMPOTENCY_PREFIX = 'ingest/keys/';
export const DEAD_LETTER_PREFIX = 'dead-letter/';

/** Start of the UTC hour holding `ms`. */
export function hourStart(ms: number): number {
  return Math.floor(ms / 3_600_000) * 3_600_000;
}

/** The partition folder of an hour, ending in '/'. */
export function hourPrefix(hourMs: number): string {
  const d = new Date(hourMs);
  const p = (n: number) => String(n).padStart(2, '0');
  return `${REPORTS_PREFIX}year=${d.getUTCFullYear()}/month=${p(d.getUTCMonth() + 1)}/day=${p(d.getUTCDate())}/hour=${p(d.getUTCHours())}/`;
}

export function newPartKey(hourMs: number): string {
  return `${hourPrefix(hourMs)}part-${ulid()}.parquet`;
}

/** The hour (epoch ms) of a part key, or undefined for anything else under the prefix. */
export function hourOfPartKey(key: string): number | undefined {
  const m = PART_KEY.exec(key);
  if (!m) return undefined;
  return Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4]));
}
