// Brings a stored part's sidecars to today's versions (FORMAT.md, "Reading an old version"):
// ready texts missing or of an older version are written anew (knowing which reads only the
// first bytes), older versions' objects are deleted; a missing stats sidecar is written.
//
// Unlike a publish, an upgrade writes beside a part already stored, from a local copy taken
// earlier: a purge may rewrite the part in place meanwhile, its sidecars first. So a sidecar is
// created only where none is (the purge's is never replaced), and removed again when the part is
// then no longer the version the copy was of (what it was built from may hold a purged report's
// text).
import type { ObjectStore } from '../../store/objectStore.js';
import { oldReadyKeysOf, oldStatsKeysOf, readyKeyOf, statsKeyOf } from './keys.js';
import { storedIndex } from './readyIndex.js';
import { buildReadyTexts, buildStatsSidecar, type LocalPart, type SidecarDeps } from './storeSidecars.js';

/** A stored part and its local copy, which is of the version `etag`. */
export interface CopiedPart extends LocalPart {
  etag: string;
}

/**
 * Writes the ready texts of the parts stored without today's, built together; for each part,
 * true if written (and the part still the version copied).
 */
export async function upgradeReadyTexts(deps: SidecarDeps, parts: readonly CopiedPart[], scratch: string): Promise<boolean[]> {
  const stored = await Promise.all(parts.map(async (p) => (await storedIndex(deps.store, readyKeyOf(p.key))) !== undefined));
  const lacking = parts.filter((_, i) => !stored[i]);
  const bodies = lacking.length > 0 ? await buildReadyTexts(deps, lacking, scratch) : [];
  const written = new Set<string>();
  await Promise.all(
    lacking.map(async (part, i) => {
      const body = bodies[i];
      if (body && (await createBeside(deps.store, part, readyKeyOf(part.key), body))) written.add(part.key);
    }),
  );
  await Promise.all([...written].map((key) => deps.store.delete(oldReadyKeysOf(key))));
  return parts.map((p) => written.has(p.key));
}

/** Writes the stats sidecar of a part stored without one. True if written (and the part still the version copied). */
export async function upgradeStatsSidecar(deps: SidecarDeps, part: CopiedPart): Promise<boolean> {
  if (await deps.store.head(statsKeyOf(part.key))) return false;
  const body = await buildStatsSidecar(deps, part.key, part.file);
  if (!body || !(await createBeside(deps.store, part, statsKeyOf(part.key), body))) return false;
  await deps.store.delete(oldStatsKeysOf(part.key));
  return true;
}

/**
 * Creates the sidecar `key` of `part` if absent; true if it stands beside the version copied. One
 * created while the part was rewritten is deleted: the rewrite's own sidecar, if it wrote one
 * after, goes with it, and the part is answered by the query engine until compaction writes it.
 */
async function createBeside(store: Pick<ObjectStore, 'putIfAbsent' | 'head' | 'delete'>, part: CopiedPart, key: string, body: Buffer): Promise<boolean> {
  if (!(await store.putIfAbsent(key, body))) return false;
  if ((await store.head(part.key))?.etag === part.etag) return true;
  await store.delete([key]);
  return false;
}
