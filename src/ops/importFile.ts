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
//   3. every ROUND_ROWS staged reports (or sooner, well inside their hold) and at the end, a
//      round makes the staged files parts (importRound.ts): from here they are queryable;
//   4. each part gets its ready texts.
//
// The checkpoint (beside the file unless told, importCheckpoint.ts) names the records done and the staged
// files not yet archived, and is written after each step. A run that dies anywhere is resumed by
// running it again: the staged files are archived first, then the pass goes on from the
// checkpoint; the batch the crash cut short comes back as "held" repeats and is staged again. An import that is never
// resumed loses nothing either: once its hold ends, reconciliation queues what it left pending,
// and a run resumed after that archives only what the ledger still holds for it (importHolds.ts).
//
// Imported reports reach mirrors through updated_after; they are not announced as events
// (webhooks, the stream, CAP, SNS), which tell of reports as they arrive, not of history.
// An import runs as one partner (its post_ids, its pkeys, its right to retract) or, by default,
// as none: the operators' own reports, keyed partner-<post_id>.
import fs from 'node:fs/promises';
import path from 'node:path';
import type { ArchiveRow } from '../archive/partColumns.js';
import { storePartPublisher } from '../archive/partPublisher.js';
import { writeParquet } from '../archive/partWriter.js';
import type { Tags } from '../boundaries/tagger.js';
import { archiveRowOf } from '../ingest/archiveRow.js';
import { fsyncDir, fsyncFile, mkdirDurably } from '../shared/files.js';
import type { HeldAcceptResult, HeldRecord, IngestRecord } from '../ledger/ledger.js';
import { addReadyTexts } from './addReadyTexts.js';
import { bothSettled, coalescing, OneBehind } from './concurrency.js';
import { checkCheckpointFile, checkpointFileOf } from './checkpointFile.js';
import { checkNotAnothers, CheckpointTakenError, removeCheckpointLeftovers, runFolder, startingCheckpoint, writeCheckpoint } from './importCheckpoint.js';
import { withImportLock } from './importLock.js';
import { checkNotCompressed, detectFormat, ImportInputError, type ImportFormat } from './importRecords.js';
import { archiveStaged } from './importRound.js';
import type { ImportDeps, ImportRun } from './importRun.js';
import type { Progress } from './progress.js';
import { checkRejectsFile, RejectsWriter, rejectsFileOf } from './rejectsFile.js';
import { validateFile } from './validateFile.js';
import { eachSortedBatch, sortValidated, stageAccepted, writeValidated, type SortedBatch } from './validatedRecords.js';
import { addNotRead, rejectLine } from './validateRecords.js';

export { detectFormat, ImportInputError, type ImportFormat } from './importRecords.js';
export type { ImportDeps } from './importRun.js';

