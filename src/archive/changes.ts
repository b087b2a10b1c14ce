// What changed in the archive, and when: the index behind `updated_after`.
//
// Each worker flush, once its parts are durable, writes one small change log naming the
// reports it wrote (pkey and created_at; a reprocess adds the city a report was moved out of,
// so a sync filtered by area answers the reports that left it):
// changes/v1/<written at, ms, 15 digits>-<ulid>.json.gz,
// gzipped JSON (a bulk import logs every report it writes: plain, that was 34 bytes a report of
// the year's 430). Logs written plain (`.json`) by earlier releases are read as they are.
// Retractions are the ledger's, with their time. The reports changed in (after, upto] are then
// one ranged listing of the logs written in that span plus a GET of each, and one listing of
// the retractions: a sync reads the hours those reports live in, never the rest of the archive.
//
// The watermark: an answer is complete up to `now - SETTLE_MS`. A log is named before its PUT,
// so it becomes visible a little after the instant it is named by; a worker whose PUT took
// longer than half the settling time names it again (a mirror may then see a report twice, and
// keeps the one copy by its pkey), so no log appears behind a watermark already given out.
//
// Retention: logs older than SYNC_RETENTION_DAYS are deleted by the scheduled compaction job.
// A sync from before the horizon (the retention, or the latest pruning if that reached further,
// as recorded in changes/retention.json before anything is deleted) is refused with a
// ChangesPrunedError (410): the client pulls the window in full and syncs from its watermark.
import { promisify } from 'node:util';
import { gunzipSync, gzip as gzipCallback } from 'node:zlib';
import { newUlid } from '../shared/ulid.js';
import type { RetractionLedger } from '../ledger/ledger.js';
import type { ObjectStore } from '../store/objectStore.js';
import { DAY_MS, dayStart, hourStart } from '../store/layout.js';
import { listWindowParts } from './partListing.js';
import type { DayPlan } from './plan.js';
import type { ChangedReport, RetractedReport } from './query.js';

export const CHANGES_PREFIX = 'changes/v1/';
/** How far back the logs were pruned: written before any log is deleted. */
export const RETENTION_KEY = 'changes/retention.json';
export const RETENTION_MS = 30 * 86_400_000;
/** How long after a change is named it is surely visible (S3's PUT bounds, clock skew between hosts); SYNC_SETTLE_SECONDS. */
export const SETTLE_MS = 60_000;

export type { ChangedReport } from './query.js';

/**
 * A query whose one row is the number of rows of `relation` (a relation with `pkey`,
 * `created_at` and `moved_from`, the city a re-tag moved the report out of, or null) and the text
 * of a log naming them, for ChangeLog.prepareText: a bulk job's log (a day's reports, every one
 * of them when new boundaries move them all) built by DuckDB rather than from a JavaScript object
 * a report, in a third of the time. An entry is `[pkey, created_at ms]`, or with its city
 * `[pkey, created_at ms, moved_from]` (readers of earlier releases take the first two).
 */
export function changeLogTextSql(relation: string): string {
  const item = `concat('[', to_json(pkey), ',', epoch_ms(created_at), CASE WHEN moved_from IS NULL THEN '' ELSE concat(',', to_json(moved_from)) END, ']')`;
  return `SELECT count(*)::INTEGER, encode(concat('{"v":1,"reports":[', string_agg(${item}, ','), ']}')) FROM ${relation}`;
}

/** A change log made and not yet written (ChangeLog.prepareText). */
export interface PreparedChanges {
  readonly body: Buffer;
}

const gzip = promisify(gzipCallback);

const pad = (ms: number) => String(Math.max(0, Math.trunc(ms))).padStart(15, '0');

/** A sync asked for changes from before the horizon: the logs that held them are gone. */
export class ChangesPrunedError extends Error {
  override name = 'ChangesPrunedError';
  constructor(
    readonly horizonMs: number,
    readonly retentionMs: number,
  ) {
    super(`changes before ${new Date(horizonMs).toISOString()} are no longer kept`);
  }
}

/**
 * A change log that cannot be read (cut short or garbled on a disk): the history before it has a
 * hole, so a sync from before it is refused as one from before the horizon is (410: pull in full,
 * then sync from that answer's watermark); a sync from after it is whole.
 */
export class ChangesDamagedError extends ChangesPrunedError {
  override name = 'ChangesDamagedError';
  constructor(
    readonly key: string,
    atMs: number,
    retentionMs: number,
    readonly reason: string,
  ) {
    super(atMs, retentionMs);
    this.message = `the change log ${key} cannot be read (${reason})`;
  }
}

export class ChangeLog {
  constructor(
    private readonly store: ObjectStore,
    readonly settleMs = SETTLE_MS,
    readonly retentionMs = RETENTION_MS,
    private readonly now: () => number = Date.now,
  ) {}

