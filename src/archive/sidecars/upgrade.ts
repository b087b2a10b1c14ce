// Brings a stored part's sidecars to today's versions (FORMAT.md, "Reading an old version"):
// ready texts missing or of an older version are written anew (knowing which reads only the
// first bytes), older versions' objects are deleted; a missing stats sidecar is written.
import { oldReadyKeysOf, oldStatsKeysOf, readyKeyOf, statsKeyOf } from './keys.js';
import { storedIndex } from './readyIndex.js';
import { storeReadyTexts, storeStatsSidecar, type LocalPart, type SidecarDeps } from './storeSidecars.js';

/**
 * Writes the ready texts of the parts stored without today's, built together; for each part,
 * true if written.
 */
export async function upgradeReadyTexts(deps: SidecarDeps, parts: readonly LocalPart[], scratch: string): Promise<boolean[]> {
  const stored = await Promise.all(parts.map(async (p) => (await storedIndex(deps.store, readyKeyOf(p.key))) !== undefined));
  const lacking = parts.filter((_, i) => !stored[i]);
  const built = lacking.length > 0 ? await storeReadyTexts(deps, lacking, scratch) : [];
  const written = new Set(lacking.filter((_, i) => built[i]).map((p) => p.key));
  await Promise.all([...written].map((key) => deps.store.delete(oldReadyKeysOf(key))));
  return parts.map((p) => written.has(p.key));
}

/** Writes the stats sidecar of a part stored without one. True if written. */
export async function upgradeStatsSidecar(deps: SidecarDeps, partKey: string, partFile: string): Promise<boolean> {
  if (await deps.store.head(statsKeyOf(partKey))) return false;
  await storeStatsSidecar(deps, partKey, partFile);
  await deps.store.delete(oldStatsKeysOf(partKey));
  return true;
}
