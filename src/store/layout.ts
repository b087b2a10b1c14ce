// Where everything lives in the object store, and how keys are named.
// Report parts: reports/v1/year=YYYY/month=MM/day=DD/hour=HH/part-<ulid>.parquet, and a
// compacted closed day: reports/v1/year=YYYY/month=MM/day=DD/hour=all/part-<ulid>.parquet
// ("all" sorts after "23", so a day's keys stay together and in time order).
import { newUlid } from '../shared/ulid.js';
import { KEY_NAME_PATTERN } from '../partners/apiKeys.js';

export const SOURCE = 'partner';
export const REPORTS_PREFIX = 'reports/v1/';
const PART_KEY = /^reports\/v1\/year=(\d{4})\/month=(\d{2})\/day=(\d{2})\/hour=(\d{2}|all)\/part-[0-9A-Z]{26}\.parquet$/;
/** The hour folder of a compacted day. */
export const WHOLE_DAY = 'all';
export const DAY_MS = 86_400_000;

/**
 * A report's key, fixed at acceptance, so no retry can mint another: `<source>-<partner>-<post_id>`
 * for a report posted with a named key (each partner's post_ids are its own), `<source>-<post_id>`
 * for one of no partner (an import without --partner) and for every report accepted before
 * post_ids were per partner (they keep it). A post_id is digits only and a name starts with a
 * letter or digit, so the two forms never meet and a key reads back one way.
 */
export function pkeyOf(source: string, postId: number, partner?: string): string {
  return partner === undefined ? `${source}-${postId}` : `${source}-${partner}-${postId}`;
}

/** A pkey, unanchored (to sit inside other patterns: the OGC feature id): source, optional partner, post_id. */
export const PKEY_PATTERN_BODY = `[a-z][a-z0-9_]{0,31}-(?:${KEY_NAME_PATTERN}-)?(?:0|[1-9]\\d{0,15})`;
/** A pkey, as the HTTP routes and the OpenAPI document state it. */
export const PKEY_PATTERN = `^${PKEY_PATTERN_BODY}$`;
const PKEY = new RegExp(`^([a-z][a-z0-9_]{0,31})-(?:(${KEY_NAME_PATTERN})-)?(0|[1-9]\\d{0,15})$`);

/** What a pkey names: its source, the partner in it (absent in the `<source>-<post_id>` form), its post_id. */
export interface PkeyParts {
  source: string;
  partner?: string;
  post_id: number;
}

/** The parts of a pkey, or undefined for anything that is not one. */
export function parsePkey(pkey: string): PkeyParts | undefined {
  const m = PKEY.exec(pkey);
  if (!m) return undefined;
  const post_id = Number(m[3]);
  if (!Number.isSafeInteger(post_id)) return undefined;
  return { source: m[1]!, ...(m[2] !== undefined && { partner: m[2] }), post_id };
}

/** Where the S3 ledger keeps a report's first version: one object per pkey (a partner's under its own folder). */
export function idempotencyKey(parts: PkeyParts): string {
  return `${IDEMPOTENCY_PREFIX}${slot(parts)}`;
}

export function pendingKey(parts: PkeyParts): string {
  return `${PENDING_PREFIX}${slot(parts)}`;
}

/** The folders of a partner's reports in the S3 ledger: its idempotency keys and its pending markers. */
export function partnerFolders(partner: string): string[] {
  return [IDEMPOTENCY_PREFIX, PENDING_PREFIX].map((prefix) => `${prefix}${SOURCE}/${partner}/`);
}

function slot({ source, partner, post_id }: PkeyParts): string {
  return partner === undefined ? `${source}/${post_id}.json` : `${source}/${partner}/${post_id}.json`;
}

