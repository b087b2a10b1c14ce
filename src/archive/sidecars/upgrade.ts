// Brings a stored part's sidecars to today's versions (FORMAT.md, "Reading an old version"):
// ready texts missing or of an older version are written anew (knowing which reads only the
// first bytes), older versions' objects are deleted; a missing stats sidecar is written.
import { oldReadyKeysOf, oldStatsKeysOf, readyKeyOf, statsKeyOf } from './keys.js';
import { storedIndex } from './readyIndex.js';
import { storeReadyTexts, storeStatsSidecar, type SidecarDeps } from './storeSidecars.js';

/** Writes the ready texts of a part stored without today's. True if written. */
export async function upgradeReadyTexts(deps: SidecarDeps, partKey: string, partFile: string, scratch: string): Promise<boolean> {
  if (await storedIndex(deps.store, readyKeyOf(partKey))) return false;
  if (!(await storeReadyTexts(deps, partKey, partFile, scratch))) return false;
  await deps.store.delete(oldReadyKeysOf(partKey));
  return true;
}

/** Writes the stats sidecar of a part stored without one. True if written. */
export async function upgradeStatsSidecar(deps: SidecarDeps, partKey: string, partFile: string): Promise<boolean> {
  if (await deps.store.head(statsKeyOf(partKey))) return false;
  await storeStatsSidecar(deps, partKey, partFile);
  await deps.store.delete(oldStatsKeysOf(partKey));
  return true;
}
