// Sidecars left without their part. A writer stores a part's sidecars before the part
// (partPublisher.ts), so a process killed between the two leaves sidecars of a part that never
// came. They are never read (a sidecar is read only through its listed part), only paid for:
// compaction deletes them, day by day.
import { decodeTime } from 'ulid';
import { dayPrefix } from '../../store/layout.js';
import type { ObjectStore } from '../../store/objectStore.js';
import { partKeyOfSidecar, sidecarDayPrefixes } from './keys.js';

/**
 * A sidecar written this long ago, of a part whose key was minted this long ago and that is
 * still not stored, has no writer coming back to it: a writer stores a part seconds after its
 * sidecars (a bulk import mints a round's keys at its start, so the key alone is not enough). One
 * that stalled longer finds its part without sidecars, which DuckDB answers and compaction gives
 * sidecars again.
 */
export const STRAY_AFTER_MS = 60 * 60_000;

/** The time a part's key was minted (its ULID's), if it has one. */
function mintedMs(partKey: string): number | undefined {
  const id = /part-([0-9A-HJKMNP-TV-Z]{26})\.parquet$/.exec(partKey)?.[1];
  if (!id) return undefined;
  try {
    return decodeTime(id);
  } catch {
    return undefined;
  }
}

/**
 * Deletes the sidecars of the UTC day from `dayMs` written over STRAY_AFTER_MS before `nowMs`
 * whose part is not stored and was minted over STRAY_AFTER_MS before it; returns how many.
 */
export async function deleteStraySidecars(store: Pick<ObjectStore, 'list' | 'delete'>, dayMs: number, nowMs: number): Promise<number> {
  const candidates: { key: string; part: string }[] = [];
  const old = nowMs - STRAY_AFTER_MS;
  for (const prefix of sidecarDayPrefixes(dayMs)) {
    for await (const info of store.list({ prefix })) {
      const part = partKeyOfSidecar(info.key);
      const minted = part === undefined ? undefined : mintedMs(part);
      if (part !== undefined && minted !== undefined && minted < old && info.lastModified.getTime() < old) candidates.push({ key: info.key, part });
    }
  }
  if (candidates.length === 0) return 0;
  // Listed after the sidecars: a part stored meanwhile is seen.
  const parts = new Set<string>();
  for await (const info of store.list({ prefix: dayPrefix(dayMs) })) parts.add(info.key);
  const strays = candidates.filter((c) => !parts.has(c.part)).map((c) => c.key);
  if (strays.length > 0) await store.delete(strays);
  return strays.length;
}
