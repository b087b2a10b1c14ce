// The checkpoint an import keeps beside its file (`<file>.import-state.json`, or where told): the
// one record of how far a run got, written whole after each step, so a run that dies anywhere is
// resumed by running it again. Its working files live in the run's folder under the data dir's
// tmp/import/<run>/ (validated, sorted, staged and part files, each named below).
import fs from 'node:fs/promises';
import path from 'node:path';
import { fsyncDir, writeDurably } from '../shared/files.js';
import { newUlid } from '../shared/ulid.js';
import type { DuckDb } from '../archive/duckdb.js';
import { ImportInputError } from './importRecords.js';
import { addSortedPostIds } from './validatedRecords.js';

export interface Checkpoint {
  /** 4: the sorted file holds each record's post_id beside it (3: it did not). */
  v: 4;
  /**
   * The archive imported into (its STORAGE_URL; absent in a checkpoint of an earlier release): the
   * checkpoint sits beside the file unless told, so an import of the same file into another
   * archive finds it, and must leave it alone while it is unfinished.
   */
  archive?: string;
  /**
   * The input file as named (resolved; absent in a checkpoint of an earlier release): a checkpoint
   * put elsewhere (`--checkpoint`) may be named again for another file, whose run must leave an
   * unfinished one alone.
   */
  file?: string;
  /** The input file's size and mtime: a checkpoint of another file (or the same one changed) is not resumed. */
  size: number;
  mtimeMs: number;
  processed: number;
  accepted: number;
  duplicate: number;
  rejected: number;
  /** Fields the valid records gave that are not read, by name (absent in a checkpoint of an earlier release). */
  notRead?: Record<string, number>;
  complete: boolean;
  partner?: string;
  /** This run's folder under the data dir's tmp/import/. */
  run: string;
  /** Validated files of pass 1 (names in the run's folder), until they are sorted into `sorted`. */
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
  untexted: UntextedPart[];
  /**
   * While a round is archived: where its parts begin in `untexted` (each named there before it
   * is stored, `stored` once it is). A run that finds it set was stopped mid-round: the reports of
   * those parts that stand are marked archived, and left out of the staged files, before the rest
   * is archived.
   */
  roundFrom?: number;
}

export interface UntextedPart {
  key: string;
  file: string;
  reports?: number;
  stored?: boolean;
  etag?: string;
}

/** The run's folder: where its working files are, named in the checkpoint. */
export const runFolder = (dataDir: string, run: string): string => path.join(dataDir, 'tmp', 'import', run);

/**
 * The checkpoint a run starts from: the saved one when it is of this file, unchanged, as this
 * partner, and not complete (and `restart` is not asked); else a new run's. A run as another
 * partner starts over: the records done so far are not that partner's.
 */
export async function startingCheckpoint(
  stateFile: string,
  input: { archive: string; file: string; size: number; mtimeMs: number; partner: string | undefined; restart: boolean },
  dataDir: string,
  db: DuckDb,
): Promise<Checkpoint> {
  const { partner } = input;
  await checkNotAnothers(stateFile, input);
  const fresh: Checkpoint = {
    v: 4,
    archive: input.archive,
    file: path.resolve(input.file),
    size: input.size,
    mtimeMs: input.mtimeMs,
    processed: 0,
    accepted: 0,
    duplicate: 0,
    rejected: 0,
    complete: false,
    ...(partner !== undefined && { partner }),
    run: newUlid(),
    validated: [],
    valid: 0,
    acceptedUpTo: 0,
    staged: [],
    stagedReports: 0,
    parts: 0,
    untexted: [],
  };
  if (input.restart) return fresh;
  const saved = await readCheckpoint(stateFile);
  if (!saved || saved.complete || saved.size !== input.size || saved.mtimeMs !== input.mtimeMs || saved.partner !== partner) return fresh;
  // A sorted file an earlier release wrote gets its post_ids first.
  if (saved.v !== 4 && saved.sorted !== undefined && saved.run !== undefined) {
    await addSortedPostIds(db, path.join(runFolder(dataDir, saved.run), saved.sorted));
  }
  return { ...fresh, ...saved, v: 4 };
}

/** The checkpoint is another import's, unfinished (into another archive, or of another file): left as it is. */
export class CheckpointTakenError extends ImportInputError {}

/**
 * Refuses (CheckpointTakenError) a checkpoint of an unfinished import into another archive, or
 * of another file (named otherwise, and not of this one's size and mtime: a file moved with its
 * checkpoint is still resumed): resumed here it would fail on that run's working files, and a new
 * run here would write over what that run staged, which its own resume needs. Checked as a run
 * starts and before each save (two runs started at once).
 */
export async function checkNotAnothers(stateFile: string, input: { archive: string; file: string; size: number; mtimeMs: number }): Promise<void> {
  const saved = await readCheckpoint(stateFile);
  if (!saved || saved.complete) return;
  const abandon = 'or remove that checkpoint if that import is abandoned (its reports stay pending there, for reconciliation to archive)';
  if (saved.archive !== undefined && saved.archive !== input.archive) {
    throw new CheckpointTakenError(
      `${stateFile} is the checkpoint of an unfinished import of this file into another archive (${saved.archive}): finish it there (the same command with that archive's DATA_DIR or STORAGE_URL), or give this import a checkpoint of its own (--checkpoint F), ${abandon}`,
    );
  }
  const otherFile = saved.file !== undefined && saved.file !== path.resolve(input.file) && (saved.size !== input.size || saved.mtimeMs !== input.mtimeMs);
  if (otherFile) {
    throw new CheckpointTakenError(
      `${stateFile} is the checkpoint of an unfinished import of another file (${saved.file}): finish that import (the same command with --file ${saved.file}), or give this import a checkpoint of its own (--checkpoint F), ${abandon}`,
    );
  }
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
 * Written whole or not at all, and on disk before it returns: a crash mid-write leaves the
 * previous checkpoint, a power loss after it this one. (The files it names are flushed before it
 * is written, each as it is made, and the run folder's entries by `before`: a checkpoint names
 * only files a power loss keeps whole.)
 */
export async function writeCheckpoint(file: string, checkpoint: Checkpoint, before: Promise<void> = Promise.resolve()): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  // `before` (the run folder's flush) goes on while the checkpoint is written and flushed; both end before it takes the name.
  await Promise.all([before, writeDurably(tmp, 'w', JSON.stringify(checkpoint))]);
  await fs.rename(tmp, file);
  await fsyncDir(path.dirname(path.resolve(file)));
}

/** Removes what a run stopped while it wrote its checkpoint left beside it (its `<file>.<pid>.tmp`): under the lock, no other run writes it. */
export async function removeCheckpointLeftovers(file: string): Promise<void> {
  const name = path.basename(file);
  const left = (await fs.readdir(path.dirname(file)).catch(() => [])).filter((n) => n.startsWith(`${name}.`) && /^\d+\.tmp$/.test(n.slice(name.length + 1)));
  await Promise.all(left.map((n) => fs.rm(path.join(path.dirname(file), n), { force: true })));
}
