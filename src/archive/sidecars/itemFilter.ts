// The window's filters (time, city, bbox) applied to a ready text's per-report index, so an hour
// the window cuts, or a filtered window, is still read from the texts. It must select exactly
// what `filteredRows` (sql.ts) selects from the part: the same doubles compared the same way,
// created_at to the microsecond. test/unit/sidecarEngines.test.ts proves it on random windows.
import type { ReadyFile } from './readyIndex.js';
import type { ReadyHour, ReadyItems } from './readyFormat.js';

/** What a window keeps of an hour: created_at within [startMs, endMs], and its city and bbox filters. */
export interface ItemFilter {
  startMs: number;
  endMs: number;
  /** The city codes a report must carry one of; undefined: any. */
  admin: readonly string[] | undefined;
  bbox?: [number, number, number, number] | undefined;
}

/** The reports of an hour a filter keeps: runs of consecutive positions [from, to), and their bbox. */
export interface Selection {
  runs: [number, number][];
  count: number;
  bbox: [number, number, number, number] | undefined;
}

/**
 * Which of a sidecar's codes (by index) the city filter keeps: 1 for a kept code; undefined when
 * there is no filter. A report outside every city has an index past the codes, never kept.
 */
export function keptCodes(codes: readonly (string | null)[], admin: readonly string[] | undefined): Uint8Array | undefined {
  if (admin === undefined) return undefined;
  const wanted = new Set(admin);
  return Uint8Array.from(codes, (c) => (c !== null && wanted.has(c) ? 1 : 0));
}

/**
 * Whether the window's time may keep some of the hour's reports: their times, not the hour's,
 * against it. An hour the window only touches (a window ending at midnight touches the next day's
 * first hour) is then read not at all: neither its sections nor the per-report index. Exact at
 * the edges: created_at is at least minMs and under maxMs + 1 ms.
 */
export function mayKeepSome(hour: Pick<ReadyHour, 'minMs' | 'maxMs'>, filter: Pick<ItemFilter, 'startMs' | 'endMs'>): boolean {
  return hour.maxMs >= filter.startMs && hour.minMs <= filter.endMs;
}

/** Whether the window's time keeps every report of the hour. */
export function keepsAllTimes(hour: Pick<ReadyHour, 'minMs' | 'maxMs'>, filter: Pick<ItemFilter, 'startMs' | 'endMs'>): boolean {
  return hour.minMs >= filter.startMs && hour.maxMs <= filter.endMs;
}

/** Selects an hour's reports as DuckDB's filters would (the same doubles compared; created_at to the microsecond). */
export function selectItems(ready: ReadyFile, items: ReadyItems, hour: ReadyHour, filter: ItemFilter): Selection {
  const startUs = filter.startMs * 1000;
  const endUs = filter.endMs * 1000;
  const kept = keptCodes(ready.index.items.codes, filter.admin);
  const runs: [number, number][] = [];
  let count = 0;
  let minX = Infinity;
  let minY = Infinity;
  let maxX = -Infinity;
  let maxY = -Infinity;
  for (let i = hour.first; i < hour.first + hour.count; i++) {
    const t = items.createdUs[i]!;
    const x = items.lng[i]!;
    const y = items.lat[i]!;
    if (t < startUs || t > endUs) continue;
    if (kept && kept[items.city[i]!] !== 1) continue;
    if (filter.bbox && (x < filter.bbox[0] || x > filter.bbox[2] || y < filter.bbox[1] || y > filter.bbox[3])) continue;
    const last = runs[runs.length - 1];
    if (last && last[1] === i) last[1] = i + 1;
    else runs.push([i, i + 1]);
    count += 1;
    if (x < minX) minX = x;
    if (x > maxX) maxX = x;
    if (y < minY) minY = y;
    if (y > maxY) maxY = y;
  }
  return { runs, count, bbox: count > 0 ? [minX, minY, maxX, maxY] : undefined };
}
