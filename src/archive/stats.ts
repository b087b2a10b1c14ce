// Counts of a window by time bucket and by place (GET /reports/archive/stats):
// one GROUP BY over the window's rows, reading only the columns it needs.
export const STATS_INTERVALS = ['hour', 'day', 'week', 'month'] as const;
export type StatsInterval = (typeof STATS_INTERVALS)[number];
export const STATS_BY = ['city', 'local_area', 'none'] as const;
export type StatsBy = (typeof STATS_BY)[number];

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
 * by integer arithmetic on the epoch shifted by the offset (no calendar or time-zone work per
 * row); months by truncating a plain TIMESTAMP built from the shifted epoch. The bucket start
 * comes back as a UTC instant in ms.
 */
export function statsSql(rows: string, spec: StatsSpec): string {
  const off = spec.offsetMinutes * 60_000;
  const len = FIXED_MS[spec.interval];
  const origin = spec.interval === 'week' ? WEEK_ORIGIN_MS : 0;
  const bucket =
    len !== undefined
      ? `(epoch_ms(created_at) + ${off - origin}) // ${len} * ${len} + ${origin - off}`
      : `epoch_ms(date_trunc('month', make_timestamp(epoch_us(created_at) + ${off * 1000}))) - ${off}`;
  return `SELECT ${bucket} AS bucket_ms, ${KEY_COLUMN[spec.by]} AS key, count(*)::BIGINT AS n FROM ${rows} GROUP BY ALL`;
}

/** Adds up per-chunk partial counts (a bucket can straddle two chunks of days) and orders them. */
export function mergeStats(partials: Iterable<{ bucketMs: number; key: string | null; count: number }>, offsetMinutes: number): StatsRow[] {
  // By bucket, then by key: a year by barangay is tens of thousands of rows over a few dozen buckets.
  const buckets = new Map<number, Map<string | null, number>>();
  for (const p of partials) {
    let keys = buckets.get(p.bucketMs);
    if (!keys) buckets.set(p.bucketMs, (keys = new Map()));
    keys.set(p.key, (keys.get(p.key) ?? 0) + p.count);
  }
  const rows: StatsRow[] = [];
  for (const bucketMs of [...buckets.keys()].sort((a, b) => a - b)) {
    const bucket = formatInstant(bucketMs, offsetMinutes);
    const keys = buckets.get(bucketMs)!;
    for (const key of [...keys.keys()].sort(compareKeys)) rows.push({ bucket, key, count: keys.get(key)! });
  }
  return rows;
}

/** Nulls last, then code order. */
function compareKeys(a: string | null, b: string | null): number {
  if (a === b) return 0;
  if (a === null) return 1;
  if (b === null) return -1;
  return a < b ? -1 : 1;
}

/** `2025-06-01T00:00:00.000Z`, or `2025-06-01T00:00:00.000+08:00` for a non-zero offset. */
export function formatInstant(ms: number, offsetMinutes: number): string {
  if (offsetMinutes === 0) return new Date(ms).toISOString();
  const local = new Date(ms + offsetMinutes * 60_000).toISOString().slice(0, -1);
  const sign = offsetMinutes < 0 ? '-' : '+';
  const abs = Math.abs(offsetMinutes);
  return `${local}${sign}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`;
}

/**
 * Whole stats answers of closed windows, by the window's tag (its parts, filters and
 * retractions): a window many people look at (a typhoon's week on the explorer) is counted
 * once. Bounded by bytes, least recently used first out.
 */
export class StatsAnswers {
  private readonly bodies = new Map<string, string>();
  private bytes = 0;

  constructor(private readonly maxBytes = 32 * 1024 * 1024) {}

  get(tag: string): string | undefined {
    const body = this.bodies.get(tag);
    if (body !== undefined) {
      this.bodies.delete(tag);
      this.bodies.set(tag, body);
    }
    return body;
  }

  set(tag: string, body: string): void {
    if (body.length * 2 > this.maxBytes || this.bodies.has(tag)) return;
    this.bodies.set(tag, body);
    this.bytes += body.length * 2;
    for (const [oldest, old] of this.bodies) {
      if (this.bytes <= this.maxBytes) break;
      this.bodies.delete(oldest);
      this.bytes -= old.length * 2;
    }
  }
}
