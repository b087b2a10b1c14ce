// Counts of a window by time bucket and by place (GET /reports/archive/stats). Parts with a
// stats sidecar (sidecars/) are counted from it in JavaScript; what the sidecars cannot
// answer (hours with several parts to de-duplicate, days holding a report retracted but not yet
// purged, parts without a sidecar, syncs and tombstones) is one GROUP BY in DuckDB over the
// rows the archive would answer, reading only the columns it needs.
import type { WindowContext } from './context.js';
import { Holds } from './holds.js';
import { HOUR_MS, isClean, isDayClean, type DayPlan } from './plan.js';
import type { HourParts } from './partListing.js';
import type { WindowQuery } from './query.js';
import { withReplan } from './replan.js';
import { filteredRows } from './sql.js';
import { sidecarCounter } from './sidecars/index.js';
import type { ObjectInfo } from '../store/objectStore.js';
import { SETTLE_MS } from './changes.js';
export const STATS_INTERVALS = ['hour', 'day', 'week', 'month'] as const;
export type StatsInterval = (typeof STATS_INTERVALS)[number];
/** What the archive counts by: its own columns. */
export const STATS_BY = ['city', 'local_area', 'none'] as const;
export type StatsBy = (typeof STATS_BY)[number];
/** What an answer may be split by: the archive's keys, or the levels a boundary version's hierarchy rolls cities up into. */
export const STATS_ANSWER_BY = ['region', 'province', ...STATS_BY] as const;
export type StatsAnswerBy = (typeof STATS_ANSWER_BY)[number];

export interface StatsSpec {
  interval: StatsInterval;
  by: StatsBy;
  /** The UTC offset buckets are cut at, in minutes (Manila: 480). Weeks start on Monday. */
  offsetMinutes: number;
}

export interface StatsRow {
  /** Start of the bucket, as an instant in the requested offset. */
  bucket: string;
  /** City code or PSGC code; null for reports outside every city or barangay, and for by=none. */
  key: string | null;
  count: number;
}

const KEY_COLUMN: Record<StatsBy, string> = {
  city: 'instance_region_code',
  local_area: 'local_area_id',
  none: 'NULL::VARCHAR',
};

const FIXED_MS: Partial<Record<StatsInterval, number>> = { hour: 3_600_000, day: 86_400_000, week: 7 * 86_400_000 };
/** 1970-01-01 was a Thursday: weeks (Monday first) start 4 days after the epoch. */
const WEEK_ORIGIN_MS = 4 * 86_400_000;

/**
 * The grouping query over `rows` (a subquery of de-duplicated, filtered archive rows); only
 * created_at and the key column are read. Buckets are cut in local time: hours, days and weeks
 * by arithmetic on the epoch shifted by the offset, floored (no calendar or time-zone work per
 * row); months by truncating a plain TIMESTAMP built from the shifted epoch. The bucket start
 * comes back as a UTC instant in ms.
 */
export function statsSql(rows: string, spec: StatsSpec): string {
  const off = spec.offsetMinutes * 60_000;
  const len = FIXED_MS[spec.interval];
  const origin = spec.interval === 'week' ? WEEK_ORIGIN_MS : 0;
  const bucket =
    len !== undefined
      ? `floor((epoch_ms(created_at) + ${off - origin}) / ${len})::BIGINT * ${len} + ${origin - off}`
      : `epoch_ms(date_trunc('month', make_timestamp(epoch_us(created_at) + ${off * 1000}))) - ${off}`;
  return `SELECT ${bucket} AS bucket_ms, ${KEY_COLUMN[spec.by]} AS key, count(*)::BIGINT AS n FROM ${rows} GROUP BY ALL`;
}

/** Counts by bucket, then by key, added up from any number of sources (sidecars, DuckDB chunks). */
export class StatsTally {
  // By bucket, then by key: a year by barangay is tens of thousands of rows over a few dozen buckets.
  private readonly buckets = new Map<number, Map<string | null, number>>();

  add(bucketMs: number, key: string | null, count: number): void {
    let keys = this.buckets.get(bucketMs);
    if (!keys) this.buckets.set(bucketMs, (keys = new Map()));
    keys.set(key, (keys.get(key) ?? 0) + count);
  }

  /** Adds another tally's counts to this one's. */
  addAll(other: StatsTally): void {
    for (const [bucketMs, keys] of other.buckets) for (const [key, n] of keys) this.add(bucketMs, key, n);
  }

  /** The tidy rows: oldest bucket first, then by key. */
  rows(offsetMinutes: number): StatsRow[] {
    const rows: StatsRow[] = [];
    for (const bucketMs of [...this.buckets.keys()].sort((a, b) => a - b)) {
      const bucket = formatInstant(bucketMs, offsetMinutes);
      const keys = this.buckets.get(bucketMs)!;
      for (const key of [...keys.keys()].sort(compareKeys)) rows.push({ bucket, key, count: keys.get(key)! });
    }
    return rows;
  }
}

