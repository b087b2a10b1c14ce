// Reprocessing after a boundary change: re-tag the reports of a window with the current boundary
// version and rewrite each hour whose tags (or version) change, as parts with their stats
// sidecars; then their ready texts (addReadyTexts.ts), so every answer carries the new tags as
// early as possible. An hour whose answers stay the same takes the old part's ready texts.
import fs from 'node:fs/promises';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { retractedIn, withLaterRetractions } from '../archive/lateRetractions.js';
import { retireAfter, storePartPublisher } from '../archive/partPublisher.js';
import { listWindowParts, type HourParts } from '../archive/partListing.js';
import { retagParts } from '../archive/retag.js';
import { readyTextsStand } from '../archive/sidecars/index.js';
import type { ChangeLog } from '../archive/changes.js';
import type { BoundaryRepository } from '../boundaries/repository.js';
import type { RetractionLedger } from '../ledger/ledger.js';
import { COMPACTION_LOCK_KEY, DAY_MS, newDayPartKey, newPartKey } from '../store/layout.js';
import type { PartRewriteDeps } from './compact.js';
import { mapWeighted, type WeightedLimits } from './concurrency.js';
import type { Progress } from './progress.js';
import { addReadyTexts, type UntextedPart } from './addReadyTexts.js';
import { withStoreLock } from './storeLock.js';

/** What reprocessing uses: a rewrite's, the current boundaries, the change log and retractions (written as tombstones). */
export interface ReprocessDeps extends PartRewriteDeps {
  boundaries: Pick<BoundaryRepository, 'latest'>;
  changes: Pick<ChangeLog, 'prepareText' | 'put'>;
  ledger: Pick<RetractionLedger, 'retractions'>;
}

export interface ReprocessResult {
  boundaryVersion: string;
  reports: number;
  cityChanges: number;
  localAreaChanges: number;
  /** "PH-QC -> null": how many reports move that way. */
  moves: Record<string, number>;
  hoursRewritten: number;
  /** Hours rewritten whose answers did not change: their ready texts taken from the parts they replace. */
  readyTextsKept: number;
  dryRun: boolean;
  /** Where the time went: re-tagging and storing the parts (after which answers carry the new tags); their ready texts. */
  seconds: { retagging: number; readyTexts: number };
}

/** Bytes of stored parts re-tagged at once, at most: two of a storm's days (106,089 reports, 2.2 MB each). */
const RETAG_BYTES = 4.5 * 1024 ** 2;

/**
 * Three hours at a time: one's tagging (JavaScript) runs while the others' parts are read and
 * written, each query on one DuckDB thread in a bulk job (with two, the cores idled). Larger
 * hours fewer at a time, as DuckDB holds each one's rows in its memory: three storm days at once
 * ran it out of its 256 MB (docs/performance.md, "Three hours re-tagged at a time").
 */
const RETAG_LANES: WeightedLimits<HourParts> = {
  limit: 3,
  budget: RETAG_BYTES,
  weight: (hour) => Math.max(RETAG_BYTES / 3, hour.parts.reduce((n, p) => n + p.size, 0)),
};

/** A compaction or another reprocess holds the archive's lock for rewriting parts (by hand or scheduled, on any host); or took it over from this one. */
export class ReprocessRunningError extends Error {
  override name = 'ReprocessRunningError';
}

/** This reprocess's lock was taken over while it ran: it stopped at its next step. */
export class ReprocessLockLostError extends ReprocessRunningError {
  override name = 'ReprocessLockLostError';
}

type ReprocessOptions = { fromMs: number; toMs: number; dryRun: boolean };

/**
 * Re-tags the window's reports. It holds the compaction's lock (a dry run writes nothing and
 * takes none): a compaction that listed the old parts and stored its merge after the re-tagged
 * part would win de-duplication with the old tags, for good.
 */
export function reprocess(rt: ReprocessDeps, options: ReprocessOptions, progress?: Progress): Promise<ReprocessResult> {
  if (options.dryRun) return reprocessAlone(rt, options, progress, () => undefined);
  const errors = { running: (m: string) => new ReprocessRunningError(m), lost: (m: string) => new ReprocessLockLostError(m) };
  return withStoreLock({ store: rt.store, key: COMPACTION_LOCK_KEY, what: 'reprocess', log: rt.log, errors }, (stillHeld) => reprocessAlone(rt, options, progress, stillHeld));
}

