// Backfill from a file (importRecords.ts reads it), in bulk. Every record is validated like the
// feed and accepted through the same idempotency keys (first version wins per partner and
// post_id, a re-run adds nothing, a report already posted live is not doubled), but the import
// archives what it accepts itself instead of sending it through the queue:
//
//   1. the file is read and validated a batch at a time (rejects, with reasons, to the rejects
//      file), the valid records written to disk and, at the end, sorted into the ledger's key
//      order (validatedRecords.ts);
//   2. in that order, a batch at a time, they are accepted in the ledger in large transactions,
//      held (acceptHeld: no queue message, and reconciliation leaves them be), and the new ones
//      tagged and staged as one Parquet file, DuckDB reading their JSON from the sorted file
//      (this thread parses none of them);
//   3. every ROUND_ROWS staged reports (or sooner, well inside their hold) and at the end, the
//      staged files become parts in set
//      operations (bulkParts.ts), each part stored with its stats sidecar and its reports written
//      to the change log; then all of them are marked archived: from here they are queryable;
//   4. each part gets its ready texts.
//
// The checkpoint (beside the file) names the records done and the staged files not yet archived,
// and is written after each step. A run that dies anywhere is resumed by running it again: the
// staged files are archived first, then the pass goes on from the checkpoint; the batch the
// crash cut short comes back as "held" repeats and is staged again. An import that is never
// resumed loses nothing either: once its hold ends, reconciliation queues what it left pending,
// and a run resumed after that archives only what the ledger still holds for it (importHolds.ts).
//
// Imported reports reach mirrors through updated_after; they are not announced as events
// (webhooks, the stream, CAP, SNS), which tell of reports as they arrive, not of history.
// An import runs as one partner (its post_ids, its pkeys, its right to retract) or, by default,
// as none: the operators' own reports, keyed partner-<post_id>.
import fs from 'node:fs/promises';
import path from 'node:path';
import { ulid } from 'ulid';
import { writeBulkParts } from '../archive/bulkParts.js';
import type { ChangeLog } from '../archive/changes.js';
import type { DuckDb } from '../archive/duckdb.js';
import { releaseAll } from '../archive/duckdbMemory.js';
import { HOUR_MS } from '../archive/plan.js';
import { retagParts } from '../archive/retag.js';
import { storePartPublisher } from '../archive/partPublisher.js';
import type { ArchiveRow } from '../archive/partColumns.js';
import { writeParquet } from '../archive/partWriter.js';
import { sqlString } from '../archive/duckdb.js';
import { archiveRowOf } from '../ingest/archiveRow.js';
import type { BoundaryRepository } from '../boundaries/repository.js';
import type { Tags } from '../boundaries/tagger.js';
import type { AcceptanceLedger, HeldAcceptResult, HeldRecord, IngestRecord, PendingLedger, RetractionLedger } from '../ledger/ledger.js';
import type { Config } from '../shared/config.js';
import { closedBefore, DAY_MS, parsePkey, partitionOfPartKey } from '../store/layout.js';
import type { ObjectStore } from '../store/objectStore.js';
import type { PartCache } from '../archive/partCache.js';
import { addReadyTexts } from './addReadyTexts.js';
import { keepHeld } from './importHolds.js';
import { withImportLock } from './importLock.js';
import { bothSettled, coalescing, OneBehind } from './concurrency.js';
import { addSortedPostIds, eachSortedBatch, sortValidated, stageAccepted, writeValidated, type SortedBatch } from './validatedRecords.js';
import { detectFormat, ImportInputError, type ImportFormat } from './importRecords.js';
import { validateFile } from './validateFile.js';
import { rejectLine } from './validateRecords.js';
import { checkRejectsFile, rejectsFileOf } from './rejectsFile.js';
import type { Progress } from './progress.js';
import { archivedIn } from './verify.js';
import type { Logger } from '../shared/log.js';

export { detectFormat, ImportInputError, type ImportFormat } from './importRecords.js';

