// Compaction: merges parts into one file with duplicates removed, then, a grace later
// (RETIRE_GRACE_SECONDS), deletes them. A closed day becomes one compacted part (hour=all): a year is then 365
// files instead of 8,760, which is what makes long pulls fast. Hours of a day
// still open are merged hour by hour. Readers that see both the new file and
// the old parts meanwhile still answer the same (they de-duplicate by pkey).
import fs from 'node:fs/promises';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { retractedIn, withLaterRetractions } from '../archive/lateRetractions.js';
import { listWindowParts, type HourParts } from '../archive/partListing.js';
import { DamagedPartsError } from '../archive/partSeal.js';
import { retireAfter, storePartPublisher } from '../archive/partPublisher.js';
import { mergeParts } from '../archive/readRows.js';
import { deleteStraySidecars } from '../archive/sidecars/index.js';
import type { PartCache } from '../archive/partCache.js';
import type { Config } from '../shared/config.js';
import type { DuckDb } from '../archive/duckdb.js';
import type { RetractionLedger } from '../ledger/ledger.js';
import { closedBefore as closedBeforeMs, COMPACTION_LOCK_KEY, DAY_MS, dayStart, newDayPartKey, newPartKey } from '../store/layout.js';
import type { ObjectInfo, ObjectStore } from '../store/objectStore.js';
import type { Progress } from './progress.js';
import { mapLimit } from './concurrency.js';
import { withStoreLock } from './storeLock.js';
import type { Logger } from '../shared/log.js';

/** What every rewrite of parts uses: the parts and their local files, the query engine, a temporary directory. */
export interface PartRewriteDeps {
  store: ObjectStore;
  db: DuckDb;
  cache: Pick<PartCache, 'withFiles'>;
  config: Pick<Config, 'dataDir' | 'retireGraceMs'>;
  /** Told of a sidecar that could not be built. */
  log: Pick<Logger, 'warn' | 'error'>;
}

/** What compaction uses: a rewrite's, and retractions (merged in as tombstones). */
export interface CompactDeps extends PartRewriteDeps {
  ledger: Pick<RetractionLedger, 'retractions'>;
}

export interface CompactOptions {
  fromMs: number;
  toMs: number;
  /** Hours (and days) ending after this are still being written to and are left alone. */
  closedBeforeMs: number;
  /** The present, as the age of a sidecar left without its part is told (the clock's by default). */
  nowMs?: number;
}

export interface CompactResult {
  hoursSeen: number;
  hoursCompacted: number;
  daysCompacted: number;
  partsRemoved: number;
  rows: number;
  /** Sidecars deleted whose part never came (sidecars/strays.ts). */
  straySidecarsRemoved: number;
}

/** Another compaction holds the archive's compaction lock (by hand or scheduled, on any host); or took it over from this one. */
export class CompactionRunningError extends Error {
  override name = 'CompactionRunningError';
}

/** This compaction's lock was taken over (or given back as its process stops) while it ran: it stopped at its next step. */
export class CompactionLockLostError extends CompactionRunningError {
  override name = 'CompactionLockLostError';
}

/**
 * Merges the window's days (closed ones into a part a day, the open day's closed hours into a
 * part an hour), one compaction at a time on the archive: two at once would each merge the same
 * parts and store their reports twice (storeLock.ts).
 */
export function compact(rt: CompactDeps, options: CompactOptions, progress?: Progress): Promise<CompactResult> {
  const errors = { running: (m: string) => new CompactionRunningError(m), lost: (m: string) => new CompactionLockLostError(m) };
  return withStoreLock({ store: rt.store, key: COMPACTION_LOCK_KEY, what: 'compaction', log: rt.log, errors }, (stillHeld) => compactAlone(rt, options, progress, stillHeld));
}

