// Backfill from a file (importRecords.ts reads it), in bulk. Every record is validated like the
// feed and accepted through the same idempotency keys (first version wins per partner and
// post_id, a re-run adds nothing, a report already posted live is not doubled), but the import
// archives what it accepts itself instead of sending it through the queue:
//
//   1. a batch of records is validated (rejects, with reasons, to the rejects file) and accepted
//      in the ledger in large transactions, held (acceptHeld): reconciliation leaves them be;
//   2. the batch's new reports are tagged and staged as one Parquet file in the data dir;
//   3. every ROUND_ROWS staged reports and at the end, the staged files become parts in set
//      operations (bulkParts.ts), each part stored with its sidecars, its reports written to the
//      change log and then marked archived.
//
// The checkpoint (beside the file) names the records done and the staged files not yet archived,
// and is written after each step. A run that dies anywhere is resumed by running it again: the
// staged files are archived first, then the records after the checkpoint are read; the batch
// the crash cut short comes back as "held" repeats and is staged again. An import that is never
// resumed loses nothing either: once its hold ends, reconciliation queues what it left pending.
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
import { storePartPublisher } from '../archive/partPublisher.js';
import type { ArchiveRow } from '../archive/partColumns.js';
import { writeParquet } from '../archive/partWriter.js';
import { sqlString } from '../archive/duckdb.js';
import { archiveRowOf } from '../ingest/archiveRow.js';
import type { BoundaryRepository } from '../boundaries/repository.js';
import type { IngestRecord, PendingLedger, AcceptanceLedger, RetractionLedger } from '../ledger/ledger.js';
import { InvalidReportError, parsePartnerReport } from '../partners/partnerReport.js';
import type { Config } from '../shared/config.js';
import { closedBefore, parsePkey, pkeyOf, SOURCE } from '../store/layout.js';
import type { ObjectStore } from '../store/objectStore.js';
import { mapLimit } from './concurrency.js';
import { detectFormat, records, RecordError, toPartnerInput, type ImportFormat } from './importRecords.js';
import type { Progress } from './progress.js';

export { detectFormat, type ImportFormat } from './importRecords.js';

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
  /** Where this run's time went, in seconds: reading, validating, accepting and staging; archiving; ready texts. */
  seconds: { accepting: number; archiving: number; readyTexts: number };
}

/** What an import uses: the ledger's acceptance and archiving, the store, DuckDB, the change log, the current boundaries. */
export interface ImportDeps {
  ledger: Pick<AcceptanceLedger, 'acceptHeld'> & Pick<PendingLedger, 'markArchived'> & Pick<RetractionLedger, 'retractions'>;
  store: ObjectStore;
  db: DuckDb;
  changes: Pick<ChangeLog, 'record'>;
  boundaries: Pick<BoundaryRepository, 'current'>;
  config: Pick<Config, 'dataDir' | 'flushIntervalSeconds'>;
}

interface Checkpoint {
  v: 2;
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
  /** Staged files (names in the run's folder) whose reports are accepted, not yet archived. */
  staged: string[];
  stagedReports: number;
  parts: number;
  /** Archived parts still without their ready texts, each with its local copy (a name in the run's folder). */
  untexted: { key: string; file: string }[];
}

/** Records validated and accepted per ledger call (and staged per file). */
const BATCH = 10_000;
/** Staged reports archived at once: a year of a few million in one round, so each day is one part. */
const ROUND_ROWS = 4_000_000;
/** How long the ledger leaves an import's reports to it: a round's staging and archiving, with room. */
const HOLD_MS = 60 * 60_000;

