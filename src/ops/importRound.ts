// An import's round: the reports it has staged (accepted and held in the ledger, tagged, in
// Parquet files in the run's folder) become parts in set operations (bulkParts.ts), each part
// stored with its stats sidecar and its reports written to the change log; then all of them are
// marked archived, and from here they are queryable. Their ready texts come after the last round.
import fs from 'node:fs/promises';
import path from 'node:path';
import { fsyncFile, writeDurably } from '../shared/files.js';
import { newUlid } from '../shared/ulid.js';
import { writeBulkParts } from '../archive/bulkParts.js';
import { sqlString, type DuckDb } from '../archive/duckdb.js';
import { releaseAll } from '../archive/duckdbMemory.js';
import { HOUR_MS } from '../archive/plan.js';
import { retagParts } from '../archive/retag.js';
import { closedBefore, DAY_MS, parsePkey, partitionOfPartKey } from '../store/layout.js';
import type { UntextedPart } from './importCheckpoint.js';
import { keepHeld } from './importHolds.js';
import type { ImportDeps, ImportRun } from './importRun.js';
import { archivedIn } from './verify.js';

type Report = { pkey: string; createdMs: number };

/** The staged reports as parts, then the checkpoint without them. */
export async function archiveStaged(run: ImportRun): Promise<void> {
  const { rt, checkpoint, runDir, holdMs } = run;
  if (checkpoint.staged.length === 0) return;
  run.stillHeld();
  // What accepting left behind goes before DuckDB sorts the staged rows (the import's peak).
  releaseAll();
  // A staged file gone (removed once the ledger had released all of it, before the checkpoint
  // said so; or swept long after the import stopped) holds nothing left to archive: its
  // reports are the worker's, queued by reconciliation once their hold ended.
  const present = await Promise.all(checkpoint.staged.map((name) => exists(path.join(runDir, name))));
  const gone = checkpoint.staged.filter((_, i) => !present[i]);
  if (gone.length > 0) rt.log.warn({ files: gone }, 'staged files gone: their reports are archived through the queue once their hold ends');
  checkpoint.staged = checkpoint.staged.filter((_, i) => present[i]);
  let files = checkpoint.staged.map((name) => path.join(runDir, name));
  const stood = checkpoint.roundFrom === undefined ? 0 : await settleStoppedRound(run, files);
  if (files.length === 0) {
    checkpoint.stagedReports = 0;
    delete checkpoint.stagedHeldUntilMs;
    await run.save();
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
    await run.save();
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
  await run.save();
  const parts = await writeBulkParts(
    rt.db,
    files,
    { closedBeforeMs: closedBefore(rt.config.flushIntervalSeconds), retracted, scratch: path.join(runDir, 'parts') },
    async ({ key, file, reports }) => {
      const current = await rt.boundaries.latest();
      run.boundaries = current;
      const retag = stagedVersions.some((v) => v !== current.version) ? current : undefined;
      if (retag) {
        const out = `${file}.retagged`;
        const done = await retagParts(rt.db, [file], (lng, lat) => retag.tagger.tag(lng, lat), retag.version, { fromMs: -Infinity, toMs: Infinity, dryRun: false }, out, async () => [...retracted]);
        if (done.changed) await fs.rename(out, file);
      }
      // Named in the checkpoint before it is stored: a run stopped mid-round finds whether it
      // stands, and marks its reports rather than storing them again.
      const kept = `texts-${newUlid()}.parquet`;
      await fs.rename(file, path.join(runDir, kept));
      await fsyncFile(path.join(runDir, kept));
      const named: UntextedPart = { key, file: kept, reports: reports.length };
      checkpoint.untexted.push(named);
      await run.save();
      // As a worker's flush: the part before the change log, the change log before "archived".
      // Its stats go with it; its ready texts once every report is queryable (see addReadyTexts).
      await run.publisher.publish(key, path.join(runDir, kept), { readyTexts: false });
      await rt.changes.record(reports);
      for (const r of reports) archived.push(r.pkey);
      named.stored = true;
      // The version its ready texts are built for: its reports are pending until the round ends, so no purge has rewritten it yet.
      named.etag = (await rt.store.head(key))?.etag;
      await run.save();
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
  await run.save();
  await Promise.all(files.map((f) => fs.rm(f, { force: true })));
}

/**
 * A round stopped part-way: of the parts it named, those that stand are logged and marked now
 * (their reports then left out of the round made again from the staged `files`); the others are
 * made again. How many stood, or were found merged under another key.
 */
async function settleStoppedRound(run: ImportRun, files: readonly string[]): Promise<number> {
  const { rt, checkpoint, runDir } = run;
  const named = checkpoint.untexted.splice(checkpoint.roundFrom!);
  const standing: UntextedPart[] = [];
  /** Reports of parts not under their keys that the archive holds all the same (pushed one by one: a day's part can hold more than a call's arguments). */
  const merged: Report[] = [];
  for (const p of named) {
    // Known stored (a compaction since may have merged it under another key), or found; its
    // version as this run stored it (its reports still pending, no purge has rewritten it).
    const found = p.stored === true && p.etag !== undefined ? undefined : await rt.store.head(p.key);
    const stands = p.stored === true || found !== undefined;
    const local = path.join(runDir, p.file);
    if (!stands) {
      // Never stored, or stored by a run stopped before its checkpoint said so and merged
      // since under another key (a compaction, a reprocess): the archive tells which.
      for (const r of await archivedOf(rt, await partReports(rt.db, local, p.key, files))) merged.push(r);
      await fs.rm(local, { force: true });
      continue;
    }
    let etag = p.etag ?? found?.etag;
    // Its local copy swept since: fetched back while the part is still under its key.
    if (!(await exists(local))) {
      const got = await rt.store.get(p.key);
      if (!got) {
        // Merged since under another key, its copy gone too: its reports from the staged files.
        for (const r of await archivedOf(rt, await partReports(rt.db, local, p.key, files))) merged.push(r);
        continue;
      }
      // Beside it, then renamed: a run stopped mid-write leaves no torn copy for the next to read.
      await writeDurably(`${local}.tmp`, 'w', got.body);
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
  delete checkpoint.roundFrom;
  return standing.length + merged.length;
}

const exists = (file: string) => fs.access(file).then(() => true, () => false);

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

/**
 * A part's reports: those of its local copy, or, when that is gone, the staged reports of its
 * hour or day (a superset: those the archive holds are marked, the rest stored).
 */
async function partReports(db: DuckDb, local: string, key: string, staged: readonly string[]): Promise<Report[]> {
  if (await exists(local)) return reportsIn(db, [local]);
  const partition = partitionOfPartKey(key);
  if (!partition || staged.length === 0) return [];
  return reportsIn(db, staged, { fromMs: partition.startMs, toMs: partition.startMs + (partition.wholeDay ? DAY_MS : HOUR_MS) - 1 });
}

/** Those of `reports` the archive holds now, in whatever part. */
async function archivedOf(rt: Pick<ImportDeps, 'store' | 'cache' | 'db'>, reports: readonly Report[]): Promise<Report[]> {
  if (reports.length === 0) return [];
  let fromMs = Infinity;
  let toMs = -Infinity;
  for (const r of reports) [fromMs, toMs] = [Math.min(fromMs, r.createdMs), Math.max(toMs, r.createdMs)];
  const there = await archivedIn(rt, fromMs, toMs);
  return reports.filter((r) => there.has(r.pkey));
}

/** The reports the part files hold (pkey and created_at), as a change log names them; `within`: those created then. */
async function reportsIn(db: DuckDb, files: readonly string[], within?: { fromMs: number; toMs: number }): Promise<Report[]> {
  const where = within ? ` WHERE epoch_ms(created_at) BETWEEN ${Math.trunc(within.fromMs)} AND ${Math.trunc(within.toMs)}` : '';
  return db.withConnection(async (conn) => {
    const reader = await conn.runAndReadAll(`SELECT pkey, epoch_ms(created_at)::DOUBLE AS createdMs FROM read_parquet([${files.map(sqlString).join(', ')}])${where}`);
    return reader.getRowObjectsJS() as Report[];
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
