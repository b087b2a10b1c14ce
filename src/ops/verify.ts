// Verify: what the ledger accepted against what is archived (distinct pkeys in the parts), per
// UTC day, a block of days at a time; the ledger is read once for the whole window (see
// acceptedSpill.ts). Any accepted report that is neither archived nor still pending is a loss.
// It also finds what answers would show wrong: a report archived on more than one day, or on a day
// other than the ledger's (compaction merges a day's copies only), and a tombstone whose
// retraction the ledger lacks. With `repair`, archived reports the ledger does not know are
// recorded in it from their rows, the retractions only the archive kept are recorded again, and
// a report archived at another time keeps its copy on the ledger's day alone (mergeCopies.ts).
// It also finds retracted reports the event log still shows, and its repair announces their
// retractions (retractionsShown.ts).
import path from 'node:path';
import type { PartCache } from '../archive/partCache.js';
import { listWindowParts } from '../archive/partListing.js';
import { sqlString, type DuckDb } from '../archive/duckdb.js';
import { eachRowOf } from '../archive/readRows.js';
import { archivedRecordOf } from '../ingest/archiveRow.js';
import { ADOPTED_RETRACTION_REASON, type LedgerEntry, type LedgerRepair, type PendingLedger, type ReportLookup, type RetractionLedger } from '../ledger/ledger.js';
import type { ObjectInfo, ObjectStore } from '../store/objectStore.js';
import { DAY_MS, partitionOfPartKey, REPORTS_PREFIX } from '../store/layout.js';
import type { Config } from '../shared/config.js';
import { AcceptedSpill } from './acceptedSpill.js';
import { mapLimit } from './concurrency.js';
import { mergeCopies, type MergeDeps } from './mergeCopies.js';
import type { Progress } from './progress.js';
import { announceShown, ANNOUNCE_SETTLE_MS, retractionsShown, type ShownFeed } from './retractionsShown.js';
import { byCodeUnits } from '../shared/byCodeUnits.js';

/**
 * What verify uses: the ledger's acceptances (and its lookup, for a report archived after they
 * were read), the parts, the query engine, the data dir whose tmp/verify holds the acceptances
 * read; for a repair's merges, the change log, the event log and a log for sidecars that could not be built.
 */
export interface VerifyDeps extends Pick<MergeDeps, 'changes' | 'log'> {
  ledger: Pick<PendingLedger, 'accepted'> & Pick<ReportLookup, 'lookup'> & Pick<LedgerRepair, 'adoptArchived'> & Pick<RetractionLedger, 'retract' | 'markPurged' | 'retractions'>;
  feed: MergeDeps['feed'] & ShownFeed;
  store: ObjectStore;
  cache: Pick<PartCache, 'withFiles'>;
  db: DuckDb;
  config: Pick<Config, 'dataDir' | 'retireGraceMs'>;
}

export interface DayReport {
  day: string;
  accepted: number;
  archived: number;
  pending: number;
  missing: number;
}