export async function importFile(rt: ImportDeps, options: ImportOptions, progress?: Progress): Promise<ImportResult> {
  const runStartedMs = Date.now();
  const format = options.format ?? detectFormat(options.file);
  const stat = await fs.stat(options.file);
  const stateFile = options.stateFile ?? `${options.file}.import-state.json`;
  const rejectsFile = options.rejectsFile ?? `${options.file}.rejected.ndjson`;
  const partner = options.partner;
  let checkpoint: Checkpoint = {
    v: 2,
    size: stat.size,
    mtimeMs: stat.mtimeMs,
    processed: 0,
    accepted: 0,
    duplicate: 0,
    rejected: 0,
    complete: false,
    ...(partner !== undefined && { partner }),
    run: ulid(),
    staged: [],
    stagedReports: 0,
    parts: 0,
    untexted: [],
  };
  if (!options.restart) {
    const saved = await readCheckpoint(stateFile);
    // A run as another partner starts over: the records done so far are not that partner's.
    if (saved && !saved.complete && saved.size === stat.size && saved.mtimeMs === stat.mtimeMs && saved.partner === partner) {
      checkpoint = { ...checkpoint, ...saved, v: 2, run: saved.run ?? checkpoint.run, staged: saved.staged ?? [], stagedReports: saved.stagedReports ?? 0, parts: saved.parts ?? 0, untexted: saved.untexted ?? [] };
    }
  }
  const resumedFrom = checkpoint.processed;
  if (resumedFrom === 0) await fs.writeFile(rejectsFile, '');
  const runDir = path.join(rt.config.dataDir, 'tmp', 'import', checkpoint.run);
  await fs.mkdir(runDir, { recursive: true });
  const save = () => writeCheckpoint(stateFile, checkpoint);
  const publisher = storePartPublisher(rt);
  const boundaries = await rt.boundaries.current();
  const tagger = boundaries.tagger;

  /** The staged reports as parts, then the checkpoint without them. */
  const seconds = { accepting: 0, archiving: 0, readyTexts: 0 };
  const timed = async (phase: keyof typeof seconds, fn: () => Promise<void>) => {
    const started = performance.now();
    try {
      await fn();
    } finally {
      seconds[phase] += (performance.now() - started) / 1000;
    }
  };
  const archiveStaged = () => timed('archiving', async () => {
    if (checkpoint.staged.length === 0) return;
    const files = checkpoint.staged.map((name) => path.join(runDir, name));
    const stagedRange = await rangeOf(rt.db, files);
    const retracted = new Set<string>();
    for await (const r of rt.ledger.retractions({ createdFromMs: stagedRange.fromMs, createdToMs: stagedRange.toMs, unpurgedOnly: true })) retracted.add(r.pkey);
    const untexted: Checkpoint['untexted'] = [];
    const archived: string[] = [];
    const parts = await writeBulkParts(
      rt.db,
      files,
      { closedBeforeMs: closedBefore(rt.config.flushIntervalSeconds), retracted, scratch: path.join(runDir, 'parts') },
      async ({ key, file, reports }) => {
        // As a worker's flush: the part before the change log, the change log before "archived".
        // Its stats go with it; its ready texts once every report is queryable (see addReadyTexts).
        await publisher.publish(key, file, { readyTexts: false });
        await rt.changes.record(reports);
        for (const r of reports) archived.push(r.pkey);
        const kept = `texts-${ulid()}.parquet`;
        await fs.rename(file, path.join(runDir, kept));
        untexted.push({ key, file: kept });
      },
    );
    // Once every part is stored, all at once and in the ledger's order: each of its pages is
    // then rewritten once, not once per part that has a report on it.
    await rt.ledger.markArchived(archived.sort(byLedgerOrder));
    checkpoint.untexted.push(...untexted);
    checkpoint.parts += parts;
    checkpoint.staged = [];
    checkpoint.stagedReports = 0;
    await save();
    await Promise.all(files.map((f) => fs.rm(f, { force: true })));
  });

  /**
   * The ready texts of the parts archived so far (the answers' fast path; without them a part is
   * answered through the query engine, the same answer). A part merged away by compaction
   * meanwhile needs none: its successor was written with them.
   */
  const addReadyTexts = () => timed('readyTexts', async () => {
    await mapLimit(checkpoint.untexted, 2, async ({ key, file }) => {
      const local = path.join(runDir, file);
      const part = await rt.store.head(key);
      if (part && (await exists(local))) await publisher.upgrade(part, local, path.join(runDir, `${file}.ready`));
    });
    checkpoint.untexted = [];
    await save();
  });

  // What a crashed run staged is archived before anything else.
  await archiveStaged();

  progress?.start(format === 'geojson' ? 0 : stat.size);
  let index = 0;
  let batch: { index: number; record: unknown }[] = [];
  const flush = async () => {
    if (batch.length === 0) return;
    const receivedAt = new Date().toISOString();
    const rejects: { n: number; line: string }[] = [];
    const reject = (n: number, reasons: string[], input: unknown) => rejects.push({ n, line: `${JSON.stringify({ record: n + 1, reasons, input })}\n` });
    const valid: { index: number; record: unknown; ingest: IngestRecord }[] = [];
    for (const { index: n, record } of batch) {
      try {
        // Without a partner_city, the code of the city holding the point, which names it.
        const input = toPartnerInput(record, (lng, lat) => tagger.tag(lng, lat).instance_region_code);
        const report = parsePartnerReport(input, Date.now(), boundaries.placeNames);
        valid.push({
          index: n,
          record,
          ingest: { v: 1, pkey: pkeyOf(SOURCE, report.post_id, partner), source: SOURCE, post_id: report.post_id, received_at: receivedAt, ...(partner !== undefined && { partner }), report },
        });
      } catch (err) {
        if (!(err instanceof InvalidReportError || err instanceof RecordError)) throw err;
        reject(n, err instanceof InvalidReportError ? err.details.map((d) => `${d.field}: ${d.message}`) : [err.message], record);
      }
    }
    const outcomes = await rt.ledger.acceptHeld(
      valid.map((v) => v.ingest),
      Date.now() + HOLD_MS,
    );
    const rows: ArchiveRow[] = [];
    outcomes.forEach((outcome, i) => {
      const { index: n, record, ingest } = valid[i]!;
      if ('taken' in outcome) {
        reject(n, [`post_id: ${ingest.pkey} is a partner's report (accepted before post_ids were per partner); import as a partner with --partner NAME`], record);
        return;
      }
      if (outcome.created) {
        checkpoint.accepted += 1;
        rows.push(archiveRowOf(ingest, tagger.tag(ingest.report.location.lng, ingest.report.location.lat), boundaries.version));
      } else if ('held' in outcome && Date.parse(outcome.held.received_at) < runStartedMs) {
        // Accepted by an earlier run of this import that died before staging it: staged now.
        checkpoint.accepted += 1;
        rows.push(archiveRowOf(outcome.held, tagger.tag(outcome.held.report.location.lng, outcome.held.report.location.lat), boundaries.version));
      } else checkpoint.duplicate += 1;
    });
    checkpoint.rejected += rejects.length;
    // In record order, whichever step refused them.
    rejects.sort((a, b) => a.n - b.n);
    if (rejects.length > 0) await fs.appendFile(rejectsFile, rejects.map((r) => r.line).join(''));
    if (rows.length > 0) {
      const name = `stage-${String(checkpoint.processed).padStart(12, '0')}.parquet`;
      await writeParquet(rt.db, rows, path.join(runDir, name));
      checkpoint.staged.push(name);
      checkpoint.stagedReports += rows.length;
    }
    checkpoint.processed += batch.length;
    batch = [];
    await save();
    if (checkpoint.stagedReports >= ROUND_ROWS) await archiveStaged();
  };

  const started = performance.now();
  for await (const { record, bytes } of records(options.file, format)) {
    progress?.tick(bytes);
    if (index++ < resumedFrom) continue;
    batch.push({ index: index - 1, record });
    if (batch.length >= (options.batchSize ?? BATCH)) await flush();
  }
  await flush();
  seconds.accepting = (performance.now() - started) / 1000 - seconds.archiving;
  await archiveStaged();
  await addReadyTexts();
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
    seconds: { accepting: round(seconds.accepting), archiving: round(seconds.archiving), readyTexts: round(seconds.readyTexts) },
  };
}

