// A window's plan: its parts grouped by UTC day, newest day first. Everything a window answers
// is read from these parts, and its tag is computed from them.
import { dayStart } from '../store/layout.js';
import type { ObjectInfo, ObjectStore } from '../store/objectStore.js';
import { listWindowParts, type HourParts } from './partListing.js';
import type { WindowQuery } from './query.js';

export const HOUR_MS = 3_600_000;

/** The parts of one UTC day of a window. */
export interface DayPlan {
  dayMs: number;
  /** Compacted parts holding the whole day (one, once compaction has run). */
  whole: ObjectInfo[];
  /** Hour parts, newest hour first. */
  hours: HourParts[];
}

export async function planWindow(store: ObjectStore, query: WindowQuery): Promise<DayPlan[]> {
  const endMs = query.after ? Math.min(query.endMs, query.after.createdMs) : query.endMs;
  const partitions = await listWindowParts(store, query.startMs, endMs);
  const days: DayPlan[] = [];
  for (let i = partitions.length - 1; i >= 0; i--) {
    const partition = partitions[i]!;
    const dayMs = dayStart(partition.hourMs);
    let day = days[days.length - 1];
    if (!day || day.dayMs !== dayMs) days.push((day = { dayMs, whole: [], hours: [] }));
    if (partition.wholeDay) day.whole.push(...partition.parts);
    else day.hours.push(partition);
  }
  return days;
}

export function partsOf(day: DayPlan): ObjectInfo[] {
  return [...day.whole, ...day.hours.flatMap((h) => h.parts)];
}

/**
 * The files hold each pkey once, so there is nothing to de-duplicate (see `filteredRows`):
 * one compacted part alone, or single parts of distinct hours.
 */
export function isClean(whole: readonly ObjectInfo[], hours: readonly HourParts[]): boolean {
  return whole.length === 0 ? hours.every((h) => h.parts.length === 1) : whole.length === 1 && hours.length === 0;
}

export const isDayClean = (day: DayPlan) => isClean(day.whole, day.hours);

/** Consecutive runs of `items` whose sizes add up to about `limit` each. */
export function groupBySize<T>(items: readonly T[], size: (item: T) => number, limit: number): T[][] {
  const groups: T[][] = [];
  let current: T[] = [];
  let bytes = 0;
  for (const item of items) {
    if (current.length > 0 && bytes + size(item) > limit) {
      groups.push(current);
      current = [];
      bytes = 0;
    }
    current.push(item);
    bytes += size(item);
  }
  if (current.length > 0) groups.push(current);
  return groups;
}