export interface VerifyResult {
  days: DayReport[];
  /** Accepted, not pending, not in the archive. */
  missing: string[];
  /** In the archive without an entry in the ledger (found so; with `repair`, recorded since unless listed in `notAdopted`). */
  unexpected: string[];
  /** With `repair`: of `unexpected`, those recorded in the ledger now. */
  adopted: number;
  /** With `repair`: of `unexpected`, those not recorded (taken meanwhile by a live post of the same report, or a key another report keeps). */
  notAdopted: string[];
  /**
   * Archived on more than one day, or on a day other than the one the ledger gives: answers show
   * such a report at each of its times, and no compaction merges them (a live post of a report the
   * ledger did not know yet, during a repair, is one way). A failure, as a loss is.
   */
  atAnotherTime: string[];
  /** With `repair`: of `atAnotherTime`, those now held on the ledger's day alone within the window (copies elsewhere taken out). */
  merged: string[];
  /** With `repair`: of `atAnotherTime`, those left as they are (still pending, no copy on the ledger's day, or all while `mergeLockedOut`). */
  notMerged: string[];
  /** With `repair`: why none was merged, another job holding the archive (a later run merges them). */
  mergeLockedOut?: string;
  /** Tombstones in the archive of reports the ledger holds confirmed: retracted after the backup the ledger was restored from. */
  retractionsOnlyArchived: string[];
  /** With `repair`: of `retractionsOnlyArchived`, those whose retraction is recorded in the ledger now. */
  retractionsRecorded: number;
  /**
   * Retracted reports the event log still shows (their archived event, personal fields and all, in
   * the stream and CAP): an event log restored from an older backup, or an announcement that failed.
   * A failure until repaired.
   */
  retractionsShown: string[];
  /** With `repair`: of `retractionsShown`, those whose retraction it announced (their archived events gone; the others were taken out meanwhile). */
  retractionsAnnounced: number;
  /** pkeys stored in more than one part (normal until compaction). */
  duplicatedInStorage: number;
  /**
   * Parts whose bytes are not the ones sealed when they were written (partSeal.ts): a disk's
   * damage. Their rows are read by no check (their reports show as missing) and by no repair. A
   * failure until each is restored from a backup.
   */
  damagedParts: { key: string; reason: string }[];
  /** Nothing lost, no part damaged, no report archived at another time, no retracted report shown (after a repair: none left unmerged or shown). */
  ok: boolean;
}

/** Days checked at once: what is held is one block's pkeys, whatever the window (a year held whole took 1.7 GB). */
const BLOCK_MS = 31 * DAY_MS;
/** Blocks are counted from the epoch, so a report's block is known before the window's first report is. */
const blockOf = (ms: number): number => Math.floor(ms / BLOCK_MS);
/** Ledger lookups in flight while the archive's reports the read did not have are checked. */
const LOOKUPS_IN_FLIGHT = 16;

/** Reports a repair records at once, as it reads them from the parts (a block's whole, after a ledger was lost, held 740 MB). */
const REPAIRED_AT_ONCE = 10_000;

/** Who a repair's retractions (of tombstones it records) are by. */
const REPAIR_BY = 'ops:repair';