/** The created_at range of the staged rows. */
async function rangeOf(db: DuckDb, files: readonly string[]): Promise<{ fromMs: number; toMs: number }> {
  return db.withConnection(async (conn) => {
    const list = files.map(sqlString).join(', ');
    const [row] = (await conn.runAndReadAll(`SELECT epoch_ms(min(created_at))::DOUBLE, epoch_ms(max(created_at))::DOUBLE FROM read_parquet([${list}])`)).getRows() as [number, number][];
    return { fromMs: row![0], toMs: row![1] };
  });
}

async function readCheckpoint(file: string): Promise<Partial<Checkpoint> & Omit<Checkpoint, 'v' | 'run' | 'staged' | 'stagedReports' | 'parts' | 'untexted'> | undefined> {
  try {
    return JSON.parse(await fs.readFile(file, 'utf8')) as Checkpoint;
  } catch {
    return undefined;
  }
}

/** Pkeys in the ledger's order (partner, then post_id). */
function byLedgerOrder(a: string, b: string): number {
  const x = parsePkey(a);
  const y = parsePkey(b);
  if (!x || !y) return a < b ? -1 : a > b ? 1 : 0;
  const [p, q] = [x.partner ?? '', y.partner ?? ''];
  return p < q ? -1 : p > q ? 1 : x.post_id - y.post_id;
}

const round = (s: number) => Math.round(s * 10) / 10;

async function exists(file: string): Promise<boolean> {
  return fs.stat(file).then(
    () => true,
    () => false,
  );
}

/** Written whole or not at all: a crash mid-write leaves the previous checkpoint. */
async function writeCheckpoint(file: string, checkpoint: Checkpoint): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  await fs.writeFile(tmp, JSON.stringify(checkpoint));
  await fs.rename(tmp, file);
}