/**
 * The bucket of a report created at `us` (epoch µs) as `statsSql` computes it in DuckDB (time
 * shifted by the offset and origin, floored to the bucket's length, epoch_ms dropping the
 * microseconds: created_at is never before 1970), and the created_at
 * range [fromUs, toUs) that shares it: reports come oldest first, so the bucket is worked out
 * again only when one falls outside the last range.
 */
export function bucketer(spec: StatsSpec): (us: number) => { bucketMs: number; fromUs: number; toUs: number } {
  const off = spec.offsetMinutes * 60_000;
  const len = FIXED_MS[spec.interval];
  if (len !== undefined) {
    const origin = spec.interval === 'week' ? WEEK_ORIGIN_MS : 0;
    return (us) => {
      const shifted = Math.trunc(us / 1000) + off - origin;
      // Floored: a week or a local day that began before the epoch holds its first reports too.
      const bucketMs = Math.floor(shifted / len) * len + origin - off;
      return { bucketMs, fromUs: bucketMs * 1000, toUs: (bucketMs + len) * 1000 };
    };
  }
  return (us) => {
    const local = new Date(Math.floor(us / 1000) + off);
    const bucketMs = Date.UTC(local.getUTCFullYear(), local.getUTCMonth(), 1) - off;
    return { bucketMs, fromUs: bucketMs * 1000, toUs: (Date.UTC(local.getUTCFullYear(), local.getUTCMonth() + 1, 1) - off) * 1000 };
  };
}

/**
 * Counts a window's reports by bucket and key (the same filters and answer as the archive's):
 * parts with a sidecar that holds their reports as the answer would are counted from it, the
 * rest by DuckDB, a month of days per query.
 */
export async function countStats(ctx: WindowContext, query: WindowQuery, days: readonly DayPlan[], spec: StatsSpec): Promise<StatsRow[]> {
  const tally = new StatsTally();
  // DAYS_AT_ONCE days at a time, each read again over a new listing of its own days (replan.ts)
  // should a part of theirs be retired meanwhile: a reprocess retires parts all along, and three
  // months counted from their start again at each retirement never got through.
  for (let i = 0; i < days.length; i += DAYS_AT_ONCE) {
    tally.addAll(await withReplan(ctx, days.slice(i, i + DAYS_AT_ONCE), (month) => countDays(ctx, query, month, spec)));
  }
  return tally.rows(spec.offsetMinutes);
}

/** Days (that hold reports) counted at once: some month's; their stats sidecars and parts are held until they are counted. */
const DAYS_AT_ONCE = 31;

/** The days' counts: by their stats sidecars where those answer, by DuckDB over their parts where not. */
async function countDays(ctx: WindowContext, query: WindowQuery, days: readonly DayPlan[], spec: StatsSpec): Promise<StatsTally> {
  const tally = new StatsTally();
  const rest = await Holds.during((sidecars) => countSidecars(ctx, query, days, spec, tally, sidecars));
  if (rest.length === 0) return tally;
  await Holds.during(async (holds) => {
    const bound = filteredRows(await ctx.files(rest.flatMap((c) => c.parts), holds), query, rest.every((c) => c.clean));
    await ctx.db.withMemory(async (conn) => {
      const reader = await conn.runAndReadAll(statsSql(bound.sql, spec), bound.values, bound.types);
      for (const row of reader.getRowObjectsJS()) tally.add(Number(row.bucket_ms), row.key === null ? null : String(row.key), Number(row.n));
    }, ctx.signal);
  });
  return tally;
}

/** Parts of one day that DuckDB counts, and whether they hold each pkey once (see `filteredRows`). */
interface DuckDbDay {
  parts: ObjectInfo[];
  clean: boolean;
}

/**
 * Counts what the sidecars can answer into `tally`; returns the days' parts left to DuckDB. A
 * sidecar answers for its part alone, so only where the answer needs no de-duplication: a day
 * compacted into one part, or an hour with one part. A report the ledger retracted but whose part
 * still holds it is in the sidecar too: its day (or hour) goes to DuckDB, which hides it by pkey.
 */