export async function verify(
  rt: VerifyDeps,
  /** `announceSettleMs`: how old a retraction must be to be looked for in the event log (ANNOUNCE_SETTLE_MS). */
  options: { fromMs: number; toMs: number; repair?: boolean; announceSettleMs?: number },
  progress?: Progress,
): Promise<VerifyResult> {
  const result: VerifyResult = {
    days: [],
    missing: [],
    unexpected: [],
    adopted: 0,
    notAdopted: [],
    atAnotherTime: [],
    merged: [],
    notMerged: [],
    retractionsOnlyArchived: [],
    retractionsRecorded: 0,
    retractionsShown: [],
    retractionsAnnounced: 0,
    duplicatedInStorage: 0,
    damagedParts: [],
    ok: true,
  };
  const startedMs = Date.now();
  // The ledger first, once for the whole window; the parts after it, block by block: a report
  // the ledger no longer had pending was durable in a part by then (listed first, a report
  // archived meanwhile would be in no part listed: a "loss").
  // Under DATA_DIR/tmp/verify: the leftover sweep keeps a job's files there for a day (a verify
  // of years on S3 runs for hours) and removes a killed run's.
  const dayNumbers = new DayNumbers();
  /** The blocks that hold a copy at another time: where a repair's merge looks for them. */
  const blocksAtAnotherTime: { fromMs: number; toMs: number }[] = [];
  const accepted = await AcceptedSpill.write(rt.ledger.accepted(options.fromMs, options.toMs), blockOf, path.join(rt.config.dataDir, 'tmp'));
  try {
    const startMs = await firstToCheck(rt.store, options, accepted.earliestMs);
    const [first, last] = [blockOf(startMs), blockOf(options.toMs)];
    progress?.start(startMs > options.toMs ? 0 : last - first + 1);
    for (let block = first; startMs <= options.toMs && block <= last; block++) {
      const fromMs = Math.max(startMs, block * BLOCK_MS);
      const toMs = Math.min(options.toMs, (block + 1) * BLOCK_MS - 1);
      const inBlock = await accepted.block(block);
      const atAnotherTimeBefore = result.atAnotherTime.length;
      const { pkeys: archived, duplicated, tombstones, damaged } = await archivedInBlock(rt, fromMs, toMs);
      result.duplicatedInStorage += duplicated;
      result.damagedParts.push(...damaged);
      const byDay = new Map<string, DayReport>();
      const dayOf = (d: string) => byDay.get(d) ?? byDay.set(d, { day: d, accepted: 0, archived: 0, pending: 0, missing: 0 }).get(d)!;
      for (const [pkey, { day, pending }] of inBlock) {
        const r = dayOf(day);
        r.accepted += 1;
        const archivedDay = archived.get(pkey);
        if (archivedDay !== undefined) {
          r.archived += 1;
          if (archivedDay !== dayNumbers.of(day)) result.atAnotherTime.push(pkey);
        } else if (pending) r.pending += 1;
        else {
          r.missing += 1;
          result.missing.push(pkey);
        }
      }
      // A loop, not push(...): after a ledger is lost, a block's strangers are its every report, past what a call's arguments hold.
      const { strangers, elsewhere } = await notInLedger(rt.ledger, [...archived.keys()].filter((pkey) => !inBlock.has(pkey)));
      for (const pkey of strangers) result.unexpected.push(pkey);
      // Known, though not created in this block by the ledger's read: archived at another time, unless accepted since.
      for (const entry of elsewhere) if (Math.floor(entry.createdMs / DAY_MS) !== archived.get(entry.pkey)) result.atAnotherTime.push(entry.pkey);
      // Unknown, and on several days: at another time whatever day a repair records it at.
      for (const pkey of strangers) if (archived.get(pkey) === SEVERAL_DAYS) result.atAnotherTime.push(pkey);
      if (result.atAnotherTime.length > atAnotherTimeBefore) blocksAtAnotherTime.push({ fromMs, toMs });
      if (options.repair && strangers.length > 0) {
        const adopted = await adoptStrangers(rt, fromMs, toMs, strangers);
        result.adopted += adopted.size;
        for (const pkey of strangers) if (!adopted.has(pkey)) result.notAdopted.push(pkey);
      }
      // Those looked up above are known by their entries already; strangers are adopted with their state.
      const strange = new Set(strangers);
      const known = new Map(elsewhere.map((entry) => [entry.pkey, entry]));
      const unrecorded = await confirmedInLedger(rt.ledger, tombstones.filter((pkey) => !strange.has(pkey)), known);
      for (const pkey of unrecorded) result.retractionsOnlyArchived.push(pkey);
      if (options.repair) result.retractionsRecorded += await recordRetractions(rt.ledger, unrecorded);
      result.days.push(...[...byDay.values()].sort((a, b) => byCodeUnits(a.day, b.day)));
      progress?.tick();
    }
  } finally {
    await accepted.remove();
  }
  progress?.stop();
  result.missing.sort();
  result.unexpected.sort();
  result.notAdopted.sort();
  result.atAnotherTime = [...new Set(result.atAnotherTime)].sort();
  result.retractionsOnlyArchived.sort();
  // After the blocks: a report's copies may lie in several, and those adopted above are known now.
  if (options.repair) {
    const merge = await mergeCopies(rt, result.atAnotherTime, blocksAtAnotherTime);
    Object.assign(result, { merged: merge.merged, notMerged: merge.notMerged }, merge.lockedOut !== undefined && { mergeLockedOut: merge.lockedOut });
  }
  // After the blocks, whose repair may have recorded retractions (announced as they were).
  const shown = await retractionsShown(rt.ledger, rt.feed, options, startedMs - (options.announceSettleMs ?? ANNOUNCE_SETTLE_MS));
  result.retractionsShown = shown.map((r) => r.pkey).sort();
  if (options.repair) result.retractionsAnnounced = await announceShown(rt.feed, shown);
  const atAnotherTimeLeft = options.repair ? result.notMerged : result.atAnotherTime;
  // A repair announces every one (or finds it taken out meanwhile), or throws.
  result.ok = result.missing.length === 0 && result.damagedParts.length === 0 && atAnotherTimeLeft.length === 0 && (options.repair || result.retractionsShown.length === 0);
  return result;
}

