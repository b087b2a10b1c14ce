// Where everything lives in the object store, and how keys are named.
// Report parts: reports/v1/year=YYYY/month=MM/day=DD/hour=HH/part-<ulid>.parquet, and a
// compacted closed day: reports/v1/year=YYYY/month=MM/day=DD/hour=all/part-<ulid>.parquet
// ("all" sorts after "23", so a day's keys stay together and in time order).
import { ulid } from 'ulid';

export const SOURCE = 'partner';
export const REPORTS_PREFIX = 'reports/v1/';
const PART_KEY = /^reports\/v1\/year=(\d{4})\/month=(\d{2})\/day=(\d{2})\/hour=(\d{2}|all)\/part-[0-9A-Z]{26}\.parquet$/;
/** The hour folder of a compacted day. */
export const WHOLE_DAY = 'all';
export const DAY_MS = 86_400_000;

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
/** Retractions, and those whose parts still hold the personal fields: named by created_at, so a window is a key range. */
export const RETRACTIONS_PREFIX = 'ingest/retractions/';
export const UNPURGED_PREFIX = 'ingest/unpurged/';
export const API_KEYS_PREFIX = 'ingest/api-keys/';

/** `<created_at ms, 15 digits>-<pkey>.json`: sorts by created_at. */
export function retractionName(createdMs: number, pkey: string): string {
  return `${String(Math.trunc(createdMs)).padStart(15, '0')}-${pkey}.json`;
}

export function parseRetractionName(name: string): { createdMs: number; pkey: string } | undefined {
  const m = /^(\d{15})-(.+)\.json$/.exec(name);
  return m ? { createdMs: Number(m[1]), pkey: m[2]! } : undefined;
}
export const IDEMPOTENCY_PREFIX = 'ingest/keys/';

/** The idempotency key a pending marker stands for. */
export function keyOfMarker(marker: string): string {
  return IDEMPOTENCY_PREFIX + marker.slice(PENDING_PREFIX.length);
}

/** Start of the UTC hour holding `ms`. */
export function hourStart(ms: number): number {
  return Math.floor(ms / 3_600_000) * 3_600_000;
}

/** Start of the UTC day holding `ms`. */
export function dayStart(ms: number): number {
  return Math.floor(ms / DAY_MS) * DAY_MS;
}

/** Hours (and days) ending before this instant are closed: no flush is still writing into them. */
export function closedBefore(flushIntervalSeconds: number, now = Date.now()): number {
  return now - Math.max(300, flushIntervalSeconds * 3) * 1000;
}

/** The partition folder of an hour (or, with `wholeDay`, of its compacted day), ending in '/'. */
export function hourPrefix(hourMs: number, wholeDay = false): string {
  const d = new Date(hourMs);
  const p = (n: number) => String(n).padStart(2, '0');
  return `${REPORTS_PREFIX}year=${d.getUTCFullYear()}/month=${p(d.getUTCMonth() + 1)}/day=${p(d.getUTCDate())}/hour=${wholeDay ? WHOLE_DAY : p(d.getUTCHours())}/`;
}

export function newPartKey(hourMs: number): string {
  return `${hourPrefix(hourMs)}part-${ulid()}.parquet`;
}

/** The key of a new compacted-day part. */
export function newDayPartKey(dayMs: number): string {
  return `${hourPrefix(dayStart(dayMs), true)}part-${ulid()}.parquet`;
}

/** Where a part belongs: its hour (or its day, for a compacted day); undefined for anything else under the prefix. */
export function partitionOfPartKey(key: string): { startMs: number; wholeDay: boolean } | undefined {
  const m = PART_KEY.exec(key);
  if (!m) return undefined;
  const wholeDay = m[4] === WHOLE_DAY;
  return { startMs: Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), wholeDay ? 0 : Number(m[4])), wholeDay };
}
