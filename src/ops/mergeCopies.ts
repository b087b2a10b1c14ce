// Merging a report archived on several days (`verify --repair`): its copy on the day the ledger
// gives it stays, and its copies on other days are taken out of their parts. Compaction merges a
// day's copies only, so such copies (a partner's re-post of a report a restored ledger had lost,
// dated another day) would otherwise be answered at each time for good, and a retraction would
// purge only the ledger's day. The ledger's copy is the one a repeat and a DELETE name, and the
// one a same-day merge keeps (the newest).
//
// The parts are rewritten in place, as a purge rewrites them, holding the compaction's lock (a
// compaction's, a reprocess's) and the purge's: no other job rewrites or merges those parts
// meanwhile; the worker and an import write only new parts. Each part is published whole (its
// sidecars first), so a run stopped part-way leaves copies a later verify finds and merges; a part
// left empty is retired after RETIRE_GRACE_SECONDS, as compaction retires what it merged, so an
// answer that listed it still reads it. A change log names each merged report at its kept time
// before any part changes: a mirror syncing by `updated_after` upserts the kept copy by pkey over
// whichever one it held. The event log announces a kept copy again where the archived event it
// holds for the report is of another copy (the copy announced first may be the one taken out, and
// CAP, the stream and webhooks would go on showing it), before any part changes (a run stopped
// part-way announces it next time); never a retracted report's. Another job holding a lock:
// nothing is merged, and the reports are listed as not merged (the next run merges them).
import fs from 'node:fs/promises';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { LIST, VARCHAR, listValue } from '@duckdb/node-api';
import type { ChangeLog } from '../archive/changes.js';
import { sqlString, type DuckDb } from '../archive/duckdb.js';
import type { PartCache } from '../archive/partCache.js';
import { listWindowParts } from '../archive/partListing.js';
import { retireAfter, storePartPublisher } from '../archive/partPublisher.js';
import { eachRowOf } from '../archive/readRows.js';
import type { ArchiveRow } from '../archive/schema.js';
import type { EventFeed } from '../events/events.js';
import { featureOf } from '../events/feature.js';
import type { ReportLookup } from '../ledger/ledger.js';
import type { Config } from '../shared/config.js';
import type { Logger } from '../shared/log.js';
import { COMPACTION_LOCK_KEY, DAY_MS, PURGE_LOCK_KEY } from '../store/layout.js';
import type { ObjectInfo, ObjectStore } from '../store/objectStore.js';
import { mapLimit } from './concurrency.js';
import { withStoreLock } from './storeLock.js';

export interface MergeDeps {
  ledger: Pick<ReportLookup, 'lookup'>;
  store: ObjectStore;
  cache: Pick<PartCache, 'withFiles'>;
  db: DuckDb;
  changes: Pick<ChangeLog, 'record'>;
  /** The event log: announces the kept copies. */
  feed: Pick<EventFeed, 'superseded' | 'archivedReport'>;
  config: Pick<Config, 'dataDir' | 'retireGraceMs'>;
  /** Told of a sidecar that could not be built (storeSidecars.ts). */
  log: Pick<Logger, 'warn'>;
}

export interface MergeResult {
  /** Now held on the ledger's day alone (within the windows merged). */
  merged: string[];
  /** Left as they are: still pending, unknown to the ledger, with no copy on the ledger's day, or all of them while another job held a lock. */
  notMerged: string[];
  /** Why nothing was merged: another job (a compaction, a reprocess, a purge) held a lock. */
  lockedOut?: string;
  partsRewritten: number;
}

/** Another job rewrites parts (a compaction, a reprocess, a purge): the merge waits for the next run. */
export class MergeRunningError extends Error {
  override name = 'MergeRunningError';
}

/** The condition a rewrite takes rows out by. */
const DROPPED = 'list_contains($pkeys, pkey)';

/**
 * Takes out of the parts of `windows` (where verify found them) the copies of `pkeys` dated
 * another day than the ledger's, for each report whose ledger day holds a copy (see the file's head).
 */
