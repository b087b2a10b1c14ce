// Finds the archive parts of a time window. Keys sort in time order, so a window is the key range
// [its first hour, its last day]. A listing has no end key: one from the window's first hour
// would go on past the window, up to a page of 1,000 keys on S3, which the client parses (some
// 30 ms for 350 keys; a month of 2024 in an archive running since would read 1,000 keys of later
// months). So a window is listed by its folders, all at once: a window of a few days a day at a
// time, a longer one a month at a time (its first month from its first hour). A window of years
// (the whole archive: its extent, a sync of everything) is one listing from its first hour, read
// to its end: a month at a time, 1970 to 9999 was 96,000 listings.
import pLimit from 'p-limit';
import { DAY_MS, dayPrefix, dayStart, hourPrefix, hourStart, monthPrefix, partitionOfPartKey, REPORTS_PREFIX } from '../store/layout.js';
import type { ListOptions, ObjectInfo, ObjectStore } from '../store/objectStore.js';

/** The parts of one partition: an hour, or (wholeDay) a compacted day starting at hourMs. */
export interface HourParts {
  hourMs: number;
  wholeDay: boolean;
  parts: ObjectInfo[];
}

/** Windows of at most this many UTC days are listed a day at a time (that many listings at once). */
const DAYS_LISTED_APART = 7;

/** Month listings in flight at once, for a window of many months. */
const MONTH_LISTINGS_AT_ONCE = 12;

/** Windows of more months than this are one listing (the archive's own windows span at most 13). */
const MONTHS_LISTED_APART = 24;

/** The partitions of [startMs, endMs] that hold parts, in key order (oldest first; a day's compacted part after its hours). */
export async function listWindowParts(store: Pick<ObjectStore, 'list'>, startMs: number, endMs: number): Promise<HourParts[]> {
  const firstHour = hourStart(startMs);
  const lastHour = hourStart(endMs);
  const lastDay = dayStart(endMs);
  const days = Math.max(0, (lastDay - dayStart(startMs)) / DAY_MS + 1);
  const keys =
    days <= DAYS_LISTED_APART
      ? dayByDay(store, dayStart(startMs), days)
      : monthsOf(firstHour, lastDay) <= MONTHS_LISTED_APART
        ? monthByMonth(store, firstHour, lastDay)
        : store.list({ prefix: REPORTS_PREFIX, startAfter: hourPrefix(firstHour) });
  const out: HourParts[] = [];
  for await (const info of keys) {
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

/** The keys of `days` UTC days from `firstDay`, in key order: each day's listing made at once. */
async function* dayByDay(store: Pick<ObjectStore, 'list'>, firstDay: number, days: number): AsyncIterable<ObjectInfo> {
  const listings = Array.from({ length: days }, (_, i) => collect(store.list({ prefix: dayPrefix(firstDay + i * DAY_MS) })));
  // Each failure is its own listing's, handled here; the first one in day order is the window's.
  const settled = await Promise.allSettled(listings);
  for (const day of settled) {
    if (day.status === 'rejected') throw day.reason;
    yield* day.value;
  }
}

/**
 * The keys of the UTC months from the one of `firstHour` to the one of `lastDay`, in key order,
 * the first from `firstHour` on; at most MONTH_LISTINGS_AT_ONCE listings in flight.
 */
async function* monthByMonth(store: Pick<ObjectStore, 'list'>, firstHour: number, lastDay: number): AsyncIterable<ObjectInfo> {
  // The folder name sorts before every key inside it, so it is the exclusive start. The
  // first day's compacted part (hour=all) sorts after its hours, so it is in the range too.
  const months: ListOptions[] = [{ prefix: monthPrefix(firstHour), startAfter: hourPrefix(firstHour) }];
  for (let d = new Date(firstHour); ; ) {
    d = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1));
    if (d.getTime() > lastDay) break;
    months.push({ prefix: monthPrefix(d.getTime()) });
  }
  const limit = pLimit(MONTH_LISTINGS_AT_ONCE);
  const listings = months.map((options) => limit(() => collect(store.list(options))));
  const settled = await Promise.allSettled(listings);
  for (const month of settled) {
    if (month.status === 'rejected') throw month.reason;
    yield* month.value;
  }
}

/** UTC months from the one of `fromMs` to the one of `toMs`, both counted. */
function monthsOf(fromMs: number, toMs: number): number {
  const [from, to] = [new Date(fromMs), new Date(toMs)];
  return (to.getUTCFullYear() - from.getUTCFullYear()) * 12 + to.getUTCMonth() - from.getUTCMonth() + 1;
}

async function collect(keys: AsyncIterable<ObjectInfo>): Promise<ObjectInfo[]> {
  const out: ObjectInfo[] = [];
  for await (const info of keys) out.push(info);
  return out;
}