export interface ImportOptions {
  file: string;
  format?: ImportFormat;
  rejectsFile?: string;
  stateFile?: string;
  /** Ignore a checkpoint and start from the first record. */
  restart?: boolean;
  /** The key name whose reports these are (as if that partner had posted them); none: the operators'. */
  partner?: string;
  /** Records validated, accepted and staged at once (BATCH). */
  batchSize?: number;
  /** NDJSON files of at least this many bytes are validated on threads of their own (validateFile.ts: 48 MiB). */
  threadsFromBytes?: number;
  /** How long the ledger leaves the reports the import accepts to it before reconciliation may queue them (HOLD_MS). */
  holdMs?: number;
  /** Staged reports archived at once (ROUND_ROWS); a round also ends a quarter of the way into its hold. */
  roundRows?: number;
}

export interface ImportResult {
  records: number;
  accepted: number;
  duplicate: number;
  rejected: number;
  resumedFrom: number;
  rejectsFile: string;
  /** Parts written (with their sidecars). */
  parts: number;
  /** Where this run's time went, in seconds: reading and validating; accepting and staging; archiving; ready texts. */
  seconds: { reading: number; accepting: number; archiving: number; readyTexts: number };
}

/** What an import uses: the ledger's acceptance and archiving, the store, DuckDB, the change log, the current boundaries. */
export interface ImportDeps {
  ledger: Pick<AcceptanceLedger, 'acceptHeld' | 'renewHolds' | 'reclaimHeldSpace'> & Pick<PendingLedger, 'markArchived'> & Pick<RetractionLedger, 'retractions'>;
  store: ObjectStore;
  /** Reads the archive's parts: a resumed round's parts merged away since are found in them. */
  cache: Pick<PartCache, 'withFiles'>;
  db: DuckDb;
  changes: Pick<ChangeLog, 'record'>;
  boundaries: Pick<BoundaryRepository, 'latest'>;
  config: Pick<Config, 'dataDir' | 'flushIntervalSeconds'>;
  /** Told of a sidecar that could not be built, and of staged files gone. */
  log: Pick<Logger, 'warn'>;
}

interface Checkpoint {
  /** 4: the sorted file holds each record's post_id beside it (3: it did not). */
  v: 4;
  size: number;
  mtimeMs: number;
  processed: number;
  accepted: number;
  duplicate: number;
  rejected: number;
  complete: boolean;
  partner?: string;
  /** This run's folder under the data dir's tmp/import/. */
  run: string;
  /** Validated files of pass 1 (names in the run's folder), until they are sorted into SORTED. */
  validated: string[];
  /** Set once pass 1 is done: the sorted file's name, and how many valid records it holds. */
  sorted?: string;
  valid: number;
  /** Rows of the sorted file accepted so far (pass 2). */
  acceptedUpTo: number;
  /**
   * Bytes of the rejects file that belong to the records done: a run that died after writing a
   * batch's rejects but before its checkpoint wrote them again on resume (absent in a checkpoint
   * written before it was kept).
   */
  rejectsBytes?: number;
  /** Staged files (names in the run's folder) whose reports are accepted, not yet archived. */
  staged: string[];
  stagedReports: number;
  /** When the first hold of the staged reports ends (absent: unknown, as a checkpoint of an earlier release). */
  stagedHeldUntilMs?: number;
  parts: number;
  /**
   * Archived parts still without their ready texts, each with its local copy (a name in the run's
   * folder), its reports (absent in a checkpoint written before they were counted) and the
   * version it was stored as (absent until known, and in a checkpoint of an earlier release).
   */
  untexted: { key: string; file: string; reports?: number; stored?: boolean; etag?: string }[];
  /**
   * While a round is archived: where its parts begin in `untexted` (each named there before it
   * is stored, `stored` once it is). A run that finds it set was stopped mid-round: the reports of
   * those parts that stand are marked archived, and left out of the staged files, before the rest
   * is archived.
   */
  roundFrom?: number;
}

/** The sorted file of validated records, in the run's folder. */
const SORTED = 'sorted.parquet';
/** Records validated (and written) at once in pass 1, accepted per ledger call (and staged per file) in pass 2. */
const BATCH = 10_000;
/** Staged reports archived at once: a year of a few million in one round, so each day is one part. */
const ROUND_ROWS = 4_000_000;
/**
 * How long the ledger leaves an import's reports to it: a round's staging and archiving, with
 * room. A round is archived a quarter of the way into its first hold at the latest; one that
 * reaches half of it (a resumed run's) renews the holds first (importHolds.ts).
 */
const HOLD_MS = 60 * 60_000;

