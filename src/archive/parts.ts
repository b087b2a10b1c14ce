// Finds the archive parts of a time window with one ranged listing: keys sort
// in time order, so the window is the key range [its first hour, its last hour].
import { hourOfPartKey, hourPrefix, hourStart, REPORTS_PREFIX } from '../reports/layout.js';
import type { ObjectInfo, ObjectStore } from '../store/objectStore.js';

export interface HourParts {
  hourMs: number;
  parts: ObjectInfo[];
}

/** The hours of [startMs, endMs] that hold parts, oldest first. */
export async function listWindowParts(store: ObjectStore, startMs: number, endMs: number): Promise<HourParts[]> {
  const firstHour = hourStart(startMs);
  const lastHour = hourStart(endMs);
  const out: HourParts[] = [];
  // The folder name sorts before every key inside it, so it is the exclusive start.
  for await (const info of store.list({ prefix: REPORTS_PREFIX, startAfter: hourPrefix(firstHour) })) {
    const hour = hourOfPartKey(info.key);
    if (hour === undefined) continue;
    if (hour > lastHour) break;
    if (hour < firstHour) continue;
    const last = out[out.length - 1];
    if (last && last.hourMs === hour) last.parts.push(info);
    else out.push({ hourMs: hour, parts: [info] });
  }
  return out;
}