export async function mergeCopies(rt: MergeDeps, pkeys: readonly string[], windows: readonly { fromMs: number; toMs: number }[]): Promise<MergeResult> {
  const result: MergeResult = { merged: [], notMerged: [], partsRewritten: 0 };
  if (pkeys.length === 0) return result;
  const entries = await mapLimit(pkeys, 16, (pkey) => rt.ledger.lookup(pkey));
  /** Each report's ledger day (days since the epoch), and its time there. */
  const ledgerDay = new Map<string, { day: number; createdMs: number }>();
  /** Merged, never announced: the event log may no longer know of their retraction (pruned, or never told). */
  const retracted = new Set<string>();
  pkeys.forEach((pkey, i) => {
    const entry = entries[i];
    // Still pending: the worker may write it yet, on the ledger's day.
    if (!entry || entry.pending) result.notMerged.push(pkey);
    else ledgerDay.set(pkey, { day: Math.floor(entry.createdMs / DAY_MS), createdMs: entry.createdMs });
    if (entry?.state === 'retracted') retracted.add(pkey);
  });
  const lock = (key: string, what: string) => ({ store: rt.store, key, what, log: rt.log, errors: { running: (m: string) => new MergeRunningError(m), lost: (m: string) => new MergeRunningError(m) } });
  const retired = retireAfter(storePartPublisher(rt), rt.config.retireGraceMs);
  const merging = withStoreLock(lock(COMPACTION_LOCK_KEY, 'merge of copies'), (compactionHeld) =>
    withStoreLock(lock(PURGE_LOCK_KEY, 'merge of copies'), async (purgeHeld) => {
      const stillHeld = () => (compactionHeld(), purgeHeld());
      const kept = await keptCopies(rt, ledgerDay);
      const held = new Set(kept.map((r) => r.pkey));
      for (const pkey of [...ledgerDay.keys()]) {
        if (held.has(pkey)) continue;
        ledgerDay.delete(pkey);
        result.notMerged.push(pkey);
      }
      if (ledgerDay.size === 0) return;
      stillHeld();
      await rt.changes.record([...ledgerDay].map(([pkey, { createdMs }]) => ({ pkey, createdMs })));
      await rt.feed.superseded(await toAnnounce(rt, kept.filter((r) => r.status !== 'retracted' && !retracted.has(r.pkey))));
      const tmpDir = path.join(rt.config.dataDir, 'tmp', 'merge');
      await fs.mkdir(tmpDir, { recursive: true });
      for (const { fromMs, toMs } of windows) {
        for (const [part, dropped] of await copiesElsewhere(rt, ledgerDay, fromMs, toMs)) {
          await dropFrom(rt, part, dropped, tmpDir, stillHeld, retired);
          result.partsRewritten += 1;
        }
      }
      // Before the locks go: no compaction merges a part this run has yet to retire.
      await retired.settle();
      result.merged.push(...ledgerDay.keys());
    }),
  );
  try {
    await merging;
  } catch (err) {
    if (!(err instanceof MergeRunningError) || result.merged.length > 0 || result.partsRewritten > 0) throw err;
    result.lockedOut = err.message;
    result.notMerged.push(...ledgerDay.keys());
  }
  result.merged.sort();
  result.notMerged.sort();
  return result;
}

/** The copies dated the ledger's day its parts hold (as answers read them), of those reports that have one: the ones kept. */
async function keptCopies(rt: Pick<MergeDeps, 'store' | 'cache' | 'db'>, ledgerDay: ReadonlyMap<string, { day: number }>): Promise<ArchiveRow[]> {
  const byDay = new Map<number, string[]>();
  for (const [pkey, { day }] of ledgerDay) byDay.set(day, [...(byDay.get(day) ?? []), pkey]);
  const kept: ArchiveRow[] = [];
  for (const [day, pkeys] of byDay) {
    const dayMs = day * DAY_MS;
    const parts = (await listWindowParts(rt.store, dayMs, dayMs + DAY_MS - 1)).flatMap((p) => p.parts);
    if (parts.length === 0) continue;
    await rt.cache.withFiles(parts, (files) =>
      eachRowOf(rt.db, files, pkeys, 500, async (rows) => {
        kept.push(...rows.filter((r) => Math.floor(r.created_at_ms / DAY_MS) === day));
      }),
    );
  }
  return kept;
}