/** One import at a time into an archive, and on a data directory (importLock.ts). */
export function importFile(rt: ImportDeps, options: ImportOptions, progress?: Progress): Promise<ImportResult> {
  return withImportLock({ store: rt.store, dataDir: rt.config.dataDir, log: rt.log }, (stillHeld) => importAlone(rt, options, progress, stillHeld));
}

/** `stillHeld`: throws once the archive's import lock is another's (called before each step that writes). */
async function importAlone(rt: ImportDeps, options: ImportOptions, progress: Progress | undefined, stillHeld: () => void): Promise<ImportResult> {
  const runStartedMs = Date.now();
  const holdMs = options.holdMs ?? HOLD_MS;
  const roundRows = options.roundRows ?? ROUND_ROWS;
  const format = options.format ?? detectFormat(options.file);
  const stat = await fs.stat(options.file);
  const stateFile = options.stateFile ?? `${options.file}.import-state.json`;
  const rejectsFile = options.rejectsFile ?? rejectsFileOf(options.file);
  await checkRejectsFile(rejectsFile, [options.file, stateFile]);
  await removeCheckpointLeftovers(stateFile);
  const partner = options.partner;
  let checkpoint: Checkpoint = {
    v: 4,
    size: stat.size,
    mtimeMs: stat.mtimeMs,
    processed: 0,
    accepted: 0,
    duplicate: 0,
    rejected: 0,
    complete: false,
    ...(partner !== undefined && { partner }),
    run: ulid(),
    validated: [],
    valid: 0,
    acceptedUpTo: 0,
    staged: [],
    stagedReports: 0,
    parts: 0,
    untexted: [],
  };
  if (!options.restart) {
    const saved = await readCheckpoint(stateFile);
    // A run as another partner starts over: the records done so far are not that partner's.
    if (saved && !saved.complete && saved.size === stat.size && saved.mtimeMs === stat.mtimeMs && saved.partner === partner) {
      // A sorted file an earlier release wrote gets its post_ids first.
      if (saved.v !== 4 && saved.sorted !== undefined && saved.run !== undefined) {
        await addSortedPostIds(rt.db, path.join(rt.config.dataDir, 'tmp', 'import', saved.run, saved.sorted));
      }
      checkpoint = { ...checkpoint, ...saved, v: 4 };
    }
  }
  const resumedFrom = checkpoint.processed;
  // A new run writes the rejects file over at its first reject (or at the end of its first pass),
  // not before: a run that stops at once (a file not of the format given) leaves the last run's.
  let fresh = resumedFrom === 0;
  if (resumedFrom === 0) {
    checkpoint.rejectsBytes = 0;
  } else {
    // The rejects of the records done, and none of those the resumed run does again.
    const size = (await fs.stat(rejectsFile).catch(() => undefined))?.size ?? 0;
    if (checkpoint.rejectsBytes === undefined) checkpoint.rejectsBytes = size;
    else if (size > checkpoint.rejectsBytes) await fs.truncate(rejectsFile, checkpoint.rejectsBytes);
  }
  const appendRejects = async (text: string) => {
    if (fresh) await fs.writeFile(rejectsFile, '');
    fresh = false;
    await fs.appendFile(rejectsFile, text);
    checkpoint.rejectsBytes = (checkpoint.rejectsBytes ?? 0) + Buffer.byteLength(text);
  };
  const runDir = path.join(rt.config.dataDir, 'tmp', 'import', checkpoint.run);
  await fs.mkdir(runDir, { recursive: true });
  // One write at a time, a later one never landing first; the saves of parts stored at once
  // (each saves twice) share writes.
  const save = coalescing(() => writeCheckpoint(stateFile, checkpoint));
  const publisher = storePartPublisher(rt);
  // Read again after each round: reports accepted after a publish are tagged with it, not
  // tagged with the old set and then again as their part is stored.
  let boundaries = await rt.boundaries.latest();

  const seconds = { reading: 0, accepting: 0, archiving: 0, readyTexts: 0 };
  const timed = async (phase: keyof typeof seconds, fn: () => Promise<void>) => {
    const started = performance.now();
    try {
      await fn();
    } finally {
      seconds[phase] += (performance.now() - started) / 1000;
    }
  };
  /** The staged reports as parts, then the checkpoint without them. */
  const archiveStaged = () => timed('archiving', async () => {
    if (checkpoint.staged.length === 0) return;
    stillHeld();
    // What accepting left behind goes before DuckDB sorts the staged rows (the import's peak).
    releaseAll();
    // A staged file gone (removed once the ledger had released all of it, before the checkpoint
    // said so; or swept long after the import stopped) holds nothing left to archive: its
    // reports are the worker's, queued by reconciliation once their hold ended.
    const present = await Promise.all(checkpoint.staged.map((name) => fs.access(path.join(runDir, name)).then(() => true, () => false)));
    const gone = checkpoint.staged.filter((_, i) => !present[i]);
    if (gone.length > 0) rt.log.warn({ files: gone }, 'staged files gone: their reports are archived through the queue once their hold ends');
    checkpoint.staged = checkpoint.staged.filter((_, i) => present[i]);
    let files = checkpoint.staged.map((name) => path.join(runDir, name));
    // A round stopped part-way: of the parts it named, those that stand are logged and marked now
    // (their reports then left out below); the others are made again from the staged files.
    let stood = 0;
    if (checkpoint.roundFrom !== undefined) {
      const named = checkpoint.untexted.splice(checkpoint.roundFrom);
      const standing: Checkpoint['untexted'] = [];
      /** Reports of parts not under their keys that the archive holds all the same. */
      const merged: { pkey: string; createdMs: number }[] = [];
      for (const p of named) {
        // Known stored (a compaction since may have merged it under another key), or found; its
        // version as this run stored it (its reports still pending, no purge has rewritten it).
        const found = p.stored === true && p.etag !== undefined ? undefined : await rt.store.head(p.key);
        const stands = p.stored === true || found !== undefined;
        const local = path.join(runDir, p.file);
        if (!stands) {
          // Never stored, or stored by a run stopped before its checkpoint said so and merged
          // since under another key (a compaction, a reprocess): the archive tells which.
          merged.push(...(await archivedOf(rt, await partReports(rt.db, local, p.key, files))));
          await fs.rm(local, { force: true });
          continue;
        }
        let etag = p.etag ?? found?.etag;
        // Its local copy swept since: fetched back while the part is still under its key.
        if (!(await fs.access(local).then(() => true, () => false))) {
          const got = await rt.store.get(p.key);
          if (!got) {
            // Merged since under another key, its copy gone too: its reports from the staged files.
            merged.push(...(await archivedOf(rt, await partReports(rt.db, local, p.key, files))));
            continue;
          }
          // Beside it, then renamed: a run stopped mid-write leaves no torn copy for the next to read.
          await fs.writeFile(`${local}.tmp`, got.body);
          await fs.rename(`${local}.tmp`, local);
          etag = got.etag;
        }
        standing.push({ ...p, stored: true, ...(etag !== undefined && { etag }) });
      }
      const reports = [...(standing.length > 0 ? await reportsIn(rt.db, standing.map((p) => path.join(runDir, p.file))) : []), ...merged];
      if (reports.length > 0) {
        await rt.changes.record(reports);
        await rt.ledger.markArchived(inLedgerOrder(reports.map((r) => r.pkey)));
      }
      checkpoint.untexted.push(...standing);
      checkpoint.parts += standing.length;
      stood = standing.length + merged.length;
      delete checkpoint.roundFrom;
    }
    if (files.length === 0) {
      checkpoint.stagedReports = 0;
      delete checkpoint.stagedHeldUntilMs;
      await save();
      return;
    }
    if (stood > 0 || Date.now() > (checkpoint.stagedHeldUntilMs ?? 0) - holdMs / 2) {
      const holdUntilMs = Date.now() + holdMs;
      const kept = await keepHeld(rt.db, rt.ledger, files, holdUntilMs);
      files = kept.files;
      checkpoint.staged = files.map((file) => path.basename(file));
      checkpoint.stagedReports -= kept.dropped;
      checkpoint.stagedHeldUntilMs = holdUntilMs;
      if (files.length === 0) {
        checkpoint.stagedReports = 0;
        delete checkpoint.stagedHeldUntilMs;
      }
      await save();
      if (files.length === 0) return;
    }
    // Every staged file holds reports (keepHeld removes one the ledger released in full).
    const stagedRange = await rangeOf(rt.db, files);
    const retracted = new Set<string>();
    for await (const r of rt.ledger.retractions({ createdFromMs: stagedRange.fromMs, createdToMs: stagedRange.toMs, unpurgedOnly: true })) retracted.add(r.pkey);
    const archived: string[] = [];
    // Tagged as they were accepted: with boundaries published since (a reprocess run meanwhile
    // may have passed their hours already), each part is tagged again as it is stored, with the
    // version published then (a round of a long import on S3 lasts long enough to see a publish).
    const stagedVersions = await versionsIn(rt.db, files);
    checkpoint.roundFrom = checkpoint.untexted.length;
    await save();
    const parts = await writeBulkParts(
      rt.db,
      files,
      { closedBeforeMs: closedBefore(rt.config.flushIntervalSeconds), retracted, scratch: path.join(runDir, 'parts') },
      async ({ key, file, reports }) => {
        const current = await rt.boundaries.latest();
        boundaries = current;
        const retag = stagedVersions.some((v) => v !== current.version) ? current : undefined;
        if (retag) {
          const out = `${file}.retagged`;
          const done = await retagParts(rt.db, [file], (lng, lat) => retag.tagger.tag(lng, lat), retag.version, { fromMs: -Infinity, toMs: Infinity, dryRun: false }, out, async () => [...retracted]);
          if (done.changed) await fs.rename(out, file);
        }
        // Named in the checkpoint before it is stored: a run stopped mid-round finds whether it
        // stands, and marks its reports rather than storing them again.
        const kept = `texts-${ulid()}.parquet`;
        await fs.rename(file, path.join(runDir, kept));
        const named: Checkpoint['untexted'][number] = { key, file: kept, reports: reports.length };
        checkpoint.untexted.push(named);
        await save();
        // As a worker's flush: the part before the change log, the change log before "archived".
        // Its stats go with it; its ready texts once every report is queryable (see addReadyTexts).
        await publisher.publish(key, path.join(runDir, kept), { readyTexts: false });
        await rt.changes.record(reports);
        for (const r of reports) archived.push(r.pkey);
        named.stored = true;
        // The version its ready texts are built for: its reports are pending until the round ends, so no purge has rewritten it yet.
        named.etag = (await rt.store.head(key))?.etag;
        await save();
      },
    );
    // Once every part is stored, all at once and in the ledger's order: each of its pages is
    // then rewritten once, not once per part that has a report on it.
    await rt.ledger.markArchived(inLedgerOrder(archived));
    delete checkpoint.roundFrom;
    checkpoint.parts += parts;
    checkpoint.staged = [];
    checkpoint.stagedReports = 0;
    delete checkpoint.stagedHeldUntilMs;
    await save();
    await Promise.all(files.map((f) => fs.rm(f, { force: true })));
  });

  /** The ready texts of the parts archived so far (addReadyTexts.ts). */
  const addTexts = () => timed('readyTexts', async () => {
    progress?.start(checkpoint.untexted.length, 'ready texts of parts');
    await addReadyTexts({ store: rt.store, publisher }, checkpoint.untexted.map((part) => ({ ...part, file: path.join(runDir, part.file) })), runDir, () => progress?.tick());
    checkpoint.untexted = [];
    await save();
  });

  // What a crashed run staged is archived before anything else.
  await archiveStaged();

  const batchSize = options.batchSize ?? BATCH;

  // Pass 1: read and validate, a batch at a time, into validated files.
  if (checkpoint.sorted === undefined) {
    try {
      await timed('reading', async () => {
        progress?.start(format === 'ndjson' ? stat.size : 0, format === 'ndjson' ? 'reading bytes' : 'reading records');
        // Each batch's file is written (by DuckDB, off this thread) while the next ones are validated.
        const writes = new OneBehind();
        try {
          await validateFile({ file: options.file, bytes: stat.size, format, from: resumedFrom, size: batchSize, boundaries, partner, threadsFromBytes: options.threadsFromBytes }, async (first, count, { valid, rejects }) => {
            const name = `valid-${String(first).padStart(12, '0')}.parquet`;
            // The checkpoint counts a batch once its file and rejects are written.
            await writes.then(async () => {
              if (rejects.length > 0) await appendRejects(rejects.map((r) => rejectLine(first + r.index, r.reasons, r.input)).join(''));
              if (valid.index.length > 0) {
                await writeValidated(rt.db, first, valid, path.join(runDir, name));
                checkpoint.validated.push(name);
              }
              checkpoint.rejected += rejects.length;
              checkpoint.processed += count;
              await save();
            });
          }, progress);
          await writes.settle();
        } finally {
          await writes.idle();
        }
        progress?.stop();
        const validated = checkpoint.validated.map((name) => path.join(runDir, name));
        // A run without rejects leaves an empty file, not the last run's.
        if (fresh) await appendRejects('');
        checkpoint.valid = await sortValidated(rt.db, validated, path.join(runDir, SORTED));
        checkpoint.sorted = SORTED;
        checkpoint.validated = [];
        await save();
        await Promise.all(validated.map((f) => fs.rm(f, { force: true })));
      });
    } catch (err) {
      // A file that cannot be read as its format says, found before any record was accepted:
      // nothing to resume, so nothing is left to resume from (its rejects so far stay; before
      // its first, the last run's rejects file is as it was).
      if (err instanceof ImportInputError) {
        await fs.rm(runDir, { recursive: true, force: true });
        await fs.rm(stateFile, { force: true });
      }
      throw err;
    }
  }

  // Pass 2: accept in the ledger's key order, stage what is new, archive every ROUND_ROWS.
  const archivingBefore = seconds.archiving;
  const sortedFile = path.join(runDir, SORTED);
  await timed('accepting', async () => {
    progress?.start(checkpoint.valid, 'accepting records');
    progress?.tick(checkpoint.acceptedUpTo);
    // The ledger accepts a batch (on its own thread) while the one before is tagged, and staged
    // by DuckDB while the next is accepted; the ledger's calls follow one another in the file's
    // order, so the first version still wins. The checkpoint counts a batch once it is staged (a
    // crash before that brings its reports back as held repeats, staged again).
    const stagings = new OneBehind();
    /** Reports an earlier run accepted and this one stages (held repeats), each once. */
    const stagedHeld = new Set<string>();
    let queued = checkpoint.acceptedUpTo;
    type Accepting = { batch: SortedBatch; receivedAt: string; hold: { untilMs: number }; outcomes: Promise<HeldAcceptResult[]> };
    let accepting: Accepting | undefined;
    const stage = async ({ batch, receivedAt, hold, outcomes }: Accepting) => {
      const rejects: string[] = [];
      // The new reports, staged by DuckDB from the sorted file; those an earlier run of this
      // import accepted and did not stage (the ledger's first version), staged from here.
      const created: { n: number[]; tags: Tags[] } = { n: [], tags: [] };
      const heldRows: ArchiveRow[] = [];
      let duplicate = 0;
      const accepted = await outcomes;
      // The set the tags come from names their version, though a round archived before they are staged reads a newer one.
      const tagging = boundaries;
      accepted.forEach((outcome, i) => {
        const n = batch.n[i]!;
        if ('taken' in outcome) {
          const { pkey, report } = JSON.parse(batch.records[i]!.json) as IngestRecord;
          rejects.push(rejectLine(n, [`post_id: ${pkey} is a partner's report (accepted before post_ids were per partner); import as a partner with --partner NAME`], JSON.stringify(report)));
        } else if (outcome.created) {
          created.n.push(n);
          created.tags.push(tagging.tagger.tag(batch.lng[i]!, batch.lat[i]!));
        } else if ('held' in outcome && Date.parse(outcome.held.received_at) < runStartedMs && !stagedHeld.has(outcome.pkey)) {
          // Once: the file's later copies of a post_id come back held too (their first version).
          stagedHeld.add(outcome.pkey);
          const { location } = outcome.held.report;
          heldRows.push(archiveRowOf(outcome.held, tagging.tagger.tag(location.lng, location.lat), tagging.version));
        } else duplicate += 1;
      });
      const name = `stage-${String(queued).padStart(12, '0')}`;
      const postIds = rangeOfPostIds(batch.records);
      queued += batch.n.length;
      await stagings.then(async () => {
        if (rejects.length > 0) await appendRejects(rejects.join(''));
        if (created.n.length > 0) {
          await stageAccepted(rt.db, sortedFile, { ...created, postIds }, { receivedAtMs: Date.parse(receivedAt), version: tagging.version }, path.join(runDir, `${name}.parquet`));
          checkpoint.staged.push(`${name}.parquet`);
        }
        if (heldRows.length > 0) {
          await writeParquet(rt.db, heldRows, path.join(runDir, `${name}-held.parquet`));
          checkpoint.staged.push(`${name}-held.parquet`);
        }
        // A held repeat's hold is the earlier run's, ending at any time: renewed before archiving.
        const holdEnds = heldRows.length > 0 ? 0 : created.n.length > 0 ? hold.untilMs : Infinity;
        if (holdEnds < (checkpoint.stagedHeldUntilMs ?? Infinity)) checkpoint.stagedHeldUntilMs = holdEnds;
        const rows = created.n.length + heldRows.length;
        checkpoint.stagedReports += rows;
        checkpoint.rejected += rejects.length;
        checkpoint.duplicate += duplicate;
        checkpoint.accepted += rows;
        checkpoint.acceptedUpTo += batch.n.length;
        await save();
        progress?.tick(batch.n.length);
        // A round ends at ROUND_ROWS, or a quarter of the way into its first hold (an import on a
        // slow store: 4,000,000 reports on S3 take hours), well before any renewal is due.
        if (checkpoint.stagedReports >= roundRows || Date.now() > (checkpoint.stagedHeldUntilMs ?? Infinity) - (holdMs * 3) / 4) await archiveStaged();
      });
    };
    try {
      // A file of no valid record (empty, or every line rejected) has no sorted file to read.
      if (checkpoint.valid > 0) await eachSortedBatch(rt.db, sortedFile, checkpoint.acceptedUpTo, batchSize, async (batch) => {
        const receivedAt = new Date().toISOString();
        const before = accepting;
        // The hold starts as the acceptance does (after the one before it): the checkpoint knows
        // when it ends, and a round that nears it is archived.
        const hold = { untilMs: 0 };
        const accept = () => {
          stillHeld();
          return rt.ledger.acceptHeld(batch.records, receivedAt, (hold.untilMs = Date.now() + holdMs));
        };
        const outcomes = before ? before.outcomes.then(accept) : accept();
        // Handled here: a failure is thrown by stage(), which awaits it.
        outcomes.catch(() => undefined);
        accepting = { batch, receivedAt, hold, outcomes };
        if (before) await stage(before);
      });
      const last = accepting;
      accepting = undefined;
      if (last) await stage(last);
      await stagings.settle();
    } finally {
      // A batch still being accepted (a stage failed) ends before the job does.
      await accepting?.outcomes.catch(() => undefined);
      await stagings.idle();
    }
    progress?.stop();
  });
  // The rounds archived while accepting are archiving's.
  seconds.accepting -= seconds.archiving - archivingBefore;
  await archiveStaged();
  // Every report is queryable: the ready texts, and the ledger's space for the held records given
  // back meanwhile (a crash before either ends leaves it free for later rows).
  await bothSettled(addTexts(), rt.ledger.reclaimHeldSpace());
  checkpoint.complete = true;
  await save();
  await fs.rm(runDir, { recursive: true, force: true });
  progress?.stop();
  return {
    records: checkpoint.processed,
    accepted: checkpoint.accepted,
    duplicate: checkpoint.duplicate,
    rejected: checkpoint.rejected,
    resumedFrom,
    rejectsFile,
    parts: checkpoint.parts,
    seconds: { reading: round(seconds.reading), accepting: round(seconds.accepting), archiving: round(seconds.archiving), readyTexts: round(seconds.readyTexts) },
  };
}

