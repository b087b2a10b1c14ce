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

/**
 * The grouping query over `rows` (a subquery of de-duplicated, filtered archive rows).
 * Buckets are cut in local time by shifting `created_at` by the offset, truncating as a
 * plain timestamp, and shifting back: the bucket start is then a UTC instant in ms.
 */
export function statsSql(rows: string, spec: StatsSpec): string {
  const local = `(created_at::TIMESTAMP + INTERVAL ${spec.offsetMinutes} MINUTE)`;
  return `SELECT epoch_ms(date_trunc('${spec.interval}', ${local}) - INTERVAL ${spec.offsetMinutes} MINUTE) AS bucket_ms,
                 ${KEY_COLUMN[spec.by]} AS key, count(*)::BIGINT AS n
          FROM ${rows} GROUP BY ALL`;
}

/** Adds up per-chunk partial counts (a bucket can straddle two chunks of days) and orders them. */
export function mergeStats(partials: Iterable<{ bucketMs: number; key: string | null; count: number }>, offsetMinutes: number): StatsRow[] {
  const sums = new Map<string, { bucketMs: number; key: string | null; count: number }>();
  for (const p of partials) {
    const id = `${p.bucketMs}\u0000${p.key ?? ''}\u0000${p.key === null ? 'n' : 'k'}`;
    const hit = sums.get(id);
    if (hit) hit.count += p.count;
    else sums.set(id, { ...p });
  }
  return [...sums.values()]
    .sort((a, b) => a.bucketMs - b.bucketMs || compareKeys(a.key, b.key))
    .map((s) => ({ bucket: formatInstant(s.bucketMs, offsetMinutes), key: s.key, count: s.count }));
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