/** UTC days (as the ledger's read gives them) as days since the epoch, each parsed once. */
class DayNumbers {
  private readonly numbers = new Map<string, number>();
  of(day: string): number {
    let n = this.numbers.get(day);
    if (n === undefined) this.numbers.set(day, (n = Date.parse(`${day}T00:00:00Z`) / DAY_MS));
    return n;
  }
}

/**
 * Of the archive's reports the ledger's read did not have, those the ledger does not know now
 * (`strangers`), and the entries of those it does (`elsewhere`): one accepted and archived after
 * the read (a verify of a live system) is no stranger, and one the ledger created in another block
 * is archived at another time.
 */
async function notInLedger(ledger: Pick<ReportLookup, 'lookup'>, pkeys: readonly string[]): Promise<{ strangers: string[]; elsewhere: LedgerEntry[] }> {
  const entries = await mapLimit(pkeys, LOOKUPS_IN_FLIGHT, (pkey) => ledger.lookup(pkey));
  return { strangers: pkeys.filter((_, i) => entries[i] === undefined), elsewhere: entries.filter((e): e is LedgerEntry => e !== undefined) };
}

/**
 * Of the pkeys of the archive's tombstones, those the ledger knows and holds confirmed (a
 * retraction is recorded before its purge makes the tombstone); `known` entries are not looked up again.
 */
async function confirmedInLedger(ledger: Pick<ReportLookup, 'lookup'>, pkeys: readonly string[], known: ReadonlyMap<string, LedgerEntry>): Promise<string[]> {
  const entries = await mapLimit(pkeys, LOOKUPS_IN_FLIGHT, async (pkey) => known.get(pkey) ?? (await ledger.lookup(pkey)));
  return pkeys.filter((_, i) => entries[i]?.state === 'confirmed');
}

/**
 * Records the retraction of reports the archive holds as tombstones, purged already (the purge
 * leaves their parts alone): a partner's repeat is answered as retracted again. No event is sent:
 * the retraction's was, when it was made.
 */
async function recordRetractions(ledger: Pick<RetractionLedger, 'retract' | 'markPurged'>, pkeys: readonly string[]): Promise<number> {
  const retracted = await mapLimit(pkeys, LOOKUPS_IN_FLIGHT, async (pkey) => ((await ledger.retract(pkey, REPAIR_BY, ADOPTED_RETRACTION_REASON)).found ? pkey : undefined));
  const recorded = retracted.filter((pkey): pkey is string => pkey !== undefined);
  await ledger.markPurged(recorded);
  return recorded.length;
}

/**
 * Where checking starts: the window's start, or where the ledger's earliest report or the
 * archive's earliest year begins if later (a verify of everything, from 1970, lists no parts
 * of the decades before). After the window's end: nothing to check.
 */
async function firstToCheck(store: Pick<ObjectStore, 'list'>, options: { fromMs: number; toMs: number }, earliestAcceptedMs: number | undefined): Promise<number> {
  if (options.toMs - options.fromMs < BLOCK_MS) return options.fromMs;
  const archived = await earliestArchivedYear(store);
  return Math.max(options.fromMs, Math.min(earliestAcceptedMs ?? Infinity, archived ?? Infinity, options.toMs + 1));
}

/** The start of the earliest year a part is stored under: the first key listed (keys list in order; a year is four digits). */
async function earliestArchivedYear(store: Pick<ObjectStore, 'list'>): Promise<number | undefined> {
  for await (const info of store.list({ prefix: REPORTS_PREFIX })) {
    const partition = partitionOfPartKey(info.key);
    if (partition) return Date.UTC(new Date(partition.startMs).getUTCFullYear(), 0, 1);
  }
  return undefined;
}

/** Parts a block's read may find retired (compaction, a purge) since they were listed: listed again. */
const READ_ATTEMPTS = 3;

/** `read` of the parts of [fromMs, toMs] as listed now; listed again and read again should it find one retired. */
async function fromListedParts<T>(store: ObjectStore, fromMs: number, toMs: number, read: (parts: ObjectInfo[]) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const parts = (await listWindowParts(store, fromMs, toMs)).flatMap((h) => h.parts);
    try {
      return await read(parts);
    } catch (err) {
      if (attempt >= READ_ATTEMPTS) throw err;
    }
  }
}

