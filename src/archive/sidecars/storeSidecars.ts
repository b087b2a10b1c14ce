// Stores the sidecars of a part about to be stored: ready texts (when asked for) and the stats
// sidecar, each written from the part's local file. The caller stores the part after them.
//
// Sidecars are a fast path: a part without them is answered and counted by the query engine, the
// same bytes. So a sidecar that cannot be built (a writer's check failing, DuckDB refusing the
// query) is left out and logged, and any older one under its key deleted, rather than failing the
// part's publish and leaving its reports unarchived; compaction writes it once the day is closed.
// Errors of the store itself still fail the publish.
import type { DuckDb } from '../duckdb.js';
import type { ObjectStore } from '../../store/objectStore.js';
import type { Logger } from '../../shared/log.js';
import { readyKeyOf, statsKeyOf } from './keys.js';
import { readyTextsOf } from './readyWriter.js';
import { statsSidecarOf } from './statsWriter.js';

export interface SidecarDeps {
  store: ObjectStore;
  db: DuckDb;
  /** Told of a sidecar that could not be built (and was left out). */
  log: Pick<Logger, 'warn'>;
}

/**
 * Ready texts of the part in `partFile`, stored under the key of the part `partKey`; `scratch`: a
 * local path to build them at. False if they could not be built (none is then stored under the key).
 */
export async function storeReadyTexts(deps: SidecarDeps, partKey: string, partFile: string, scratch: string): Promise<boolean> {
  const body = await built(deps, partKey, 'ready texts', () => readyTextsOf(deps.db, partFile, scratch));
  if (body) await deps.store.put(readyKeyOf(partKey), body);
  else await deps.store.delete([readyKeyOf(partKey)]);
  return body !== undefined;
}

/**
 * The stats sidecar of a part; one whose codes do not fit, or that cannot be built, loses any
 * older sidecar (the part is then counted by DuckDB).
 */
export async function storeStatsSidecar(deps: SidecarDeps, partKey: string, partFile: string): Promise<void> {
  const body = await built(deps, partKey, 'stats sidecar', () => statsSidecarOf(deps.db, partFile));
  if (body) await deps.store.put(statsKeyOf(partKey), body);
  else await deps.store.delete([statsKeyOf(partKey)]);
}

/** Both sidecars of a part about to be stored: ready texts first (when `readyTexts`), then its stats. */
export async function storeSidecars(deps: SidecarDeps, partKey: string, partFile: string, options: { readyTexts: boolean }): Promise<void> {
  if (options.readyTexts) await storeReadyTexts(deps, partKey, partFile, `${partFile}.ready`);
  await storeStatsSidecar(deps, partKey, partFile);
}

/** What `build` gives, or undefined (logged) if it throws. */
async function built<T>(deps: SidecarDeps, partKey: string, sidecar: string, build: () => Promise<T>): Promise<T | undefined> {
  try {
    return await build();
  } catch (err) {
    deps.log.warn({ err, part: partKey, sidecar }, 'sidecar not built; the part is stored without it and answered by the query engine');
    return undefined;
  }
}
