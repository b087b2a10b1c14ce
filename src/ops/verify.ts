// Verify: what the ledger accepted against what is archived
// (distinct pkeys in the parts), per UTC day. Any accepted report that is
// neither archived nor still pending is a loss.
import type { PartCache } from '../archive/partCache.js';
import { listWindowParts } from '../archive/partListing.js';
import { sqlString, type DuckDb } from '../archive/duckdb.js';
import type { PendingLedger } from '../ledger/ledger.js';
import type { ObjectStore } from '../store/objectStore.js';
import type { Progress } from './progress.js';

/** What verify uses: the ledger's acceptances, the parts, the query engine. */
export interface VerifyDeps {
  ledger: Pick<PendingLedger, 'accepted'>;
  store: ObjectStore;
  cache: Pick<PartCache, 'localFile'>;
  db: DuckDb;
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
  /** In the archive without an entry in the ledger. */
  unexpected: string[];
  /** pkeys stored in more than one part (normal until compaction). */
  duplicatedInStorage: number;
  ok: boolean;
}

export async function verify(rt: VerifyDeps, options: { fromMs: number; toMs: number }, progress?: Progress): Promise<VerifyResult> {
  const accepted = new Map<string, string>(); // pkey -> day
  const pending = new Set<string>();
  progress?.start(1);
  for await (const report of rt.ledger.accepted(options.fromMs, options.toMs)) {
    accepted.set(report.pkey, report.created_at.slice(0, 10));
    if (report.pending) pending.add(report.pkey);
  }
  progress?.tick();
  progress?.stop();

  const archived = new Map<string, string>();
  let duplicatedInStorage = 0;
  const hours = await listWindowParts(rt.store, options.fromMs, options.toMs);
  const files = await Promise.all(hours.flatMap((h) => h.parts).map((p) => rt.cache.localFile(p)));
  if (files.length > 0) {
    await rt.db.withConnection(async (conn) => {
      const reader = await conn.runAndReadAll(
        `SELECT pkey, strftime(min(created_at), '%Y-%m-%d') AS day, count(*)::INTEGER AS copies
         FROM read_parquet([${files.map(sqlString).join(', ')}])
         WHERE epoch_ms(created_at) BETWEEN ${Math.trunc(options.fromMs)} AND ${Math.trunc(options.toMs)}
         GROUP BY pkey`,
      );
      for (const row of reader.getRowObjectsJS()) {
        archived.set(String(row.pkey), String(row.day));
        if (Number(row.copies) > 1) duplicatedInStorage += 1;
      }
    });
  }

  const byDay = new Map<string, DayReport>();
  const day = (d: string) => {
    let r = byDay.get(d);
    if (!r) byDay.set(d, (r = { day: d, accepted: 0, archived: 0, pending: 0, missing: 0 }));
    return r;
  };
  const missing: string[] = [];
  for (const [pkey, d] of accepted) {
    const r = day(d);
    r.accepted += 1;
    if (archived.has(pkey)) r.archived += 1;
    else if (pending.has(pkey)) r.pending += 1;
    else {
      r.missing += 1;
      missing.push(pkey);
    }
  }
  const unexpected = [...archived.keys()].filter((pkey) => !accepted.has(pkey));
  return {
    days: [...byDay.values()].sort((a, b) => a.day.localeCompare(b.day)),
    missing: missing.sort(),
    unexpected: unexpected.sort(),
    duplicatedInStorage,
    ok: missing.length === 0,
  };
}