/** What a block's parts hold: each pkey's day (days since the epoch; -1 when on several), how many are stored twice, the tombstones' pkeys. */
interface ArchivedBlock {
  pkeys: Map<string, number>;
  duplicated: number;
  tombstones: string[];
  /** Parts left out, their bytes not the ones sealed (partSeal.ts): key and why. */
  damaged: { key: string; reason: string }[];
}

/** The distinct pkeys the parts of [fromMs, toMs] hold, each with its day, how many are stored twice, and which are tombstones. */
function archivedInBlock(rt: Pick<VerifyDeps, 'store' | 'cache' | 'db'>, fromMs: number, toMs: number): Promise<ArchivedBlock> {
  return fromListedParts(rt.store, fromMs, toMs, (parts) => archivedPkeys(rt, parts, fromMs, toMs));
}

/**
 * Records in the ledger the reports of `pkeys` the parts of [fromMs, toMs] hold, as the archive
 * answers them (the newest copy of each), a batch at a time; returns those recorded (a read
 * again after a part was retired keeps what the first recorded: known by then, not recorded twice).
 */
async function adoptStrangers(rt: Pick<VerifyDeps, 'store' | 'cache' | 'db' | 'ledger'>, fromMs: number, toMs: number, pkeys: readonly string[]): Promise<Set<string>> {
  const adopted = new Set<string>();
  await fromListedParts(rt.store, fromMs, toMs, (parts) =>
    rt.cache.withFiles(
      parts,
      (files) =>
        eachRowOf(rt.db, files, pkeys, REPAIRED_AT_ONCE, async (rows) => {
          for (const pkey of await rt.ledger.adoptArchived(rows.map(archivedRecordOf), REPAIR_BY)) adopted.add(pkey);
        }),
      // Listed by the block's read already; never adopted from.
      () => undefined,
    ),
  );
  return adopted;
}

/** The distinct pkeys the archive's parts hold in [fromMs, toMs], as they stand now. */
export async function archivedIn(rt: Pick<VerifyDeps, 'store' | 'cache' | 'db'>, fromMs: number, toMs: number): Promise<Set<string>> {
  return new Set((await archivedInBlock(rt, fromMs, toMs)).pkeys.keys());
}

/** Stands for the day of a report archived on several: no day matches it. */
const SEVERAL_DAYS = -1;

/** What the parts hold in [fromMs, toMs] (see ArchivedBlock). */
async function archivedPkeys(rt: Pick<VerifyDeps, 'cache' | 'db'>, parts: readonly ObjectInfo[], fromMs: number, toMs: number): Promise<ArchivedBlock> {
  const block: ArchivedBlock = { pkeys: new Map(), duplicated: 0, tombstones: [], damaged: [] };
  if (parts.length === 0) return block;
  await rt.cache.withFiles(
    parts,
    async (files) => {
      if (files.length === 0) return;
      await rt.db.withConnection(async (conn) => {
        const [keys, copies, days, firstDays, tombstones] = (
          await conn.runAndReadAll(
            `SELECT pkey, count(*)::INTEGER, count(DISTINCT epoch_ms(created_at) // ${DAY_MS})::INTEGER,
                    min(epoch_ms(created_at) // ${DAY_MS})::INTEGER, bool_or(status = 'retracted')
             FROM read_parquet([${files.map(sqlString).join(', ')}])
             WHERE epoch_ms(created_at) BETWEEN ${Math.trunc(fromMs)} AND ${Math.trunc(toMs)} GROUP BY pkey`,
          )
        ).getColumnsJS() as [string[], number[], number[], number[], boolean[]];
        keys.forEach((pkey, i) => {
          block.pkeys.set(pkey, days[i]! > 1 ? SEVERAL_DAYS : firstDays[i]!);
          if (copies[i]! > 1) block.duplicated += 1;
          if (tombstones[i]) block.tombstones.push(pkey);
        });
      });
    },
    // Their rows are not read: what a flipped byte made of a pkey is no report to list or adopt.
    (bad) => block.damaged.push(...bad),
  );
  return block;
}