/** The boundary versions the staged reports were tagged with. */
async function versionsIn(db: DuckDb, files: readonly string[]): Promise<string[]> {
  return db.withConnection(async (conn) => {
    const rows = (await conn.runAndReadAll(`SELECT DISTINCT boundary_version FROM read_parquet([${files.map(sqlString).join(', ')}])`)).getRows() as [string][];
    return rows.map(([v]) => v);
  });
}

/** The created_at range of the staged rows. */
async function rangeOf(db: DuckDb, files: readonly string[]): Promise<{ fromMs: number; toMs: number }> {
  return db.withConnection(async (conn) => {
    const list = files.map(sqlString).join(', ');
    const [row] = (await conn.runAndReadAll(`SELECT epoch_ms(min(created_at))::DOUBLE, epoch_ms(max(created_at))::DOUBLE FROM read_parquet([${list}])`)).getRows() as [number, number][];
    return { fromMs: row![0], toMs: row![1] };
  });
}

/** The lowest and highest post_id of a batch. */
function rangeOfPostIds(records: readonly HeldRecord[]): [number, number] {
  let low = Infinity;
  let high = -Infinity;
  for (const { post_id } of records) {
    if (post_id < low) low = post_id;
    if (post_id > high) high = post_id;
  }
  return [low, high];
}

