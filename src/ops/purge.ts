// Purge: the parts holding retracted reports are rewritten with those reports as tombstones
// (status `retracted`, title and text "", URLs null; place, time and tags kept), so the
// personal fields leave storage, not only the answers. Each part is rewritten in place (same
// key): its place in de-duplication (newest part name wins) stays what it was. Then, a settling
// time later (PURGE_SETTLE_MS: a reader's listing of the old parts is not paired with the
// marked retractions) and once a second listing finds no part left to rewrite (a compaction may
// have published one from what it read before), the ledger marks the retractions purged, and
// readers hide each by its status from then on. A report still waiting to be archived is left
// for a later run (the worker may still write it). One purge at a time on the archive, from any
// host (storeLock.ts): two rewriting the same part in place, each from the version it read with
// the retractions it knew, would have the later write bring back a report the earlier one
// tombstoned, and both mark it purged.
import fs from 'node:fs/promises';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { LIST, VARCHAR, listValue } from '@duckdb/node-api';
import { PURGE_SETTLE_MS } from '../archive/changes.js';
import { listWindowParts } from '../archive/partListing.js';
import { DamagedPartsError } from '../archive/partSeal.js';
import { storePartPublisher } from '../archive/partPublisher.js';
import { notTombstoneSql } from '../archive/schema.js';
import { TOMBSTONE } from '../archive/sql.js';
import type { PartCache } from '../archive/partCache.js';
import type { Config } from '../shared/config.js';
import { sqlString, type DuckDb } from '../archive/duckdb.js';
import type { ReportLookup, RetractionLedger } from '../ledger/ledger.js';
import type { WebhookAdmin } from '../events/manage.js';
import { DAY_MS, dayStart, hourStart, PURGE_LOCK_KEY } from '../store/layout.js';
import type { ObjectInfo, ObjectStore } from '../store/objectStore.js';
import type { Logger } from '../shared/log.js';
import { pause } from '../shared/pause.js';
import { withStoreLock } from './storeLock.js';

export interface PurgeResult {
  retractions: number;
  partsRewritten: number;
  purged: number;
  /** Retracted while still pending: purged by a later run, once archived. */
  waiting: number;
  /** Webhook batches set aside (AWS) that held a retracted report, rewritten without it. */
  setAsideRewritten: number;
}

/** Who completes a retraction whose marker holds none (the object ledger reads the marker's own). */
const COMPLETING = { by: 'ops:purge', reason: 'a retraction begun and not recorded, completed by the purge' };

/** Listings of the days after a settling, at most, before the retractions are left for the next run. */
const SETTLE_ROUNDS = 3;
/** Listings of a day whose parts are retired as they are read, at most, before the run gives up. */
const RELISTINGS = 5;

/** The condition a part's rows are tombstoned by, and the check that a part still holds one as it was. */
const NAMED = 'list_contains($pkeys, pkey)';
const STILL_THERE = `${NAMED} AND ${notTombstoneSql()}`;

/** What the purge uses: the retractions not yet purged and whether each is archived, the parts, the query engine, a temporary directory. */
export interface PurgeDeps {
  /** Its retract(), repeated, announces a retraction the event log missed (the runtime's ledger announces: events/retractions.ts). */
  ledger: Pick<RetractionLedger, 'retractions' | 'markPurged' | 'retract'> & Pick<ReportLookup, 'lookup'>;
  store: ObjectStore;
  cache: Pick<PartCache, 'withFiles'>;
  db: DuckDb;
  config: Pick<Config, 'dataDir'>;
  /** Told of a sidecar that could not be built, or a retraction that could not be announced. */
  log: Pick<Logger, 'warn'>;
  /** The webhook deliveries set aside, which may hold the retracted reports too. */
  webhookAdmin?: Pick<WebhookAdmin, 'scrub'>;
}
type Purging = PurgeDeps;

/** Another purge holds the archive's purge lock (scheduled or after a compaction by hand, on any host); or took it over from this one. */
export class PurgeRunningError extends Error {
  override name = 'PurgeRunningError';
}

/** This purge's lock was taken over while it ran: it stopped at its next step, nothing marked purged. */
export class PurgeLockLostError extends PurgeRunningError {
  override name = 'PurgeLockLostError';
}

/** Purges the retractions not yet purged, one purge at a time on the archive (see the file's head). */
export function purgeRetracted(rt: Purging): Promise<PurgeResult> {
  const errors = { running: (m: string) => new PurgeRunningError(m), lost: (m: string) => new PurgeLockLostError(m) };
  return withStoreLock({ store: rt.store, key: PURGE_LOCK_KEY, what: 'purge', log: rt.log, errors }, (stillHeld) => purgeAlone(rt, stillHeld));
}