  /** The earliest updated_after a sync may ask from: the retention, or how far pruning reached. */
  async horizon(): Promise<number> {
    return Math.max(this.now() - this.retentionMs, await this.prunedBefore());
  }

  private async prunedBefore(): Promise<number> {
    const marker = await this.store.get(RETENTION_KEY);
    if (!marker) return 0;
    const value = Number((JSON.parse(marker.body.toString('utf8')) as { prunedBeforeMs?: unknown }).prunedBeforeMs);
    return Number.isFinite(value) ? value : 0;
  }

  /**
   * Deletes the logs written before the retention. The horizon is recorded first, so no sync
   * is answered from a history with a hole. Returns how many logs went, and the horizon.
   */
  async prune(): Promise<{ deleted: number; prunedBeforeMs: number }> {
    const prunedBeforeMs = Math.max(this.now() - this.retentionMs, await this.prunedBefore());
    await this.store.put(RETENTION_KEY, JSON.stringify({ v: 1, prunedBeforeMs, prunedBefore: new Date(prunedBeforeMs).toISOString() }));
    const old: string[] = [];
    let deleted = 0;
    for await (const info of this.store.list({ prefix: CHANGES_PREFIX })) {
      const at = Number(info.key.slice(CHANGES_PREFIX.length, CHANGES_PREFIX.length + 15));
      if (!Number.isFinite(at)) continue;
      if (at >= prunedBeforeMs) break;
      old.push(info.key);
      if (old.length === 1000) {
        await this.store.delete(old.splice(0));
        deleted += 1000;
      }
    }
    if (old.length > 0) await this.store.delete(old);
    return { deleted: deleted + old.length, prunedBeforeMs };
  }

  /** Records that these reports' archived rows were written (after their parts are durable). */
  async record(reports: readonly ChangedReport[]): Promise<void> {
    const log = await this.prepare(reports);
    if (log) await this.put(log);
  }

  /** A log naming these reports, not yet written (undefined for none). */
  private async prepare(reports: readonly ChangedReport[]): Promise<PreparedChanges | undefined> {
    if (reports.length === 0) return undefined;
    return this.prepareText(Buffer.from(JSON.stringify({ v: 1, reports: reports.map((r) => [r.pkey, r.createdMs]) })));
  }

  /**
   * A log from its text as `changeLogTextSql` builds it, not yet written: a reprocess makes it
   * once and writes it twice (before its part, and once the part is durable).
   */
  async prepareText(text: Uint8Array): Promise<PreparedChanges> {
    // On the thread pool: a bulk job's log names a day's reports (100,000 and more). Level 1:
    // 7.3 bytes a report against 7.0 at zlib's default, in half the time (1.5 s of CPU for a
    // reprocessed year's 2.5 M).
    return { body: await gzip(text, { level: 1 }) };
  }

  /** Writes a prepared log under a name of its own (each put is one more log). */
  async put(log: PreparedChanges): Promise<void> {
    for (;;) {
      const named = this.now();
      await this.store.put(`${CHANGES_PREFIX}${pad(named)}-${newUlid()}.json.gz`, log.body);
      if (this.now() - named <= this.settleMs / 2) return;
    }
  }

  /** Reports written in (afterMs, uptoMs], by one ranged listing and a GET per log. */
  async written(afterMs: number, uptoMs: number): Promise<ChangedReport[]> {
    const out: ChangedReport[] = [];
    for await (const entries of this.logs(afterMs, uptoMs, 'throw')) {
      for (const [pkey, createdMs, movedFrom] of entries) out.push(typeof movedFrom === 'string' ? { pkey, createdMs, movedFrom: [movedFrom] } : { pkey, createdMs });
    }
    return out;
  }

  /** The UTC days (their first instant) of the reports written in (afterMs, uptoMs]: a bulk import's logs name millions, and only their days are kept. */
  async daysWritten(afterMs: number, uptoMs: number): Promise<Set<number>> {
    const days = new Set<number>();
    // A damaged log is passed over: the days it named are still answered, only left to a later compaction.
    for await (const entries of this.logs(afterMs, uptoMs, 'skip')) for (const [, createdMs] of entries) days.add(dayStart(createdMs));
    return days;
  }