/** `stillHeld`: throws once the lock is another's (called before each hour's writes). */
async function reprocessAlone(rt: ReprocessDeps, options: ReprocessOptions, progress: Progress | undefined, stillHeld: () => void): Promise<ReprocessResult> {
  const boundaries = await rt.boundaries.latest();
  const hours = await listWindowParts(rt.store, options.fromMs, options.toMs);
  const result: ReprocessResult = {
    boundaryVersion: boundaries.version,
    reports: 0,
    cityChanges: 0,
    localAreaChanges: 0,
    moves: {},
    hoursRewritten: 0,
    readyTextsKept: 0,
    dryRun: options.dryRun,
    seconds: { retagging: 0, readyTexts: 0 },
  };
  const publisher = storePartPublisher(rt);
  // The old parts go a grace after their successor is stored (answers planned before read them),
  // while the ready texts are written.
  const retiring = retireAfter(publisher, rt.config.retireGraceMs);
  const tmpDir = path.join(rt.config.dataDir, 'tmp', 'reprocess');
  await fs.mkdir(tmpDir, { recursive: true });
  const untexted: UntextedPart[] = [];
  /** Where this run writes its new parts: kept for their ready texts, removed at the end. */
  const written: string[] = [];
  const started = performance.now();
  try {
    progress?.start(hours.length, 're-tagging partitions');
    await mapWeighted(hours, RETAG_LANES, async (hour) => {
      const out = path.join(tmpDir, `${randomUUID()}.parquet`);
      written.push(out);
      // Retracted reports go in as tombstones, as compaction writes them: a part read before a
      // purge rewrote it never brings personal fields back.
      const span = { fromMs: hour.hourMs, toMs: hour.hourMs + (hour.wholeDay ? DAY_MS : 3_600_000) - 1 };
      let readRetracted: readonly string[] = [];
      const retracted = async () => (readRetracted = await retractedIn(rt.ledger, span));
      try {
        // The parts stay in the cache while they are read (and, unchanged, their ready texts written from them).
        const done = await rt.cache.withFiles(hour.parts, async (files) => {
          // Several parts whose newest rows carry the new tags: an earlier run stopped after its
          // new part and before the old ones went (or a worker flushed into the hour since). They
          // are written as one all the same, the old ones retired, and the new part's ready texts
          // written.
          const merge = hour.parts.length > 1;
          const retagged = await retagParts(rt.db, files, (lng, lat) => boundaries.tagger.tag(lng, lat), boundaries.version, options, out, retracted, merge);
          // Re-tagged by an earlier run that stopped before its ready texts: this one writes them
          // (the answers already carry its tags).
          if (!options.dryRun && !retagged.changed && !merge) await publisher.upgrade([{ part: hour.parts[0]!, file: files[0]! }], path.join(tmpDir, `${randomUUID()}.ready`));
          return { ...retagged, merged: merge };
        });
        result.reports += done.reports;
        result.cityChanges += done.cityChanges;
        result.localAreaChanges += done.localAreaChanges;
        for (const [move, n] of Object.entries(done.moves)) result.moves[move] = (result.moves[move] ?? 0) + n;
        if (options.dryRun || (!done.changed && !done.merged)) return;
        stillHeld();
        // New part first, then the old ones go: readers meanwhile see both and de-duplicate.
        // Logged before the new part, and again once it is durable. The first log survives a run
        // cut short after the part (a rerun finds the tags already new and writes nothing); a sync
        // lists it only a settling time after it was named, by when the part is readable unless its
        // PUT took that long, which the second log covers.
        const key = hour.wholeDay ? newDayPartKey(hour.hourMs) : newPartKey(hour.hourMs);
        const moved = done.moved.count > 0 ? await rt.changes.prepareText(done.moved.log) : undefined;
        if (moved) await rt.changes.put(moved);
        // Answers the same as the one part's it replaces (new boundaries that move none of its
        // reports, and no report a tombstone since its texts were built): that part's ready texts
        // are the new one's, taken rather than built again.
        const from = hour.parts[0]!.key;
        const keep = !done.merged && done.moved.count === 0 && done.answered !== undefined && (await readyTextsStand(rt.store, from, done.answered));
        // Gone between the check and the copy (a purge rewrote the old part meanwhile), they are built.
        const stored = (await publisher.publish(key, out, { readyTexts: keep && { from } })).readyTexts;
        let texts: 'kept' | 'built' | 'later' = stored === 'copied' ? 'kept' : keep ? 'built' : 'later';
        // A retraction made since they were read, which a purge of the old parts may have marked
        // purged meanwhile (lateRetractions.ts): the part written again with it as a tombstone,
        // and texts taken from the old part built again without it.
        if ((await withLaterRetractions(rt, out, span, readRetracted)) !== readRetracted) {
          await publisher.publish(key, out, { readyTexts: texts === 'kept' });
          if (texts === 'kept') texts = 'built';
        }
        if (moved) await rt.changes.put(moved);
        retiring.retire(hour.parts.map((p) => p.key));
        if (texts === 'kept') result.readyTextsKept += 1;
        if (texts === 'later') untexted.push({ key, file: out, reports: done.rows, etag: (await rt.store.head(key))?.etag });
        result.hoursRewritten += 1;
      } finally {
        progress?.tick();
      }
    });
    progress?.stop();
    result.seconds.retagging = seconds(started);
    const textsStarted = performance.now();
    stillHeld();
    progress?.start(untexted.length, 'ready texts of parts');
    await addReadyTexts({ store: rt.store, publisher }, untexted, tmpDir, () => progress?.tick());
    progress?.stop();
    result.seconds.readyTexts = seconds(textsStarted);
    // The old parts go once readers of them have had RETIRE_GRACE_SECONDS: no ready text's time.
    await retiring.settle();
  } finally {
    await Promise.all(written.map((file) => fs.rm(file, { force: true })));
  }
  // A publish or rollback that landed during the run: the hours it passed carry the version it
  // began with, which is no longer the one answers name. Said, not left to be found out.
  const now = options.dryRun ? boundaries : await rt.boundaries.latest();
  if (now.version !== boundaries.version) {
    throw new BoundariesChangedError(`boundary version ${now.version} was published during this run, which re-tagged the window with ${boundaries.version}: run reprocess again over the same window`);
  }
  return result;
}

/** Another boundary version became current while a reprocess ran: the window carries the one before. */
export class BoundariesChangedError extends Error {
  override name = 'BoundariesChangedError';
}

const seconds = (since: number) => Math.round((performance.now() - since) / 100) / 10;