/** `stillHeld`: throws once the lock is another's (called before each write). */
async function purgeAlone(rt: Purging, stillHeld: () => void): Promise<PurgeResult> {
  const result: PurgeResult = { retractions: 0, partsRewritten: 0, purged: 0, waiting: 0, setAsideRewritten: 0 };
  const byDay = new Map<number, { pkey: string; createdMs: number }[]>();
  for await (const r of rt.ledger.retractions({ unpurgedOnly: true })) {
    const createdMs = Date.parse(r.created_at);
    const day = dayStart(createdMs);
    byDay.set(day, [...(byDay.get(day) ?? []), { pkey: r.pkey, createdMs }]);
    result.retractions += 1;
  }
  const tmpDir = path.join(rt.config.dataDir, 'tmp', 'purge');
  await fs.mkdir(tmpDir, { recursive: true });
  const done: string[] = [];
  for (const retracted of byDay.values()) {
    // Archived before the parts are listed, or not purged this time: a report a worker is
    // still storing (with the fields it read before the retraction) would be in no part listed,
    // and once marked purged, readers no longer hide it.
    for (const r of retracted) {
      const entry = await rt.ledger.lookup(r.pkey);
      // A retraction the ledger recorded and the event log did not (it was unavailable, or the
      // process died between the two): repeated, it is announced now, and the stream, CAP and
      // the webhooks set aside stop showing the report's fields. Announced already: nothing.
      if (entry?.retraction) {
        const { by, reason } = entry.retraction;
        await rt.ledger.retract(r.pkey, by, reason).catch((err: unknown) => rt.log.warn({ pkey: r.pkey, err: String(err) }, 'a retraction could not be announced; the next purge tries again'));
      } else if (entry) {
        // Hidden by its unpurged marker alone: the retraction's record failed after it (its
        // caller had a 503 and did not repeat it). Completed now as the marker holds it, and
        // announced; until then the marker stays, and the report hidden, for the next run.
        try {
          await rt.ledger.retract(r.pkey, COMPLETING.by, COMPLETING.reason);
        } catch (err) {
          rt.log.warn({ pkey: r.pkey, err: String(err) }, 'a retraction begun and not recorded could not be completed; the next purge tries again');
          result.waiting += 1;
          continue;
        }
      }
      if (entry?.pending) result.waiting += 1;
      else done.push(r.pkey);
    }
  }
  /** Parts known clean (as this run rewrote or read them): a later listing's round skips them. */
  const clean = new Set<string>();
  const versionOf = (part: ObjectInfo) => `${part.key}\n${part.etag}`;
  /**
   * Days holding a damaged part (partSeal.ts): their retractions stay unpurged (and so hidden
   * from answers) until the part is restored; the other days are purged, then the run fails
   * naming the parts.
   */
  const blocked = new Map<number, DamagedPartsError['parts']>();
  /** Each day's parts that still hold its retracted reports as they were, rewritten; how many. */
  const rewriteDays = async (): Promise<number> => {
    let rewritten = 0;
    for (const [dayMs, retracted] of byDay) {
      if (blocked.has(dayMs)) continue;
      try {
        rewritten += await rewriteDay(dayMs, retracted);
      } catch (err) {
        if (!(err instanceof DamagedPartsError)) throw err;
        rt.log.warn({ day: new Date(dayMs).toISOString().slice(0, 10), damagedParts: err.parts }, 'the purge left a day with a damaged part unpurged: restore the part from a backup of the store');
        blocked.set(dayMs, err.parts);
      }
    }
    return rewritten;
  };
  const rewriteDay = async (dayMs: number, retracted: { pkey: string; createdMs: number }[]): Promise<number> => {
    let rewritten = 0;
    {
      const hours = new Set(retracted.map((r) => hourStart(r.createdMs)));
      const pkeys = retracted.map((r) => r.pkey);
      // A part retired after it was listed (a compaction or reprocess beside this run replaced
      // it, past its grace) is gone: the day is listed again, its replacement read instead.
      for (let listing = 1; ; listing++) {
        const partitions = await listWindowParts(rt.store, dayMs, dayMs + DAY_MS - 1);
        // A report lives in its hour's parts, or in its day's compacted part.
        const parts = partitions.filter((p) => p.wholeDay || hours.has(p.hourMs)).flatMap((p) => p.parts);
        let gone = false;
        for (const part of parts) {
          if (clean.has(versionOf(part))) continue;
          const outcome = await rewrite(rt, part, pkeys, tmpDir, stillHeld);
          if (outcome === 'gone') gone = true;
          if (outcome !== 'rewritten') {
            if (outcome === 'clean') clean.add(versionOf(part));
            continue;
          }
          rewritten += 1;
          const now = await rt.store.head(part.key);
          if (now) clean.add(versionOf(now));
        }
        if (!gone) break;
        if (listing === RELISTINGS) throw new Error(`the parts of ${new Date(dayMs).toISOString().slice(0, 10)} were replaced ${RELISTINGS} times while the purge read them; the next run purges them`);
      }
    }
    return rewritten;
  };
  result.partsRewritten += await rewriteDays();
  const purgeable = (): string[] => {
    const held = new Set([...blocked.keys()].flatMap((day) => (byDay.get(day) ?? []).map((r) => r.pkey)));
    return done.filter((pkey) => !held.has(pkey));
  };
  const failIfBlocked = () => {
    if (blocked.size > 0) throw new DamagedPartsError([...blocked.values()].flat());
  };
  if (purgeable().length === 0) {
    failIfBlocked();
    return result;
  }
  // A webhook batch set aside before the retraction holds the report whole until it is redriven.
  result.setAsideRewritten = (await rt.webhookAdmin?.scrub(new Set(purgeable()))) ?? 0;
  // Every part listed is now as it stays (rewritten here, or found rewritten by another run); a
  // reader's listing from before that is paired with these retractions until they are marked,
  // and no longer after the settling (see PURGE_SETTLE_MS). Then the days are listed again: a
  // part published meanwhile from what was read before the retractions (a compaction, a
  // reprocess) is rewritten too, and settles in turn; marked once a listing finds none left.
  for (let round = 0; round < SETTLE_ROUNDS; round++) {
    await pause(PURGE_SETTLE_MS);
    const again = await rewriteDays();
    result.partsRewritten += again;
    if (again > 0) continue;
    stillHeld();
    const marked = purgeable();
    await rt.ledger.markPurged(marked);
    result.purged = marked.length;
    failIfBlocked();
    return result;
  }
  // Still being rewritten behind us: left unpurged (and hidden) for the next run.
  result.waiting += purgeable().length;
  failIfBlocked();
  return result;
}