/** A saved checkpoint: one of an earlier release lacks the fields added since (the defaults stand). */
async function readCheckpoint(file: string): Promise<(Partial<Omit<Checkpoint, 'v'>> & { v?: number }) | undefined> {
  try {
    return JSON.parse(await fs.readFile(file, 'utf8')) as Checkpoint;
  } catch {
    return undefined;
  }
}

/**
 * A part's reports: those of its local copy, or, when that is gone, the staged reports of its
 * hour or day (a superset: those the archive holds are marked, the rest stored).
 */
async function partReports(db: DuckDb, local: string, key: string, staged: readonly string[]): Promise<{ pkey: string; createdMs: number }[]> {
  if (await fs.access(local).then(() => true, () => false)) return reportsIn(db, [local]);
  const partition = partitionOfPartKey(key);
  if (!partition || staged.length === 0) return [];
  return reportsIn(db, staged, { fromMs: partition.startMs, toMs: partition.startMs + (partition.wholeDay ? DAY_MS : HOUR_MS) - 1 });
}

/** Those of `reports` the archive holds now, in whatever part. */
async function archivedOf(rt: Pick<ImportDeps, 'store' | 'cache' | 'db'>, reports: readonly { pkey: string; createdMs: number }[]): Promise<{ pkey: string; createdMs: number }[]> {
  if (reports.length === 0) return [];
  let fromMs = Infinity;
  let toMs = -Infinity;
  for (const r of reports) [fromMs, toMs] = [Math.min(fromMs, r.createdMs), Math.max(toMs, r.createdMs)];
  const there = await archivedIn(rt, fromMs, toMs);
  return reports.filter((r) => there.has(r.pkey));
}

