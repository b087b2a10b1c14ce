// Stores the sidecars of a part about to be stored: ready texts (when asked for) and the stats
// sidecar, each written from the part's local file. The caller stores the part after them.
import type { DuckDb } from '../duckdb.js';
import type { ObjectStore } from '../../store/objectStore.js';
import { readyKeyOf, statsKeyOf } from './keys.js';
import { readyTextsOf } from './readyWriter.js';
import { statsSidecarOf } from './statsWriter.js';

export interface SidecarDeps {
  store: ObjectStore;
  db: DuckDb;
}

/** Ready texts of the part in `partFile`, stored under the key of the part `partKey`; `scratch`: a local path to build them at. */
export async function storeReadyTexts(deps: SidecarDeps, partKey: string, partFile: string, scratch: string): Promise<void> {
  await deps.store.put(readyKeyOf(partKey), await readyTextsOf(deps.db, partFile, scratch));
}

/** The stats sidecar of a part; one whose codes do not fit loses any older sidecar (it is then counted by DuckDB). */
export async function storeStatsSidecar(deps: SidecarDeps, partKey: string, partFile: string): Promise<void> {
  const body = await statsSidecarOf(deps.db, partFile);
  if (body) await deps.store.put(statsKeyOf(partKey), body);
  else await deps.store.delete([statsKeyOf(partKey)]);
}

/** Both sidecars of a part about to be stored: ready texts first (when `readyTexts`), then its stats. */
export async function storeSidecars(deps: SidecarDeps, partKey: string, partFile: string, options: { readyTexts: boolean }): Promise<void> {
  if (options.readyTexts) await storeReadyTexts(deps, partKey, partFile, `${partFile}.ready`);
  await storeStatsSidecar(deps, partKey, partFile);
}