/**
 * Rewrites the part with `pkeys` as tombstones when it holds any of them as they were:
 * 'rewritten'; 'clean' when it holds none; 'gone' when it was retired before it could be read or
 * written back.
 */
async function rewrite(rt: Purging, part: ObjectInfo, pkeys: string[], tmpDir: string, stillHeld: () => void): Promise<'rewritten' | 'clean' | 'gone'> {
  const out = path.join(tmpDir, `${randomUUID()}.parquet`);
  try {
    return (await tombstone(rt, part, pkeys, out, stillHeld)) ? 'rewritten' : 'clean';
  } catch (err) {
    if (err instanceof PartGoneError || !(await rt.store.head(part.key))) return 'gone';
    throw err;
  } finally {
    await fs.rm(out, { force: true });
  }
}

class PartGoneError extends Error {
  override name = 'PartGoneError';
}

async function tombstone(rt: Purging, part: ObjectInfo, pkeys: string[], out: string, stillHeld: () => void): Promise<boolean> {
  // The part stays in the cache while it is read.
  const found = await rt.cache.withFiles([part], ([file]) =>
    rt.db.withConnection(async (conn) => {
      const values = { pkeys: listValue(pkeys) };
      const types = { pkeys: LIST(VARCHAR) };
      const reader = await conn.runAndReadAll(`SELECT count(*)::INTEGER AS n FROM read_parquet(${sqlString(file!)}) WHERE ${STILL_THERE}`, values, types);
      if (Number(reader.getRowObjectsJS()[0]?.n ?? 0) === 0) return false;
      // Same columns, same order (newest first), the named rows as tombstones.
      await conn.run(
        `COPY (SELECT ${TOMBSTONE(NAMED)} FROM read_parquet(${sqlString(file!)}) ORDER BY created_at DESC, pkey DESC) TO ${sqlString(out)} (FORMAT parquet, COMPRESSION zstd)`,
        values,
        types,
      );
      return true;
    }),
  );
  if (!found) return false;
  stillHeld();
  // Retired while it was read (its file kept open, or in the cache): not written back beside its
  // replacement. A retirement between this look and the write still can be (a duplicate in
  // storage, which answers hide and compaction merges).
  if (!(await rt.store.head(part.key))) throw new PartGoneError(part.key);
  // With its ready texts rewritten first: they never hold a purged report's text.
  await storePartPublisher(rt).publish(part.key, out);
  return true;
}
