// The archive's ops commands: compaction, reconciliation, re-tagging, backfill, export and verification.
import { rmSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { ExportFormat } from '../../ops/exportWindow.js';
import type { ImportFormat } from '../../ops/importFile.js';
import { createProgress } from '../../ops/progress.js';
import { checkCheckpointFile, checkpointFileOf } from '../../ops/checkpointFile.js';
import { checkRejectsFile, rejectsFileOf } from '../../ops/rejectsFile.js';
import { checkNotCompressed } from '../../ops/importRecords.js';
import { checkFolderWritable, linkTarget, LinkLoopError } from '../../shared/files.js';
import { GENERATED_KEY_NAME, generatedKey } from '../../partners/apiKeys.js';
import { MAX_FUTURE_MS } from '../../partners/partnerReport.js';
import { common, deps, interruptible, windowOf, partnerOption, print, required, UsageError, window, withRuntime, type Command } from './options.js';
import { byCodeUnits } from '../../shared/byCodeUnits.js';

export const compact: Command = {
  summary: 'merge each closed day (and each closed hour of today) into one de-duplicated part (idempotent)',
  usage: 'compact [--from DATE] [--to DATE] [--json]',
  options: { ...common, ...window },
  run: ({ config, values }) => {
    // Options are checked before anything opens: a mistake is a usage error (2), never a store's (69).
    const now = Date.now();
    const span = windowOf(values, { fromMs: 0, toMs: now });
    return withRuntime(config, async (rt) => {
      // The purge after it too: a Ctrl-C there gives its lock back as well.
      const { result, purge } = await interruptible('compact', 'run it again: the days it merged and the reports it purged stand, the rest are done then', async () => {
        const result = await deps.compact(rt, { ...span, closedBeforeMs: deps.closedBefore(rt, now) }, values.json ? undefined : createProgress('compact'));
        // A purge running meanwhile (the scheduler's) purges what this one would: the compaction stands.
        const purge = await deps.purgeRetracted(rt).catch((err: unknown) => {
          if ((err as Error)?.name === 'PurgeRunningError') return { skipped: (err as Error).message };
          throw err;
        });
        return { result, purge };
      });
      print(values, { ...result, purge }, () =>
        `compacted ${result.daysCompacted} days and ${result.hoursCompacted} of ${result.hoursSeen} hours; removed ${result.partsRemoved} parts${result.straySidecarsRemoved > 0 ? ` and ${result.straySidecarsRemoved} sidecars left without their part` : ''}; ${result.rows} rows\n` +
        ('skipped' in purge
          ? `purge skipped: ${purge.skipped}`
          : `purged ${purge.purged} retracted reports (${purge.partsRewritten} parts rewritten; ${purge.waiting} still waiting to be archived${purge.setAsideRewritten > 0 ? `; ${purge.setAsideRewritten} webhook batches set aside rewritten without them` : ''})`),
      );
      return 0;
    });
  },
};

export const reconcile: Command = {
  summary: 're-enqueue accepted reports still pending',
  usage: 'reconcile [--older-than SECONDS] [--json]',
  options: { ...common, 'older-than': { type: 'string' } },
  run: ({ config, values }) => {
    const given = values['older-than'] as string | undefined;
    // Digits only: Number('') and Number(' ') are 0, which would re-enqueue every pending report.
    if (given !== undefined && !/^\d+(\.\d+)?$/.test(given)) throw new UsageError('--older-than must be a number of seconds');
    const seconds = given === undefined ? config.reconcileAfterSeconds : Number(given);
    return withRuntime(config, async (rt) => {
      const result = await rt.reconciler.run(seconds * 1000);
      print(values, result, () => `re-enqueued: ${result.requeued}`);
      return 0;
    });
  },
};

/**
 * The runtime of a bulk job (reprocess, import): it runs its parts' queries side by side, two
 * to eight at once, so each query gets one of DuckDB's threads. A second thread a query spent
 * more CPU than it saved on parts of a few thousand reports (docs/performance.md, "One DuckDB
 * thread a query in bulk jobs").
 */
export const BULK_JOB = { duckdbThreads: 1 };

export const reprocess: Command = {
  summary: 're-tag reports with the current boundaries and rewrite their hours',
  usage: 'reprocess --from DATE --to DATE [--dry-run] [--json]',
  options: { ...common, ...window, 'dry-run': { type: 'boolean' } },
  run: ({ config, values }) => {
    // A bad window is a usage error before anything opens, never a run that "stopped".
    const span = windowOf(values);
    return withRuntime(config, async (rt) => {
      const result = await interruptible('reprocess', 'run the same command again to finish (hours already re-tagged are left as they are)', () =>
        deps.reprocess(rt, { ...span, dryRun: values['dry-run'] === true }, values.json ? undefined : createProgress('reprocess')),
      ).catch((err: unknown) => {
        // The hours rewritten so far carry the new tags: a rerun finds them done and goes on
        // (unless it never started: a compaction or another reprocess holds the archive).
        if ((err as Error)?.name !== 'ReprocessRunningError') {
          process.stderr.write('reprocess stopped; run the same command again to finish (hours already re-tagged are left as they are)\n');
        }
        throw err;
      });
      print(values, result, () =>
        [
          `${result.dryRun ? 'would re-tag' : 're-tagged'} ${result.reports} reports with boundary version ${result.boundaryVersion}`,
          `city changes: ${result.cityChanges}; barangay changes: ${result.localAreaChanges}; hours rewritten: ${result.hoursRewritten} (answers unchanged in ${result.readyTextsKept}: their ready texts kept)`,
          result.dryRun
            ? `seconds re-tagging ${result.seconds.retagging} (a dry run: nothing written)`
            : `seconds re-tagging ${result.seconds.retagging} (answers carry the new tags from here), ready texts ${result.seconds.readyTexts}`,
          ...Object.entries(result.moves).map(([move, n]) => `  ${move}: ${n}`),
        ].join('\n'),
      );
      return 0;
    }, BULK_JOB);
  },
};

export const importCommand: Command = {
  summary: 'backfill from NDJSON, GeoJSON or CSV (partner bodies or CogniCity rows); idempotent, resumable',
  usage: 'import --file F [--partner NAME] [--format ndjson|geojson|csv] [--rejects F] [--checkpoint F] [--restart] [--json]',
  options: { ...common, file: { type: 'string' }, partner: { type: 'string' }, format: { type: 'string' }, rejects: { type: 'string' }, checkpoint: { type: 'string' }, restart: { type: 'boolean' } },
  run: async ({ config, values }) => {
    // Options are checked before anything opens: a mistake is a usage error (2), never a store's (69).
    const format = values.format as ImportFormat | undefined;
    if (format !== undefined && !['ndjson', 'geojson', 'csv'].includes(format)) throw new UsageError('--format must be ndjson, geojson or csv');
    const partner = partnerOption(values);
    const file = required(values, 'file');
    // A file that is not there is the command's mistake, not an import to resume.
    const stat = await fs.stat(file).catch(() => undefined);
    if (!stat) throw new UsageError(`--file ${file}: no such file`);
    if (!stat.isFile()) throw new UsageError(`--file ${file} is not a regular file (a folder, a pipe, a device such as /dev/stdin): an import reads its file by byte offsets, more than once; save the input to a file and name that`);
    if (values.rejects !== undefined) required(values, 'rejects');
    const stateFile = values.checkpoint === undefined ? checkpointFileOf(file) : required(values, 'checkpoint');
    const usage = (err: unknown) => {
      throw (err as Error)?.name === 'ImportInputError' ? new UsageError((err as Error).message) : err;
    };
    // Before the format is told from the name (`reports.ndjson.gz`), and before anything opens.
    await checkNotCompressed(file).catch(usage);
    await checkCheckpointFile(stateFile, file).catch(usage);
    await checkRejectsFile(typeof values.rejects === 'string' ? values.rejects : rejectsFileOf(file), [file, stateFile]).catch(usage);
    return withRuntime(config, async (rt) => {
      // Not refused: the service's API_KEYS may name it where this command's environment does not.
      const generated = partner === GENERATED_KEY_NAME && (await generatedKey(config.dataDir)) !== undefined;
      if (partner !== undefined && !generated && !config.apiKeys.some((k) => k.name === partner) && !(await rt.ledger.listKeys()).some((k) => k.name === partner)) {
        process.stderr.write(`warning: no API key named ${partner} is known here (API_KEYS, keys list): its reports are imported under that name, which only a key of that name reads back; a misspelt name is a partner of its own\n`);
      }
      const result = await interruptible('import', `run the same command again to resume from its checkpoint (${stateFile})`, () => deps
        .importFile(
          rt,
          {
            file,
            ...(format && { format }),
            ...(typeof values.rejects === 'string' && { rejectsFile: values.rejects }),
            stateFile,
            ...(partner !== undefined && { partner }),
            restart: values.restart === true,
          },
          values.json ? undefined : createProgress('import'),
        )
        .catch((err: unknown) => {
          const name = (err as Error)?.name;
          // The file or an option as given cannot be imported: running it again would not help.
          if (name === 'ImportInputError') throw new UsageError((err as Error).message);
          // Everything done so far is kept: the same command carries on from the checkpoint
          // (unless it never started: another import holds the archive or the data directory).
          if (name !== 'ImportRunningError') {
            process.stderr.write(`import stopped; run the same command again to resume from its checkpoint (${stateFile})\n`);
          }
          throw err;
        }));
      print(values, result, () =>
        `records: ${result.records}; accepted: ${result.accepted}; duplicate: ${result.duplicate}; rejected: ${result.rejected}` +
          (result.rejected > 0 ? ` (reasons in ${result.rejectsFile})` : '') +
          (result.resumedFrom > 0 ? `; resumed after record ${result.resumedFrom}` : '') +
          notReadLine(result.fieldsNotRead) +
          `\nparts written: ${result.parts}; seconds accepting ${result.seconds.accepting}, archiving ${result.seconds.archiving}, ready texts ${result.seconds.readyTexts}`,
      );
      return 0;
    }, BULK_JOB);
  },
};

/** The fields the valid records gave and the import did not read, most given first; nothing when none. */
function notReadLine(notRead: Record<string, number>): string {
  const names = Object.entries(notRead).sort(([a, m], [b, n]) => n - m || byCodeUnits(a, b));
  if (names.length === 0) return '';
  return `\nfields not read (imported without them; see docs/operations.md): ${names.map(([name, n]) => `${JSON.stringify(name)} in ${n}`).join(', ')}`;
}

export const exportCommand: Command = {
  summary: 'write an archive window to a file (parquet, csv or geojson)',
  usage: 'export --from DATE --to DATE --format parquet|csv|geojson --out F [--admin CODE (a city, province or region)] [--json]',
  options: { ...common, ...window, format: { type: 'string' }, out: { type: 'string' }, admin: { type: 'string' } },
  // It writes beside --out (its file, a Parquet export's pieces); DuckDB spills to TMP_DIR.
  diskFull: 'the disk holding --out (the export is written beside it) or TMP_DIR',
  run: async ({ config, values }) => {
    // Options are checked before anything opens: a mistake is a usage error (2), never a store's (69).
    const format = required(values, 'format') as ExportFormat;
    if (!['parquet', 'csv', 'geojson'].includes(format)) throw new UsageError('--format must be parquet, csv or geojson');
    if (values.admin !== undefined) required(values, 'admin');
    const { fromMs, toMs } = windowOf(values);
    const named = required(values, 'out');
    // A link is followed: the file it names is replaced (or made), the link kept (the export is renamed into place).
    const out = await linkTarget(named).catch((err: unknown) => {
      throw err instanceof LinkLoopError ? new UsageError(`--out ${err.message}`) : err;
    });
    // Checked before a row is read, whatever the format: a file goes only where a folder is.
    const folder = path.dirname(path.resolve(out));
    if (!(await fs.stat(folder).catch(() => undefined))?.isDirectory()) throw new UsageError(`--out ${named}: there is no folder ${path.dirname(out)} to write it in`);
    // The name as given too: /dev/stdout on a pipe links to a "pipe:[N]" that no path reaches.
    const existing = (await fs.stat(out).catch(() => undefined)) ?? (await fs.stat(named).catch(() => undefined));
    if (existing?.isDirectory()) throw new UsageError(`--out ${named} is a folder: name the file to write`);
    // A pipe, a device or a socket would be replaced by a file of that name (the export is written beside it, then renamed).
    if (existing && !existing.isFile()) throw new UsageError(`--out ${named} is not a regular file (a pipe, a device or a socket): name a file to write`);
    // The export is written beside --out: a folder it cannot write in is told before anything opens.
    await checkFolderWritable(folder).catch((err: NodeJS.ErrnoException) => {
      throw new UsageError(`--out ${named}: files cannot be made in ${path.dirname(out)} (${err.code ?? err.message}): name a file in another folder`);
    });
    return withRuntime(config, async (rt) => {
      let admin: readonly string[] | undefined;
      if (typeof values.admin === 'string') {
        const areas = (await rt.boundaries.current()).adminAreas;
        admin = areas.get(values.admin)?.cities;
        if (!admin) throw new UsageError(`--admin ${areas.problem(values.admin)}`);
      }
      const query = { startMs: fromMs, endMs: toMs, admin };
      // Renamed into place already, a signal stops the last step only (the folder's flush).
      let placed = false;
      const result = await interruptible(
        'export',
        () => (placed ? `the export was whole under --out already (${String(values.out)})` : 'nothing was written under --out; run the same command again'),
        () =>
          deps.exportWindow(rt, query, format, out, values.json ? undefined : createProgress('export'), () => {
            placed = true;
          }),
        () => {
          rmSync(deps.partialOf(out), { force: true });
          rmSync(deps.workDirOf(out), { recursive: true, force: true });
        },
      );
      print(values, result, () => `wrote ${result.bytes} bytes to ${String(values.out)}`);
      return 0;
    });
  },
};

export const verify: Command = {
  summary: 'accepted versus archived, per day; exits 1 on any loss, damaged part, report archived at another time, or retracted report the event log still shows; --repair records in the ledger the archived reports and retractions it does not know, and keeps a report archived on several days on the ledger\'s day alone',
  usage: 'verify [--from DATE] [--to DATE] [--repair] [--json]',
  options: { ...common, ...window, repair: { type: 'boolean' } },
  run: ({ config, values }) => {
    // Options are checked before anything opens: a mistake is a usage error (2), never a store's (69).
    // Up to the latest report the feed takes (an hour ahead), so a repair reaches those too.
    const span = windowOf(values, { fromMs: 0, toMs: Date.now() + MAX_FUTURE_MS });
    return withRuntime(config, async (rt) => {
      const result = await deps.verify(rt, { ...span, repair: values.repair === true }, values.json ? undefined : createProgress('verify'));
      const listed = (pkeys: readonly string[]) => (pkeys.length ? ` (${pkeys.slice(0, 20).join(', ')}${pkeys.length > 20 ? ', …' : ''})` : '');
      print(values, result, () =>
        [
          ...result.days.map((d) => `${d.day}  accepted ${d.accepted}  archived ${d.archived}  pending ${d.pending}  missing ${d.missing}`),
          `missing: ${result.missing.length}${listed(result.missing)}`,
          ...(result.damagedParts.length
            ? [`damaged parts (their bytes are not the ones written; their reports are counted missing, and neither checked nor repaired from): ${result.damagedParts.length}\n${result.damagedParts.map((p) => `  ${p.key}: ${p.reason}`).join('\n')}\n  restore each from a backup of the store (docs/operations.md, "Damaged parts")`]
            : []),
          values.repair
            ? `archived without an acceptance record: ${result.unexpected.length}; recorded in the ledger now: ${result.adopted}; not recorded: ${result.notAdopted.length}${listed(result.notAdopted)}`
            : `archived without an acceptance record: ${result.unexpected.length}${result.unexpected.length ? ' (verify --repair records them in the ledger)' : ''}`,
          values.repair
            ? `archived on another day than the ledger's, or on several: ${result.atAnotherTime.length}; now on the ledger's day alone: ${result.merged.length}; not merged (${result.mergeLockedOut ? `${result.mergeLockedOut}: run verify --repair again` : 'pending, or no copy on the ledger\'s day'}): ${result.notMerged.length}${listed(result.notMerged)}`
            : `archived on another day than the ledger's, or on several (answers show each): ${result.atAnotherTime.length}${result.atAnotherTime.length ? ' (verify --repair keeps the copy on the ledger\'s day)' : ''}${listed(result.atAnotherTime)}`,
          values.repair
            ? `tombstones whose retraction the ledger lacked: ${result.retractionsOnlyArchived.length}; recorded now: ${result.retractionsRecorded}`
            : `tombstones whose retraction the ledger lacks: ${result.retractionsOnlyArchived.length}${result.retractionsOnlyArchived.length ? ' (verify --repair records them)' : ''}${listed(result.retractionsOnlyArchived)}`,
          values.repair
            ? `retracted reports the event log still showed: ${result.retractionsShown.length}; retraction announced now: ${result.retractionsAnnounced}`
            : `retracted reports the event log still shows (the stream and CAP replay their fields): ${result.retractionsShown.length}${result.retractionsShown.length ? ' (verify --repair announces their retractions)' : ''}${listed(result.retractionsShown)}`,
          `reports stored in more than one part (until compaction): ${result.duplicatedInStorage}`,
          result.ok ? 'OK' : result.damagedParts.length ? 'DAMAGED PARTS FOUND' : result.missing.length ? 'LOSS FOUND' : result.atAnotherTime.length ? 'REPORTS ARCHIVED AT ANOTHER TIME' : 'RETRACTED REPORTS SHOWN',
        ].join('\n'),
      );
      return result.ok ? 0 : 1;
    });
  },
};
