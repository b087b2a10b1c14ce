// A part and its derived objects (ready texts, stats sidecar) appear and vanish together. Every
// writer of parts (the worker, compaction, reprocessing, the purge) goes through this port, so
// the order that makes a crash harmless is kept in one place: the sidecars are stored before
// their part, so a listed part's sidecars never hold what it no longer holds (a purge rewrites
// both under the same keys), and deleted after it, as a sidecar is only read through its listed
// part.
import fs from 'node:fs/promises';
import type { Logger } from '../shared/log.js';
import type { ObjectInfo } from '../store/objectStore.js';
import { sealPart } from './partSeal.js';
import { sidecarKeysOf, storeSidecars, upgradeReadyTexts, upgradeStatsSidecar, type ReadyTextsStored, type SidecarDeps } from './sidecars/index.js';

export interface PartPublisher {
  /**
   * Stores the part written to `file` under `key`, its derived objects first (ready texts unless
   * `readyTexts` is false; `{ from }`: those of the part `from`, whose answers this one's are,
   * copied if they are still there, else built: see readyTextsStand). Returns the part's bytes,
   * and what became of its ready texts.
   */
  publish(key: string, file: string, options?: { readyTexts?: boolean | { from: string } }): Promise<{ body: Buffer; readyTexts: ReadyTextsStored }>;
  /** Deletes parts, then their derived objects (of any version). */
  retire(keys: readonly string[]): Promise<void>;
  /**
   * Writes the derived objects stored parts lack, or hold only in an older version (written by
   * an earlier release), each from its local `file`, a copy of the version `part.etag` (none is
   * left beside a part rewritten since: see sidecars/upgrade.ts); the parts' ready texts are
   * built together. `scratch`: a local path to build them at. For each part, true if any was
   * written.
   */
  upgrade(parts: readonly { part: Pick<ObjectInfo, 'key' | 'etag'>; file: string }[], scratch: string): Promise<boolean[]>;
}

/**
 * The publisher over an object store, its sidecars built by DuckDB. A sidecar that cannot be
 * built is left out and logged (storeSidecars.ts): the part is still stored.
 */
export function storePartPublisher(deps: SidecarDeps): PartPublisher {
  return {
    async publish(key, file, options = {}) {
      const readyTexts = await storeSidecars(deps, key, file, { readyTexts: options.readyTexts ?? true });
      // Stored sealed (partSeal.ts); the local file is left as written (an import resumes from it).
      const body = sealedOrAsIs(await fs.readFile(file), key, deps.log);
      await deps.store.put(key, body);
      return { body, readyTexts };
    },
    async retire(keys) {
      await deps.store.delete(keys);
      await deps.store.delete(sidecarKeysOf(keys));
    },
    async upgrade(parts, scratch) {
      const copied = parts.map(({ part, file }) => ({ key: part.key, etag: part.etag, file }));
      const ready = await upgradeReadyTexts(deps, copied, scratch);
      const stats: boolean[] = [];
      for (const part of copied) stats.push(await upgradeStatsSidecar(deps, part));
      return ready.map((r, i) => r || stats[i]!);
    },
  };
}

/**
 * Retirements of parts merged away, each made `graceMs` after it is asked for: an answer that
 * listed the old parts before their successor was stored still reads them meanwhile (readers
 * that see both de-duplicate). `settle()` waits for every one and throws the first failure; a
 * process stopped before leaves the old parts beside their successor, which the next compaction
 * merges again.
 */
export function retireAfter(publisher: Pick<PartPublisher, 'retire'>, graceMs: number): { retire(keys: readonly string[]): void; settle(): Promise<void> } {
  const pending: Promise<unknown>[] = [];
  const failures: unknown[] = [];
  return {
    retire(keys) {
      // Handled here, when created: a failure is settle()'s to throw.
      pending.push(
        new Promise((resolve) => setTimeout(resolve, graceMs))
          .then(() => publisher.retire(keys))
          .catch((err: unknown) => failures.push(err)),
      );
    },
    async settle() {
      await Promise.all(pending);
      if (failures.length > 0) throw failures[0];
    },
  };
}

/** The part sealed; as written if its footer cannot be re-encoded (logged: stored unsealed, as a part of an earlier release). */
function sealedOrAsIs(body: Buffer, key: string, log: Pick<Logger, 'warn'>): Buffer {
  try {
    return sealPart(body);
  } catch (err) {
    log.warn({ part: key, err: String(err) }, 'a part could not be sealed; stored as written');
    return body;
  }
}
