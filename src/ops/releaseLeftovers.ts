// The files a release run killed before its manifest left behind. Never published (the API
// serves no revision without its manifest), but they may hold reports retracted since, and on a
// deployment whose releases/ prefix is public-read anyone could fetch them from the bucket. A run
// of the same period removes the folder it comes to (release.ts); this removes the rest, after
// each run: every revision folder without a manifest, of any period no other run is making.
import { manifestKey, parseReleaseId, RELEASES_PREFIX, releaseDir } from '../releases/layout.js';
import type { Logger } from '../shared/log.js';
import type { ObjectStore } from '../store/objectStore.js';

/** Runs `remove` while holding a period's release lock; rejects at once when another run holds it. */
export type WithPeriodLock = (period: string, remove: (confirmHeld: () => Promise<void>) => Promise<void>) => Promise<void>;

/**
 * Removes the files of every revision folder without a manifest. Those of `own` (the period whose
 * lock the caller holds: after its run, no other run of it writes there) go at once, once
 * `confirmHeld` has touched that lock; each other period's under its own lock, taken for the
 * moment, or left to the run holding it (the folder may be that run's). What could not be
 * removed is left for the next run, with a warning: the run's release stands.
 */
export async function removeDeadRuns(store: ObjectStore, log: Pick<Logger, 'warn'>, own: { period: string; confirmHeld: () => Promise<void> }, withPeriodLock: WithPeriodLock): Promise<void> {
  const unpublished = await unpublishedFolders(store);
  for (const [period, ids] of unpublished) {
    const remove = async (confirmHeld: () => Promise<void>) => {
      for (const id of ids) {
        // Touched at that moment: no run of the period can have taken the lock over since.
        await confirmHeld();
        await removeUnpublished(store, id);
      }
    };
    try {
      if (period === own.period) await remove(own.confirmHeld);
      else await withPeriodLock(period, remove);
    } catch (err) {
      log.warn({ period, folders: ids.map(releaseDir), err: err instanceof Error ? err.message : String(err) }, `left the unpublished release files of ${period} for the next release run`);
    }
  }
}

/** Removes the files of release `id` unless its manifest stands (published). The caller holds its period's lock. */
export async function removeUnpublished(store: ObjectStore, id: string): Promise<void> {
  if (await store.head(manifestKey(id))) return;
  const keys: string[] = [];
  for await (const info of store.list({ prefix: releaseDir(id) })) keys.push(info.key);
  await store.delete(keys);
}

/** Revision folders with files but no manifest, by period. */
async function unpublishedFolders(store: ObjectStore): Promise<Map<string, string[]>> {
  const folders = new Set<string>();
  const published = new Set<string>();
  for await (const info of store.list({ prefix: RELEASES_PREFIX })) {
    const id = info.key.slice(RELEASES_PREFIX.length).split('/', 1)[0]!;
    if (info.key === `${RELEASES_PREFIX}${id}` || !parseReleaseId(id)) continue;
    folders.add(id);
    if (info.key === manifestKey(id)) published.add(id);
  }
  const byPeriod = new Map<string, string[]>();
  for (const id of folders) {
    if (published.has(id)) continue;
    const { period } = parseReleaseId(id)!;
    byPeriod.set(period, [...(byPeriod.get(period) ?? []), id]);
  }
  return byPeriod;
}