/** The reports the part files hold (pkey and created_at), as a change log names them; `within`: those created then. */
async function reportsIn(db: DuckDb, files: readonly string[], within?: { fromMs: number; toMs: number }): Promise<{ pkey: string; createdMs: number }[]> {
  const where = within ? ` WHERE epoch_ms(created_at) BETWEEN ${Math.trunc(within.fromMs)} AND ${Math.trunc(within.toMs)}` : '';
  return db.withConnection(async (conn) => {
    const reader = await conn.runAndReadAll(`SELECT pkey, epoch_ms(created_at)::DOUBLE AS createdMs FROM read_parquet([${files.map(sqlString).join(', ')}])${where}`);
    return reader.getRowObjectsJS() as { pkey: string; createdMs: number }[];
  });
}

/** Pkeys in the ledger's order (partner, then post_id), each parsed once. */
function inLedgerOrder(pkeys: readonly string[]): string[] {
  const keyed = pkeys.map((pkey) => {
    const parts = parsePkey(pkey);
    return { pkey, partner: parts?.partner ?? '', postId: parts?.post_id ?? 0 };
  });
  keyed.sort((a, b) => (a.partner < b.partner ? -1 : a.partner > b.partner ? 1 : a.postId - b.postId));
  return keyed.map((k) => k.pkey);
}

const round = (s: number) => Math.round(s * 10) / 10;

/** Removes what a run stopped while it wrote its checkpoint left beside it (its `<file>.<pid>.tmp`): under the lock, no other run writes it. */
async function removeCheckpointLeftovers(file: string): Promise<void> {
  const name = path.basename(file);
  const left = (await fs.readdir(path.dirname(file)).catch(() => [])).filter((n) => n.startsWith(`${name}.`) && /^\d+\.tmp$/.test(n.slice(name.length + 1)));
  await Promise.all(left.map((n) => fs.rm(path.join(path.dirname(file), n), { force: true })));
}

/** Written whole or not at all: a crash mid-write leaves the previous checkpoint. */
async function writeCheckpoint(file: string, checkpoint: Checkpoint): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  await fs.writeFile(tmp, JSON.stringify(checkpoint));
  await fs.rename(tmp, file);
}