export const PENDING_PREFIX = 'ingest/pending/';
/** Retractions, and those whose parts still hold the personal fields: named by created_at, so a window is a key range. */
export const RETRACTIONS_PREFIX = 'ingest/retractions/';
export const UNPURGED_PREFIX = 'ingest/unpurged/';
export const API_KEYS_PREFIX = 'ingest/api-keys/';
/** One object per key name ever given, created with If-None-Match: a new key cannot take a name in use. */
export const API_KEY_NAMES_PREFIX = 'ingest/api-key-names/';
/** The lock of the one import at a time into the archive (src/ops/importLock.ts). */
export const IMPORT_LOCK_KEY = 'ingest/import-lock.json';
/** A scheduled job's ticks (src/main/scheduler.ts): `<job>/<slot>.json`, created by the process that runs the tick. */
export const JOB_RUNS_PREFIX = 'jobs/runs/';
/** A scheduled job's lease while a run is under way (src/main/scheduler.ts): `<job>.json`. */
export const JOB_LEASES_PREFIX = 'jobs/leases/';
/** Reconciliation timers' turns (src/ingest/reconciler.ts): one object per period, created by the process that takes it. */
export const RECONCILE_TURNS_PREFIX = 'jobs/runs/reconcile-timer/';
/** The lock of the one compaction at a time (src/ops/compact.ts): by hand or scheduled, from any host. */
export const COMPACTION_LOCK_KEY = 'jobs/locks/compaction.json';
/** The lock of the one purge at a time (src/ops/purge.ts): it rewrites parts in place, and two would overwrite each other's. */
export const PURGE_LOCK_KEY = 'jobs/locks/purge.json';
/** The first month the monthly release job set out to release (jobs/release.ts): months from it on are made up if they failed. */
export const RELEASE_SINCE_KEY = 'jobs/release-since.json';
/** Up to when the compaction job has read the change logs for reports written into days older than its week (src/ops/lateDays.ts). */
export const LATE_DAYS_READ_KEY = 'jobs/compaction-late-days.json';
/** The lock of the one run at a time making a period's release (src/ops/release.ts): `jobs/locks/release-2025.json`. */
export const releaseLockKey = (period: string): string => `jobs/locks/release-${period}.json`;

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

const pad2 = (n: number) => String(n).padStart(2, '0');

/** The folder of the UTC month holding `ms` (its days' folders), ending in '/'. */
export function monthPrefix(ms: number): string {
  const d = new Date(ms);
  return `${REPORTS_PREFIX}year=${d.getUTCFullYear()}/month=${pad2(d.getUTCMonth() + 1)}/`;
}

/** The folder of a UTC day's partitions (its hours and its compacted day), ending in '/'. */
export function dayPrefix(ms: number): string {
  const d = new Date(ms);
  return `${REPORTS_PREFIX}year=${d.getUTCFullYear()}/month=${pad2(d.getUTCMonth() + 1)}/day=${pad2(d.getUTCDate())}/`;
}

/** The partition folder of an hour (or, with `wholeDay`, of its compacted day), ending in '/'. */
export function hourPrefix(hourMs: number, wholeDay = false): string {
  return `${dayPrefix(hourMs)}hour=${wholeDay ? WHOLE_DAY : pad2(new Date(hourMs).getUTCHours())}/`;
}

export function newPartKey(hourMs: number): string {
  return `${hourPrefix(hourMs)}part-${newUlid()}.parquet`;
}

/** The key of a new compacted-day part. */
export function newDayPartKey(dayMs: number): string {
  return `${hourPrefix(dayStart(dayMs), true)}part-${newUlid()}.parquet`;
}

/** A write touching more hours than this holds a backlog (a backfill, the queue after an outage). */
const BACKLOG_HOURS = 100;

/**
 * The part key each hour's rows go to, for one write of rows (a worker's flush, a round of a bulk
 * import): one part per hour touched, except in a backlog, where each closed day's rows go into
 * one part of that day, as compaction would leave them (hour=all). A year's backfill is then some
 * 365 part writes instead of 8,760. Hours of one key share it.
 */
export function partKeysOf(hours: Iterable<number>, closedBeforeMs: number): Map<number, string> {
  const list = [...new Set(hours)];
  const keys = new Map<number, string>();
  const days = new Map<number, string>();
  for (const hour of list) {
    const day = dayStart(hour);
    if (list.length <= BACKLOG_HOURS || day + DAY_MS > closedBeforeMs) {
      keys.set(hour, newPartKey(hour));
      continue;
    }
    let key = days.get(day);
    if (!key) days.set(day, (key = newDayPartKey(day)));
    keys.set(hour, key);
  }
  return keys;
}

/** Where a part belongs: its hour (or its day, for a compacted day); undefined for anything else under the prefix. */
export function partitionOfPartKey(key: string): { startMs: number; wholeDay: boolean } | undefined {
  const m = PART_KEY.exec(key);
  if (!m) return undefined;
  const wholeDay = m[4] === WHOLE_DAY;
  return { startMs: Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), wholeDay ? 0 : Number(m[4])), wholeDay };
}