async function countSidecars(ctx: WindowContext, query: WindowQuery, days: readonly DayPlan[], spec: StatsSpec, tally: StatsTally, holds: Holds): Promise<DuckDbDay[]> {
  // Syncs, tombstones and pages select by what the sidecars do not hold (pkeys, status).
  if (query.updatedAfterMs !== undefined || query.changed !== undefined || query.includeRetracted || query.after !== undefined || query.pkey !== undefined) {
    return days.map((day) => ({ parts: [...day.whole, ...day.hours.flatMap((h) => h.parts)], clean: isDayClean(day) }));
  }
  const retracted = query.retracted ?? [];
  const holdsRetracted = (fromMs: number, toMs: number) => retracted.some((r) => r.createdMs >= fromMs && r.createdMs < toMs);
  // Reports received by an instant (a walk's numberMatched): a part written well before it holds
  // none received after it (a report is received before its part is written; SETTLE_MS for the
  // hosts' clocks), so its sidecar counts it; a part written since goes to DuckDB.
  const { receivedBeforeMs } = query;
  const answers = (part: ObjectInfo) => receivedBeforeMs === undefined || part.lastModified.getTime() < receivedBeforeMs - SETTLE_MS;
  // Each day: the parts a sidecar may answer for (with their hour, for an hour part), and the
  // hours left to DuckDB (undefined: the whole day).
  const plans = days.map((day) => {
    const candidates: { part: ObjectInfo; hour?: HourParts }[] = [];
    let left: HourParts[] | undefined;
    if (day.whole.length === 1 && day.hours.length === 0) {
      if (!holdsRetracted(day.dayMs, day.dayMs + 24 * HOUR_MS) && answers(day.whole[0]!)) candidates.push({ part: day.whole[0]! });
      left = candidates.length > 0 ? [] : undefined;
    } else if (day.whole.length === 0) {
      left = [];
      for (const hour of day.hours) {
        if (hour.parts.length === 1 && !holdsRetracted(hour.hourMs, hour.hourMs + HOUR_MS) && answers(hour.parts[0]!)) candidates.push({ part: hour.parts[0]!, hour });
        else left.push(hour);
      }
    }
    return { day, candidates, left };
  });
  const files = await ctx.statsFiles(plans.flatMap((p) => p.candidates.map((c) => c.part)), holds);
  const count = sidecarCounter(query, spec.by, bucketer(spec), (bucketMs, key, n) => tally.add(bucketMs, key, n));
  const countedFrom = (file: string, part: ObjectInfo): boolean => {
    try {
      count(file);
      return true;
    } catch (err) {
      ctx.unreadable(part, 'stats sidecar', err);
      return false;
    }
  };
  const rest: DuckDbDay[] = [];
  let f = 0;
  for (const { day, candidates, left } of plans) {
    ctx.signal?.throwIfAborted();
    let hours = left;
    for (const { part, hour } of candidates) {
      const file = files[f++];
      // A sidecar that cannot be read (cut short on a disk) counts nothing: its part is counted instead.
      if (file !== undefined && countedFrom(file, part)) continue;
      if (hour) hours?.push(hour);
      else hours = undefined; // a compacted day without its sidecar
    }
    if (hours === undefined) rest.push({ parts: [...day.whole, ...day.hours.flatMap((h) => h.parts)], clean: isDayClean(day) });
    else if (hours.length > 0) rest.push({ parts: hours.flatMap((h) => h.parts), clean: isClean([], hours) });
  }
  return rest;
}

/** Nulls last, then code order. */
function compareKeys(a: string | null, b: string | null): number {
  if (a === b) return 0;
  if (a === null) return 1;
  if (b === null) return -1;
  return a < b ? -1 : 1;
}

/**
 * Rows counted by city rolled up into the areas above them (`parentOf`: a city's province or
 * region code, null for none), in the same order: oldest bucket first, then by key.
 */
export function rollUp(rows: readonly StatsRow[], parentOf: (city: string) => string | null): StatsRow[] {
  const out: StatsRow[] = [];
  let i = 0;
  while (i < rows.length) {
    const bucket = rows[i]!.bucket;
    const keys = new Map<string | null, number>();
    for (; i < rows.length && rows[i]!.bucket === bucket; i++) {
      const key = rows[i]!.key === null ? null : parentOf(rows[i]!.key!);
      keys.set(key, (keys.get(key) ?? 0) + rows[i]!.count);
    }
    for (const key of [...keys.keys()].sort(compareKeys)) out.push({ bucket, key, count: keys.get(key)! });
  }
  return out;
}

/** `2025-06-01T00:00:00.000Z`, or `2025-06-01T00:00:00.000+08:00` for a non-zero offset. */
function formatInstant(ms: number, offsetMinutes: number): string {
  if (offsetMinutes === 0) return new Date(ms).toISOString();
  const local = new Date(ms + offsetMinutes * 60_000).toISOString().slice(0, -1);
  const sign = offsetMinutes < 0 ? '-' : '+';
  const abs = Math.abs(offsetMinutes);
  return `${local}${sign}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`;
}