  /** Each log written in (afterMs, uptoMs]: its entries, sixteen logs read at a time; one that cannot be read throws ChangesDamagedError, or is skipped. */
  private async *logs(afterMs: number, uptoMs: number, damaged: 'throw' | 'skip'): AsyncIterable<[string, number, string?][]> {
    const names: string[] = [];
    for await (const info of this.store.list({ prefix: CHANGES_PREFIX, startAfter: `${CHANGES_PREFIX}${pad(afterMs)}~` })) {
      const at = Number(info.key.slice(CHANGES_PREFIX.length, CHANGES_PREFIX.length + 15));
      if (!Number.isFinite(at)) continue;
      if (at > uptoMs) break;
      names.push(info.key);
    }
    for (let i = 0; i < names.length; i += 16) {
      const logs = await Promise.all(names.slice(i, i + 16).map(async (n) => [n, await this.store.get(n)] as const));
      for (const [name, log] of logs) {
        if (!log) continue;
        let reports: [string, number, string?][];
        try {
          const text = name.endsWith('.gz') ? gunzipSync(log.body) : log.body;
          reports = (JSON.parse(text.toString('utf8')) as { reports: [string, number, string?][] }).reports;
          if (!Array.isArray(reports)) throw new Error('no list of reports');
        } catch (err) {
          if (damaged === 'skip') continue;
          throw new ChangesDamagedError(name, Number(name.slice(CHANGES_PREFIX.length, CHANGES_PREFIX.length + 15)), this.retentionMs, (err as Error).message);
        }
        yield reports;
      }
    }
  }
}

/**
 * A purge marks a retraction purged at least this long after its last part was rewritten. A
 * reader lists the retractions and the parts at once; a listing of parts taken before such a
 * rewrite pairs with retractions that no longer name the report only if the retractions came
 * back at least this long after both were asked for. A reader whose retractions took longer
 * lists the parts again (`Archive.open`).
 */
export const PURGE_SETTLE_MS = 2_000;

/** What the reader asks of the ledger and the change log. */
export interface ArchiveStates {
  /** Retracted reports created in [fromMs, toMs] whose parts are not purged yet. */
  retracted(fromMs: number, toMs: number): Promise<RetractedReport[]>;
  /** Reports whose archived row or state changed in (afterMs, uptoMs], each once. */
  changed(afterMs: number, uptoMs: number): Promise<ChangedReport[]>;
  /** The instant up to which every change is visible now (or was at `atMs`). */
  watermark(atMs?: number): number;
}

export function archiveStates(ledger: Pick<RetractionLedger, 'retractions'>, log: ChangeLog, now: () => number = Date.now): ArchiveStates {
  return {
    async retracted(fromMs, toMs) {
      const out: RetractedReport[] = [];
      for await (const r of ledger.retractions({ createdFromMs: fromMs, createdToMs: toMs, unpurgedOnly: true })) out.push({ pkey: r.pkey, createdMs: Date.parse(r.created_at) });
      return out;
    },
    async changed(afterMs, uptoMs) {
      const horizon = await log.horizon();
      if (afterMs < horizon) throw new ChangesPrunedError(horizon, log.retentionMs);
      const byPkey = new Map<string, ChangedReport>();
      // Once each; the cities it was moved out of in the span, whichever logs say so.
      const add = (r: ChangedReport) => {
        const before = byPkey.get(r.pkey)?.movedFrom;
        byPkey.set(r.pkey, before === undefined ? r : { ...r, movedFrom: [...new Set([...before, ...(r.movedFrom ?? [])])] });
      };
      for (const r of await log.written(afterMs, uptoMs)) add(r);
      // Pruned while it was read (the horizon is recorded before any log goes): a log gone
      // would be a hole in the history, answered as if nothing had changed.
      const after = await log.horizon();
      if (afterMs < after) throw new ChangesPrunedError(after, log.retentionMs);
      for await (const r of ledger.retractions()) {
        const at = Date.parse(r.retracted_at);
        if (at > afterMs && at <= uptoMs) add({ pkey: r.pkey, createdMs: Date.parse(r.created_at) });
      }
      return [...byPkey.values()];
    },
    watermark: (atMs) => (atMs ?? now()) - log.settleMs,
  };
}

/** The parts that hold these reports: their hours' parts and their days' compacted parts, newest day first. */
export async function planChanges(store: ObjectStore, changed: readonly ChangedReport[]): Promise<DayPlan[]> {
  const hoursByDay = new Map<number, Set<number>>();
  for (const c of changed) {
    const day = dayStart(c.createdMs);
    let hours = hoursByDay.get(day);
    if (!hours) hoursByDay.set(day, (hours = new Set()));
    hours.add(hourStart(c.createdMs));
  }
  const days: DayPlan[] = [];
  for (const dayMs of [...hoursByDay.keys()].sort((a, b) => b - a)) {
    const hours = hoursByDay.get(dayMs)!;
    const partitions = await listWindowParts(store, dayMs, dayMs + DAY_MS - 1);
    const whole = partitions.filter((p) => p.wholeDay).flatMap((p) => p.parts);
    const inHours = partitions.filter((p) => !p.wholeDay && hours.has(p.hourMs)).reverse();
    if (whole.length > 0 || inHours.length > 0) days.push({ dayMs, whole, hours: inHours });
  }
  return days;
}