export interface ImportOptions {
  file: string;
  format?: ImportFormat;
  rejectsFile?: string;
  /** Where the checkpoint is kept (default `<file>.import-state.json`, beside the file). */
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
  /** Names of fields the valid records gave that are not read (a misspelt one, another system's column), each with how many records gave it (at most MOST_NAMES_NOT_READ names). */
  fieldsNotRead: Record<string, number>;
  resumedFrom: number;
  rejectsFile: string;
  /** Parts written (with their sidecars). */
  parts: number;
  /** Where this run's time went, in seconds: reading and validating; accepting and staging; archiving; ready texts. */
  seconds: { reading: number; accepting: number; archiving: number; readyTexts: number };
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

type Seconds = ImportResult['seconds'];

/** `stillHeld`: throws once the archive's import lock is another's (called before each step that writes). */
async function importAlone(rt: ImportDeps, options: ImportOptions, progress: Progress | undefined, stillHeld: () => void): Promise<ImportResult> {
  const runStartedMs = Date.now();
  await checkNotCompressed(options.file);
  const format = options.format ?? detectFormat(options.file);
  const stat = await fs.stat(options.file);
  const stateFile = options.stateFile ?? checkpointFileOf(options.file);
  const rejectsFile = options.rejectsFile ?? rejectsFileOf(options.file);
  await checkCheckpointFile(stateFile, options.file);
  await checkRejectsFile(rejectsFile, [options.file, stateFile]);
  await removeCheckpointLeftovers(stateFile);
  const archiveUrl = rt.config.storageUrl;
  const input = { archive: archiveUrl, file: options.file, size: stat.size, mtimeMs: stat.mtimeMs };
  const checkpoint = await startingCheckpoint(stateFile, { ...input, partner: options.partner, restart: options.restart === true }, rt.config.dataDir, rt.db);
  const resumedFrom = checkpoint.processed;
  const rejects = await RejectsWriter.open(rejectsFile, checkpoint, resumedFrom > 0);
  const runDir = runFolder(rt.config.dataDir, checkpoint.run);
  // Its name flushed into its parents: a checkpoint that names the run finds it after a power loss.
  await mkdirDurably(runDir);
  const run: ImportRun = {
    rt,
    checkpoint,
    runDir,
    holdMs: options.holdMs ?? HOLD_MS,
    publisher: storePartPublisher(rt),
    stillHeld,
    // The saves of parts stored at once (each saves twice) share writes. The folder's entries
    // are flushed before the checkpoint takes its name (beside its own flush, not after it): the
    // files it names are there after a power loss (each flushed as it was made).
    save: coalescing(async () => {
      await checkNotAnothers(stateFile, input);
      await writeCheckpoint(stateFile, checkpoint, fsyncDir(runDir));
    }),
    boundaries: await rt.boundaries.latest(),
  };

  const seconds: Seconds = { reading: 0, accepting: 0, archiving: 0, readyTexts: 0 };
  const timed = async (phase: keyof Seconds, fn: () => Promise<void>) => {
    const started = performance.now();
    try {
      await fn();
    } finally {
      seconds[phase] += (performance.now() - started) / 1000;
    }
  };
  const archive = () => timed('archiving', () => archiveStaged(run));

  // What a crashed run staged is archived before anything else.
  await archive();
  const batchSize = options.batchSize ?? BATCH;
  if (checkpoint.sorted === undefined) {
    try {
      await timed('reading', () => readPass(run, { file: options.file, format, bytes: stat.size, from: resumedFrom, batchSize, partner: options.partner, threadsFromBytes: options.threadsFromBytes }, rejects, progress));
    } catch (err) {
      // A file that cannot be read as its format says, found before any record was accepted:
      // nothing to resume, so nothing is left to resume from (its rejects so far stay; before
      // its first, the last run's rejects file is as it was).
      if (err instanceof ImportInputError && !(err instanceof CheckpointTakenError)) {
        await fs.rm(runDir, { recursive: true, force: true });
        await fs.rm(stateFile, { force: true });
      }
      throw err;
    }
  }
  const archivingBefore = seconds.archiving;
  await timed('accepting', () => acceptPass(run, { batchSize, roundRows: options.roundRows ?? ROUND_ROWS, runStartedMs }, rejects, archive, progress));
  // The rounds archived while accepting are archiving's.
  seconds.accepting -= seconds.archiving - archivingBefore;
  await archive();
  // Every report is queryable: the ready texts, and the ledger's space for the held records given
  // back meanwhile (a crash before either ends leaves it free for later rows).
  const addTexts = () => timed('readyTexts', async () => {
    progress?.start(checkpoint.untexted.length, 'ready texts of parts');
    await addReadyTexts({ store: rt.store, publisher: run.publisher }, checkpoint.untexted.map((part) => ({ ...part, file: path.join(runDir, part.file) })), runDir, () => progress?.tick());
    checkpoint.untexted = [];
    await run.save();
  });
  await bothSettled(addTexts(), rt.ledger.reclaimHeldSpace());
  checkpoint.complete = true;
  await run.save();
  await fs.rm(runDir, { recursive: true, force: true });
  progress?.stop();
  return {
    records: checkpoint.processed,
    accepted: checkpoint.accepted,
    duplicate: checkpoint.duplicate,
    rejected: checkpoint.rejected,
    fieldsNotRead: checkpoint.notRead ?? {},
    resumedFrom,
    rejectsFile,
    parts: checkpoint.parts,
    seconds: { reading: round(seconds.reading), accepting: round(seconds.accepting), archiving: round(seconds.archiving), readyTexts: round(seconds.readyTexts) },
  };
}

/** Pass 1: read and validate, a batch at a time, into validated files; then sort them into SORTED. */
async function readPass(
  run: ImportRun,
  input: { file: string; format: ImportFormat; bytes: number; from: number; batchSize: number; partner?: string; threadsFromBytes?: number },
  rejects: RejectsWriter,
  progress: Progress | undefined,
): Promise<void> {
  const { rt, checkpoint, runDir } = run;
  const ndjson = input.format === 'ndjson';
  progress?.start(ndjson ? input.bytes : 0, ndjson ? 'reading bytes' : 'reading records');
  // Each batch's file is written (by DuckDB, off this thread) while the next ones are validated.
  const writes = new OneBehind();
  try {
    const { file, bytes, format, from, partner, threadsFromBytes } = input;
    await validateFile({ file, bytes, format, from, size: input.batchSize, boundaries: run.boundaries, partner, threadsFromBytes }, async (first, count, { valid, rejects: rejected, notRead }) => {
      const name = `valid-${String(first).padStart(12, '0')}.parquet`;
      // The checkpoint counts a batch once its file and rejects are written.
      await writes.then(async () => {
        if (rejected.length > 0) await rejects.append(rejected.map((r) => rejectLine(first + r.index, r.reasons, r.input)).join(''));
        if (valid.index.length > 0) {
          await writeValidated(rt.db, first, valid, path.join(runDir, name));
          await fsyncFile(path.join(runDir, name));
          checkpoint.validated.push(name);
        }
        checkpoint.rejected += rejected.length;
        for (const [name, n] of Object.entries(notRead)) addNotRead((checkpoint.notRead ??= {}), name, n);
        checkpoint.processed += count;
        await run.save();
      });
    }, progress);
    await writes.settle();
  } finally {
    await writes.idle();
  }
  progress?.stop();
  const validated = checkpoint.validated.map((name) => path.join(runDir, name));
  await rejects.finish();
  checkpoint.valid = await sortValidated(rt.db, validated, path.join(runDir, SORTED));
  // (No valid record, no sorted file: it is never read.)
  if (checkpoint.valid > 0) await fsyncFile(path.join(runDir, SORTED));
  checkpoint.sorted = SORTED;
  checkpoint.validated = [];
  await run.save();
  await Promise.all(validated.map((f) => fs.rm(f, { force: true })));
}

/**
 * Pass 2: accept in the ledger's key order, stage what is new, and archive a round (`archive`)
 * every `roundRows` staged reports or a quarter of the way into their first hold.
 */
async function acceptPass(
  run: ImportRun,
  sizes: { batchSize: number; roundRows: number; runStartedMs: number },
  rejects: RejectsWriter,
  archive: () => Promise<void>,
  progress: Progress | undefined,
): Promise<void> {
  const { rt, checkpoint, runDir, holdMs } = run;
  const sortedFile = path.join(runDir, SORTED);
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
    const rejected: string[] = [];
    // The new reports, staged by DuckDB from the sorted file; those an earlier run of this
    // import accepted and did not stage (the ledger's first version), staged from here.
    const created: { n: number[]; tags: Tags[] } = { n: [], tags: [] };
    const heldRows: ArchiveRow[] = [];
    let duplicate = 0;
    /** Held repeats whose first version is not this file's line. */
    let heldOther = 0;
    const accepted = await outcomes;
    // The set the tags come from names their version, though a round archived before they are staged reads a newer one.
    const tagging = run.boundaries;
    accepted.forEach((outcome, i) => {
      const n = batch.n[i]!;
      if ('taken' in outcome) {
        const { pkey, report } = JSON.parse(batch.records[i]!.json) as IngestRecord;
        rejected.push(rejectLine(n, [`post_id: ${pkey} is a partner's report (accepted before post_ids were per partner); import as a partner with --partner NAME`], JSON.stringify(report)));
      } else if (outcome.created) {
        created.n.push(n);
        created.tags.push(tagging.tagger.tag(batch.lng[i]!, batch.lat[i]!));
      } else if ('held' in outcome && Date.parse(outcome.held.received_at) < sizes.runStartedMs && !stagedHeld.has(outcome.pkey)) {
        // Once: the file's later copies of a post_id come back held too (their first version).
        stagedHeld.add(outcome.pkey);
        const { location } = outcome.held.report;
        heldRows.push(archiveRowOf(outcome.held, tagging.tagger.tag(location.lng, location.lat), tagging.version));
        // Archived either way; this line's own only if it is the version held (a resumed run of
        // the same file), else a stopped import of another file held the first version: a duplicate.
        if (JSON.stringify(outcome.held.report) !== JSON.stringify((JSON.parse(batch.records[i]!.json) as IngestRecord).report)) heldOther += 1;
      } else duplicate += 1;
    });
    const name = `stage-${String(queued).padStart(12, '0')}`;
    const postIds = rangeOfPostIds(batch.records);
    queued += batch.n.length;
    await stagings.then(async () => {
      if (rejected.length > 0) await rejects.append(rejected.join(''));
      if (created.n.length > 0) {
        await stageAccepted(rt.db, sortedFile, { ...created, postIds }, { receivedAtMs: Date.parse(receivedAt), version: tagging.version }, path.join(runDir, `${name}.parquet`));
        await fsyncFile(path.join(runDir, `${name}.parquet`));
        checkpoint.staged.push(`${name}.parquet`);
      }
      // A held repeat's hold is the earlier run's, ending at any time: renewed here as the batch's
      // own began, so the round ends when the batch's would. Those the ledger no longer holds
      // (queued since: the worker's) are not staged. Left to the round, each such batch was a
      // round and its parts (an import started again wrote ten times the parts, a resumed one twice).
      let heldUntilMs = Infinity;
      let heldStaged = heldRows;
      if (heldRows.length > 0) {
        run.stillHeld();
        heldUntilMs = Date.now() + holdMs;
        const released = new Set(await rt.ledger.renewHolds(heldRows.map((row) => row.pkey), heldUntilMs));
        heldStaged = heldRows.filter((row) => !released.has(row.pkey));
      }
      if (heldStaged.length > 0) {
        await writeParquet(rt.db, heldStaged, path.join(runDir, `${name}-held.parquet`));
        await fsyncFile(path.join(runDir, `${name}-held.parquet`));
        checkpoint.staged.push(`${name}-held.parquet`);
      }
      const holdEnds = Math.min(heldStaged.length > 0 ? heldUntilMs : Infinity, created.n.length > 0 ? hold.untilMs : Infinity);
      if (holdEnds < (checkpoint.stagedHeldUntilMs ?? Infinity)) checkpoint.stagedHeldUntilMs = holdEnds;
      // Counted accepted whoever archives them.
      const rows = created.n.length + heldRows.length;
      checkpoint.stagedReports += created.n.length + heldStaged.length;
      checkpoint.rejected += rejected.length;
      checkpoint.duplicate += duplicate + heldOther;
      checkpoint.accepted += rows - heldOther;
      checkpoint.acceptedUpTo += batch.n.length;
      await run.save();
      progress?.tick(batch.n.length);
      // A round ends at roundRows, or a quarter of the way into its first hold (an import on a
      // slow store: 4,000,000 reports on S3 take hours), well before any renewal is due.
      if (checkpoint.stagedReports >= sizes.roundRows || Date.now() > (checkpoint.stagedHeldUntilMs ?? Infinity) - (holdMs * 3) / 4) await archive();
    });
  };
  try {
    // A file of no valid record (empty, or every line rejected) has no sorted file to read.
    if (checkpoint.valid > 0) await eachSortedBatch(rt.db, sortedFile, checkpoint.acceptedUpTo, sizes.batchSize, async (batch) => {
      const receivedAt = new Date().toISOString();
      const before = accepting;
      // The hold starts as the acceptance does (after the one before it): the checkpoint knows
      // when it ends, and a round that nears it is archived.
      const hold = { untilMs: 0 };
      const accept = () => {
        run.stillHeld();
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

const round = (s: number) => Math.round(s * 10) / 10;
