// What an import uses, and what one run of it shares between its passes and its rounds.
import type { ChangeLog } from '../archive/changes.js';
import type { DuckDb } from '../archive/duckdb.js';
import type { PartCache } from '../archive/partCache.js';
import type { PartPublisher } from '../archive/partPublisher.js';
import type { BoundaryRepository, LoadedBoundaries } from '../boundaries/repository.js';
import type { AcceptanceLedger, PendingLedger, RetractionLedger } from '../ledger/ledger.js';
import type { Config } from '../shared/config.js';
import type { Logger } from '../shared/log.js';
import type { ObjectStore } from '../store/objectStore.js';
import type { Checkpoint } from './importCheckpoint.js';

/** What an import uses: the ledger's acceptance and archiving, the store, DuckDB, the change log, the current boundaries. */
export interface ImportDeps {
  ledger: Pick<AcceptanceLedger, 'acceptHeld' | 'renewHolds' | 'reclaimHeldSpace'> & Pick<PendingLedger, 'markArchived'> & Pick<RetractionLedger, 'retractions'>;
  store: ObjectStore;
  /** Reads the archive's parts: a resumed round's parts merged away since are found in them. */
  cache: Pick<PartCache, 'withFiles'>;
  db: DuckDb;
  changes: Pick<ChangeLog, 'record'>;
  boundaries: Pick<BoundaryRepository, 'latest'>;
  config: Pick<Config, 'dataDir' | 'flushIntervalSeconds' | 'storageUrl'>;
  /** Told of a sidecar that could not be built, and of staged files gone. */
  log: Pick<Logger, 'warn'>;
}

/** One run of an import: its checkpoint and working folder, and how it writes and stores. */
export interface ImportRun {
  readonly rt: ImportDeps;
  /** Changed as the run goes; `save` writes it. */
  readonly checkpoint: Checkpoint;
  /** The run's folder, where the checkpoint's files are. */
  readonly runDir: string;
  /** How long the ledger leaves the reports this run accepts to it. */
  readonly holdMs: number;
  readonly publisher: PartPublisher;
  /** Throws once the archive's import lock is another's: called before each step that writes. */
  readonly stillHeld: () => void;
  /** Writes the checkpoint: one write at a time, a later one never landing first. */
  readonly save: () => Promise<void>;
  /**
   * The set new reports are tagged with: read again as each part of a round is stored, so reports
   * accepted after a publish are tagged with it, not tagged with the old set and then again as
   * their part is stored.
   */
  boundaries: LoadedBoundaries;
}