/**
 * Of the kept copies, those whose report's archived event in the log is of another copy: the
 * others were announced as they are, or their events are gone with the log's retention (a repair
 * of old reports tells subscribers nothing they still hold).
 */
async function toAnnounce(rt: Pick<MergeDeps, 'feed'>, kept: readonly ArchiveRow[]): Promise<ArchiveRow[]> {
  const announced = await mapLimit(kept, 16, async (row) => rt.feed.archivedReport(row.pkey));
  return kept.filter((row, i) => announced[i] !== undefined && JSON.stringify(announced[i]!.feature) !== JSON.stringify(featureOf(row)));
}

/** The parts of [fromMs, toMs] holding copies of these reports dated another day than the ledger's, each with those reports. */
async function copiesElsewhere(rt: Pick<MergeDeps, 'store' | 'cache' | 'db'>, ledgerDay: ReadonlyMap<string, { day: number }>, fromMs: number, toMs: number): Promise<Map<ObjectInfo, string[]>> {
  const parts = (await listWindowParts(rt.store, fromMs, toMs)).flatMap((p) => p.parts);
  const out = new Map<ObjectInfo, string[]>();
  for (const row of await rowsOf(rt, parts, [...ledgerDay.keys()])) {
    if (row.day === ledgerDay.get(row.pkey)!.day) continue;
    out.set(row.part, [...new Set([...(out.get(row.part) ?? []), row.pkey])]);
  }
  return out;
}

/** The rows of these reports in these parts: which part, which report, which day (days since the epoch). */
async function rowsOf(rt: Pick<MergeDeps, 'cache' | 'db'>, parts: readonly ObjectInfo[], pkeys: readonly string[]): Promise<{ part: ObjectInfo; pkey: string; day: number }[]> {
  if (parts.length === 0 || pkeys.length === 0) return [];
  return rt.cache.withFiles(parts, (files) =>
    rt.db.withConnection(async (conn) => {
      const reader = await conn.runAndReadAll(
        `SELECT filename, pkey, (epoch_ms(created_at) // ${DAY_MS})::INTEGER FROM read_parquet([${files.map(sqlString).join(', ')}], filename = true) WHERE ${DROPPED}`,
        { pkeys: listValue([...pkeys]) },
        { pkeys: LIST(VARCHAR) },
      );
      const [names, keys, days] = reader.getColumnsJS() as [string[], string[], number[]];
      const partOf = new Map(files.map((file, i) => [file, parts[i]!]));
      return names.map((name, i) => ({ part: partOf.get(name)!, pkey: keys[i]!, day: days[i]! }));
    }),
  );
}

/**
 * Rewrites the part without these reports' rows (its other rows as they were, in the same order);
 * retires it (after the grace) if none are left. `stillHeld` throws once a lock is another's.
 */
async function dropFrom(rt: MergeDeps, part: ObjectInfo, pkeys: readonly string[], tmpDir: string, stillHeld: () => void, retired: { retire(keys: readonly string[]): void }): Promise<void> {
  const out = path.join(tmpDir, `${randomUUID()}.parquet`);
  const publisher = storePartPublisher(rt);
  try {
    const left = await rt.cache.withFiles([part], ([file]) =>
      rt.db.withConnection(async (conn) => {
        const values = { pkeys: listValue([...pkeys]) };
        const types = { pkeys: LIST(VARCHAR) };
        const from = `read_parquet(${sqlString(file!)}) WHERE NOT ${DROPPED}`;
        const count = await conn.runAndReadAll(`SELECT count(*)::INTEGER FROM ${from}`, values, types);
        const n = Number(count.getColumnsJS()[0]?.[0] ?? 0);
        if (n > 0) await conn.run(`COPY (SELECT * FROM ${from} ORDER BY created_at DESC, pkey DESC) TO ${sqlString(out)} (FORMAT parquet, COMPRESSION zstd)`, values, types);
        return n;
      }),
    );
    stillHeld();
    if (left === 0) retired.retire([part.key]);
    else await publisher.publish(part.key, out);
  } finally {
    await fs.rm(out, { force: true });
  }
}
