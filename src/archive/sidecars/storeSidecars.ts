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
import { storedIndex } from './readyIndex.js';
import { readyTextsOf, readyTextsOfParts } from './readyWriter.js';
import { statsSidecarOf } from './statsWriter.js';

export interface SidecarDeps {
  store: ObjectStore;
  db: DuckDb;
  /** Told of a sidecar that could not be built (and was left out). */
  log: Pick<Logger, 'warn'>;
}

/** A part stored, or about to be: its key, and its local file. */
export interface LocalPart {
  key: string;
  file: string;
}

/**
 * Ready texts of parts, each stored under its part's key; `scratch`: a local path to build them
 * at. Built together (readyTextsOfParts); when that fails, each alone, so a part that cannot be
 * built costs only its own. For each part, false if its texts could not be built (none is then
 * stored under its key).
 */
async function storeReadyTexts(deps: SidecarDeps, parts: readonly LocalPart[], scratch: string): Promise<boolean[]> {
  const bodies = await buildReadyTexts(deps, parts, scratch);
  await Promise.all(
    parts.map(async (part, i) => {
      const body = bodies[i];
      if (body) await deps.store.put(readyKeyOf(part.key), body);
      else await deps.store.delete([readyKeyOf(part.key)]);
    }),
  );
  return bodies.map((body) => body !== undefined);
}

/**
 * The ready texts of parts, built together (readyTextsOfParts); when that fails, each alone, so a
 * part that cannot be built costs only its own (undefined, logged).
 */
export async function buildReadyTexts(deps: SidecarDeps, parts: readonly LocalPart[], scratch: string): Promise<(Buffer | undefined)[]> {
  const bodies: (Buffer | undefined)[] = (parts.length > 1 ? await builtTogether(deps, parts, scratch) : undefined) ?? [];
  if (bodies.length === 0) {
    for (const part of parts) bodies.push(await built(deps, part.key, 'ready texts', () => readyTextsOf(deps.db, part.file, scratch)));
  }
  return bodies;
}

/** The stats sidecar of a part, or undefined (logged) when its codes do not fit or it cannot be built. */
export function buildStatsSidecar(deps: SidecarDeps, partKey: string, partFile: string): Promise<Buffer | undefined> {
  return built(deps, partKey, 'stats sidecar', () => statsSidecarOf(deps.db, partFile));
}

/**
 * The stats sidecar of a part; one whose codes do not fit, or that cannot be built, loses any
 * older sidecar (the part is then counted by DuckDB).
 */
async function storeStatsSidecar(deps: SidecarDeps, partKey: string, partFile: string): Promise<void> {
  const body = await buildStatsSidecar(deps, partKey, partFile);
  if (body) await deps.store.put(statsKeyOf(partKey), body);
  else await deps.store.delete([statsKeyOf(partKey)]);
}

/** What became of a part's ready texts as it was stored: copied from another part's, built, or none stored. */
export type ReadyTextsStored = 'copied' | 'built' | 'none';

/**
 * Both sidecars of a part about to be stored: ready texts first (built when `readyTexts` is
 * true; `{ from }`: copied from the part `from`'s, see readyTextsStand, or built if it has none
 * by now), then its stats.
 */
export async function storeSidecars(deps: SidecarDeps, partKey: string, partFile: string, options: { readyTexts: boolean | { from: string } }): Promise<ReadyTextsStored> {
  const { readyTexts } = options;
  let stored: ReadyTextsStored = 'none';
  if (typeof readyTexts === 'object' && (await deps.store.copy(readyKeyOf(readyTexts.from), readyKeyOf(partKey)))) stored = 'copied';
  else if (readyTexts !== false) stored = (await storeReadyTexts(deps, [{ key: partKey, file: partFile }], `${partFile}.ready`))[0] ? 'built' : 'none';
  await storeStatsSidecar(deps, partKey, partFile);
  return stored;
}

/**
 * Whether the ready texts stored for the part `partKey` are of today's version and answer
 * `reports` reports. A part written in place of that one alone from its rows, no tag changed (a
 * reprocess that moved none), may then take them as they are: they are what building them again
 * would give. Unless a report has become a tombstone since they were built: it is still in them,
 * so they answer one report more than the part.
 */
export async function readyTextsStand(store: ObjectStore, partKey: string, reports: number): Promise<boolean> {
  return (await storedIndex(store, readyKeyOf(partKey)))?.items.count === reports;
}

/** The parts' ready texts built together, or undefined (logged) if that fails. */
async function builtTogether(deps: SidecarDeps, parts: readonly LocalPart[], scratch: string): Promise<Buffer[] | undefined> {
  try {
    return await readyTextsOfParts(deps.db, parts.map((p) => p.file), scratch);
  } catch (err) {
    deps.log.warn({ err, parts: parts.map((p) => p.key) }, 'ready texts of parts together not built; building each alone');
    return undefined;
  }
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
