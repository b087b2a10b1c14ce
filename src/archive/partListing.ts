// Finds the archive parts of a time window with one ranged listing: keys sort
// in time order, so the window is the key range [its first hour, its last day].
import { DAY_MS, dayStart, hourPrefix, hourStart, partitionOfPartKey, REPORTS_PREFIX } from '../store/layout.js';
import type { ObjectInfo, ObjectStore } from '../store/objectStore.js';

/** The parts of one partition: an hour, or (wholeDay) a compacted day starting at hourMs. */
export interface HourParts {
  hourMs: number;
  wholeDay: boolean;
  parts: ObjectInfo[];
}

/** The partitions of [startMs, endMs] that hold parts, in key order (oldest first; a day's compacted part after its hours). */
export async function listWindowParts(store: ObjectStore, startMs: number, endMs: number): Promise<HourParts[]> {
  const firstHour = hourStart(startMs);
  const lastHour = hourStart(endMs);
  const lastDay = dayStart(endMs);
  const out: HourParts[] = [];
  // The folder name sorts before every key inside it, so it is the exclusive start. The
  // first day's compacted part (hour=all) sorts after its hours, so it is in the range too.
  for await (const info of store.list({ prefix: REPORTS_PREFIX, startAfter: hourPrefix(firstHour) })) {
    const partition = partitionOfPartKey(info.key);
    if (partition === undefined) continue;
    const { startMs: hourMs, wholeDay } = partition;
    // The last day's compacted part comes after its hours: read on to the end of that day.
    if (hourMs >= lastDay + DAY_MS) break;
    if (!wholeDay && (hourMs > lastHour || hourMs < firstHour)) continue;
    const last = out[out.length - 1];
    if (last && last.hourMs === hourMs && last.wholeDay === wholeDay) last.parts.push(info);
    else out.push({ hourMs, wholeDay, parts: [info] });
  }
  return out;
}
