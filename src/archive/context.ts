// What the pieces of a window share: the engine, the local files of parts and of their ready texts.
import type { DuckDb } from './duckdb.js';
import type { ObjectInfo } from '../store/objectStore.js';
import type { Holds } from './holds.js';
import type { ReadyWant } from './sidecars/index.js';
import type { Replan } from './replan.js';

export interface WindowContext {
  db: DuckDb;
  /**
   * Local paths of parts (the store's own files, or the part cache's copies), which stay until
   * `holds` are released (the queries that read them are done).
   */
  files(parts: readonly ObjectInfo[], holds: Holds): Promise<string[]>;
  /**
   * Local paths of the parts' ready texts, undefined for a part that has none; of a remote
   * store, the bytes `want` reads are fetched, and only those. `holds`: the paths stay until
   * they are released (the answer has read them); without, a later copy may evict them.
   */
  readyFiles(parts: readonly ObjectInfo[], want: ReadyWant, holds?: Holds): Promise<(string | undefined)[]>;
  /** Local paths of the parts' stats sidecars (sidecars/), undefined for a part that has none; they stay until `holds` are released. */
  statsFiles(parts: readonly ObjectInfo[], holds: Holds): Promise<(string | undefined)[]>;
  /** The window's days listed again when a part of theirs is gone from the store (replan.ts). */
  replan: Replan;
  /** Aborts when the answer is no longer wanted (the client hung up): queries are interrupted, nothing more is read. */
  signal: AbortSignal | undefined;
  /** Told of a sidecar that cannot be read (answered from its part instead): for the operators' log. */
  unreadable(part: ObjectInfo, sidecar: 'stats sidecar', err: unknown): void;
}