async function compactAlone(rt: CompactDeps, options: CompactOptions, progress: Progress | undefined, stillHeld: () => void): Promise<CompactResult> {
  // Whole days are listed: a day is compacted with all of its parts, whatever the window cuts.
  const partitions = await listWindowParts(rt.store, dayStart(options.fromMs), dayStart(options.toMs) + DAY_MS - 1);
  const days = new Map<number, HourParts[]>();
  for (const p of partitions) {
    const day = dayStart(p.hourMs);
    const list = days.get(day);
    if (list) list.push(p);
    else days.set(day, [p]);
  }
  const result: CompactResult = { hoursSeen: 0, hoursCompacted: 0, daysCompacted: 0, partsRemoved: 0, rows: 0, straySidecarsRemoved: 0 };
  const publisher = storePartPublisher(rt);
  // The merged parts go a grace after their successor is stored (answers planned before read them).
  const retiring = retireAfter(publisher, rt.config.retireGraceMs);
  const tmpDir = path.join(rt.config.dataDir, 'tmp', 'compact');
  await fs.mkdir(tmpDir, { recursive: true });
  const merge = async (inputs: ObjectInfo[], key: string, dayMs: number) => {
    stillHeld();
    const out = path.join(tmpDir, `${randomUUID()}.parquet`);
    const span = { fromMs: dayMs, toMs: dayMs + DAY_MS - 1 };
    // Retracted reports go in as tombstones (purged ones too): a merged file never brings personal fields back.
    const retracted = await retractedIn(rt.ledger, span);
    try {
      result.rows += await rt.cache.withFiles(inputs, (files) => mergeParts(rt.db, files, out, retracted));
      // A retraction made while merging, which a purge of the old parts may mark purged before
      // the new part stands (lateRetractions.ts): read again just before the new part is stored,
      // and once more after, the part written again if one came.
      const known = await withLaterRetractions(rt, out, span, retracted);
      // New file first, then the old ones go.
      await publisher.publish(key, out);
      if ((await withLaterRetractions(rt, out, span, known)) !== known) await publisher.publish(key, out);
      retiring.retire(inputs.map((p) => p.key));
      result.partsRemoved += inputs.length;
    } finally {
      await fs.rm(out, { force: true });
    }
  };
  /** Merges a closed day into a part, or the open day's closed hours each into a part. */
  const compactDay = async (dayMs: number, dayPartitions: HourParts[]) => {
    const hours = dayPartitions.filter((p) => !p.wholeDay && p.hourMs + 3_600_000 - 1 >= options.fromMs && p.hourMs <= options.toMs);
    result.hoursSeen += hours.length;
    const parts = dayPartitions.flatMap((p) => p.parts);
    if (dayMs + DAY_MS <= options.closedBeforeMs) {
      if (parts.length < 2) {
        // Already one part: it only needs its sidecars if it was written before them (or before their versions).
        const part = parts[0];
        if (part) await rt.cache.withFiles([part], ([file]) => publisher.upgrade([{ part, file: file! }], path.join(tmpDir, `${randomUUID()}.ready`)));
        return;
      }
      await merge(parts, newDayPartKey(dayMs), dayMs);
      result.daysCompacted += 1;
      return;
    }
    for (const hour of hours) {
      if (hour.hourMs + 3_600_000 > options.closedBeforeMs || hour.parts.length < 2) continue;
      await merge(hour.parts, newPartKey(hour.hourMs), dayMs);
      result.hoursCompacted += 1;
    }
  };
  progress?.start(days.size);
  // A day holding a damaged part is left as it is (merged, its damage would be carried into the
  // new part: partSeal.ts), the other days compacted; the run then fails naming the parts.
  const damaged: DamagedPartsError['parts'][number][] = [];
  for (const [dayMs, dayPartitions] of days) {
    progress?.tick();
    try {
      await compactDay(dayMs, dayPartitions);
    } catch (err) {
      if (!(err instanceof DamagedPartsError)) throw err;
      rt.log.error({ day: new Date(dayMs).toISOString().slice(0, 10), damagedParts: err.parts }, 'compaction left a day with a damaged part as it is: restore the part from a backup of the store');
      damaged.push(...err.parts);
    }
  }
  progress?.stop();
  await retiring.settle();
  // Once the merged parts and their sidecars are gone: what is left of a closed day without its part.
  // A few days at a time: on S3 each day is two or three listings.
  const now = options.nowMs ?? Date.now();
  const closedDays = [...days.keys()].filter((dayMs) => dayMs + DAY_MS <= options.closedBeforeMs);
  stillHeld();
  for (const removed of await mapLimit(closedDays, 8, (dayMs) => deleteStraySidecars(rt.store, dayMs, now))) result.straySidecarsRemoved += removed;
  if (damaged.length > 0) throw new DamagedPartsError(damaged);
  return result;
}

/** An hour is closed once the worker can no longer be flushing into it. */
export function closedBefore(rt: { config: Pick<Config, 'flushIntervalSeconds'> }, now = Date.now()): number {
  return closedBeforeMs(rt.config.flushIntervalSeconds, now);
}
