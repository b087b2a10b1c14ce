// Where a part's sidecars live: the part's path under a prefix of their own (outside
// `reports/v1/`, so readers of the Parquet layout never see them), one per kind and version.
// The only place that spells sidecar keys.
import { dayPrefix, REPORTS_PREFIX } from '../../store/layout.js';
import type { ObjectInfo } from '../../store/objectStore.js';

/** Today's ready texts and stats sidecars. */
const READY_PREFIX = 'ready/v7/';
const STATS_PREFIX = 'stats/v2/';

/** The part's path below its prefix, without `.parquet`. */
function restOf(partKey: string): string {
  if (!partKey.startsWith(REPORTS_PREFIX)) throw new Error(`not a part key: ${partKey}`);
  return partKey.slice(REPORTS_PREFIX.length).replace(/\.parquet$/, '');
}

/** Where a part's ready texts live. */
export function readyKeyOf(partKey: string): string {
  return `${READY_PREFIX}${restOf(partKey)}.ready`;
}

/** Where a part's stats sidecar lives. */
export function statsKeyOf(partKey: string): string {
  return `${STATS_PREFIX}${restOf(partKey)}.stats`;
}

/** The folders of today's sidecars of a UTC day's parts (its hours and its compacted day), each ending in '/'. */
export function sidecarDayPrefixes(dayMs: number): string[] {
  const rest = dayPrefix(dayMs).slice(REPORTS_PREFIX.length);
  return [`${READY_PREFIX}${rest}`, `${STATS_PREFIX}${rest}`];
}

/** The part a sidecar of today's versions belongs to; undefined for any other key. */
export function partKeyOfSidecar(key: string): string | undefined {
  for (const [prefix, ext] of [[READY_PREFIX, '.ready'], [STATS_PREFIX, '.stats']] as const) {
    if (key.startsWith(prefix) && key.endsWith(ext)) return `${REPORTS_PREFIX}${key.slice(prefix.length, -ext.length)}.parquet`;
  }
  return undefined;
}

/**
 * Where ready texts were kept before (FORMAT.md, "Versions"): v1 under the part's own name, v2
 * to v6 as `.ready`. Never read; deleted with their parts or when compaction writes today's.
 */
export function oldReadyKeysOf(partKey: string): string[] {
  return [`ready/v1/${partKey.slice(REPORTS_PREFIX.length)}`, ...[2, 3, 4, 5, 6].map((v) => `ready/v${v}/${restOf(partKey)}.ready`)];
}

/** Where stats sidecars were kept before: v1 (a one-byte city). Never read; deleted as old ready texts are. */
export function oldStatsKeysOf(partKey: string): string[] {
  return [`stats/v1/${restOf(partKey)}.stats`];
}

/** Every sidecar key the parts may have, of any version. */
export function sidecarKeysOf(partKeys: readonly string[]): string[] {
  return [...partKeys.map(readyKeyOf), ...partKeys.map(statsKeyOf), ...partKeys.flatMap(oldReadyKeysOf), ...partKeys.flatMap(oldStatsKeysOf)];
}

/** A listed part's ready texts, as an object of its own (same ETag: they are derived from that part). */
export function readyInfoOf(part: ObjectInfo): ObjectInfo {
  return { ...part, key: readyKeyOf(part.key) };
}

/** A listed part's stats sidecar, as an object of its own (same ETag). */
export function statsInfoOf(part: ObjectInfo): ObjectInfo {
  return { ...part, key: statsKeyOf(part.key) };
}
