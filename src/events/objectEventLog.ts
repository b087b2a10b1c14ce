// The AWS backend's event log: numbered batches in the archive's bucket,
// events/v1/log/<n, 12 digits>.json, each {kind, at, features}, appended by whichever process
// records (the worker after a flush's parts are durable, the API or CLI on a retraction) as an
// ObjectSequence: conditional PUTs, gap-free, never rewritten. An event's id is
// n * 1000 + its index in the batch (a batch carries at most 1000 reports), so ids increase in
// log order and every API process, reading the same objects, gives the same ids: the stream
// resumes from any process after a restart, and no process shares memory with the worker.
import type { ArchiveRow } from '../archive/partColumns.js';
import type { ObjectStore } from '../store/objectStore.js';
import type { CancelledAlert, EventFeed, EventKind, StoredEvent } from './events.js';
import { featureOf, type ReportFeature } from './feature.js';
import { ObjectSequence } from './sequence.js';

export const EVENT_LOG_PREFIX = 'events/v1/log/';
/**
 * A mark per report retracted, `<pkey>` (empty), written before its retraction is logged and
 * kept as long as the log: the log is never rewritten, so readers leave out the archived events
 * of the reports marked, wherever they lie in it (one recorded by a flush that read the
 * retractions before they were made comes after the retraction).
 */
export const RETRACTED_PREFIX = 'events/v1/retracted/';
/**
 * A claim per retraction announced, `<pkey>` ({at}), created if absent before its event is
 * appended: of two processes asked to retract a report at once (a DELETE repeated on another API
 * task), one appends its event, and the other finds it claimed. A claim whose append failed is
 * given up, so a repeat announces; one a process left by dying is taken over once CLAIM_STALE_MS
 * old. Pruned with the marks.
 */
export const ANNOUNCING_PREFIX = 'events/v1/announcing/';
/** Older than this, a claim whose retraction is not in the log was left by a process gone. */
const CLAIM_STALE_MS = 30_000;
const PER_BATCH = 1000;
/** A listing of the log's tail at most this often, however many readers ask. */
const REFRESH_MS = 250;
/**
 * The marks listed at most this often (a LIST each time, in every API and worker process). The
 * log's own retracted events count at once as they are read, so a flush's late archived event,
 * which comes after its retraction, is always left out; an event from before a retraction made
 * on another process may still go out for this long (a webhook retry, a stream resumed).
 */
const MARKS_REFRESH_MS = 10_000;
/** A mark outlives the log's retention by this much: a late flush's event comes after its mark. */
const MARKS_MARGIN_MS = 3_600_000;
/** Events kept in memory for readers (the newest batches). */
const CACHE_EVENTS = 50_000;
/** What the CAP index covers: reports archived in the last day and a bit (their alerts' window). */
const INDEX_MS = 25 * 3_600_000;
/**
 * A report recorded as archived this recently is not recorded again: a flush repeated after a
 * crash (between recording and the ledger's "archived") announces nothing twice. A repeat
 * later than this (a worker down for longer) is announced again: at least once.
 */
const REPEAT_WINDOW_MS = 3_600_000;
/** Batches listed back at most to find the window's first: some thirty times a busy hour's. */
const REPEAT_SCAN_LIMIT = 20_000;

interface LogBatch {
  v: 1;
  kind: EventKind;
  at: number;
  features: ReportFeature[];
}

export class ObjectEventLog implements EventFeed {
  private readonly seq: ObjectSequence<LogBatch>;
  private readonly cache = new Map<number, LogBatch>();
  private cachedEvents = 0;
  private head = 0;
  private refreshedAt = 0;
  private refreshing: Promise<number> | undefined;
  private oldest: { n: number; atMs: number } | undefined;
  /** Reports archived in the last INDEX_MS, and those retracted, for CAP (loaded on first use, then followed). */
  private index: (EventIndex & { upto: number }) | undefined;
  private indexing: Promise<void> | undefined;

  /** Reports known retracted here: the marks last listed (at most every MARKS_REFRESH_MS, one listing for every reader), and retractions read in the log or made here since that listing began. */
  private retractedKnown = new Set<string>();
  /** Those noted since the listing under way began (a listing replaces the set, so it never outgrows the marks kept). */
  private notedSinceListing = new Set<string>();
  private marksListedAt = -Infinity;
  private listingMarks: Promise<void> | undefined;

  constructor(
    private readonly store: ObjectStore,
    private readonly now: () => number = Date.now,
  ) {
    this.seq = new ObjectSequence(store, EVENT_LOG_PREFIX);
  }

  // --- writing

  async archived(rows: readonly ArchiveRow[]): Promise<void> {
    if (rows.length === 0) return;
    const announced = await this.recentlyAnnounced();
    const features = rows.filter((r) => !announced.has(r.pkey)).map(featureOf);
    for (let i = 0; i < features.length; i += PER_BATCH) await this.append('archived', features.slice(i, i + PER_BATCH));
  }

  /** Appended past the repeat filter; batches are never rewritten, so the earlier event stays in the log (the index keeps the later). */
  async superseded(rows: readonly ArchiveRow[]): Promise<void> {
    const retracted = await this.retractedPkeys();
    // The marks may have been listed up to MARKS_REFRESH_MS ago: the retractions logged since
    // (another process's, a moment ago) are read from the log's tail as of now.
    await this.tail(true);
    const logged = (await this.followIndex()).retracted;
    const features = rows.filter((r) => !retracted.has(r.pkey) && !logged.has(r.pkey)).map(featureOf);
    for (let i = 0; i < features.length; i += PER_BATCH) await this.append('archived', features.slice(i, i + PER_BATCH));
  }

  private announced: { upto: number; at: Map<string, number> } | undefined;

  /** Reports recorded as archived within REPEAT_WINDOW_MS, by any process (followed incrementally). */
  private async recentlyAnnounced(): Promise<Map<string, number>> {
    const horizon = this.now() - REPEAT_WINDOW_MS;
    if (!this.announced) {
      // A fresh process (a worker restarted after a crash) reads from the first batch written
      // within the window, found by the listing's times (a minute's slack for clocks): busy
      // workers write hundreds of batches an hour, so a count of batches back fell short. The
      // listing starts REPEAT_SCAN_LIMIT batches back, not at the log's start (a week of keys).
      const head = await this.tail();
      const recent = (await this.seq.numbersAfter(Math.max(0, head - REPEAT_SCAN_LIMIT))).find((e) => e.lastModified.getTime() >= horizon - 60_000);
      this.announced = { upto: (recent === undefined ? head + 1 : recent.n) * PER_BATCH - 1, at: new Map() };
    }
    const state = this.announced;
    for (;;) {
      const next = await this.logged(state.upto, 5000);
      if (next.length === 0) break;
      for (const e of next) if (e.kind === 'archived' && e.at_ms >= horizon) state.at.set(e.pkey, e.at_ms);
      state.upto = next.at(-1)!.seq;
    }
    for (const [pkey, at] of state.at) if (at < horizon) state.at.delete(pkey);
    return state.at;
  }

  async retracted(feature: ReportFeature): Promise<void> {
    const pkey = feature.properties.pkey;
    await this.hide(pkey);
    if (!(await this.claimAnnouncement(pkey))) return;
    try {
      await this.append('retracted', [feature]);
    } catch (err) {
      // Unannounced: given up (as old as a dead process's, and written over, not deleted: the API
      // may not delete), so a repeat (the client's, after its 503; the purge's) announces it.
      await this.store.put(`${ANNOUNCING_PREFIX}${pkey}`, JSON.stringify({ at: 0 })).catch(() => undefined);
      throw err;
    }
  }

  /** Whether this process is the one to announce the retraction (see ANNOUNCING_PREFIX). */
  private async claimAnnouncement(pkey: string): Promise<boolean> {
    const key = `${ANNOUNCING_PREFIX}${pkey}`;
    const body = JSON.stringify({ at: this.now() });
    if (await this.store.putIfAbsent(key, body)) return true;
    const held = await this.store.get(key);
    if (!held) return this.store.putIfAbsent(key, body);
    // Announced already (the log read afresh), or being announced by a process still at it.
    if (await this.wasRetracted(pkey, true)) return false;
    const at = Number((JSON.parse(held.body.toString('utf8')) as { at?: unknown }).at);
    if (this.now() - at < CLAIM_STALE_MS) return false;
    return this.store.putIfMatch(key, body, held.etag);
  }

  /** Marks the report retracted (see RETRACTED_PREFIX): its archived events reach no reader from now on. */
  async hide(pkey: string): Promise<void> {
    await this.store.put(`${RETRACTED_PREFIX}${pkey}`, '');
    this.noteRetracted(pkey);
  }

  private noteRetracted(pkey: string): void {
    this.retractedKnown.add(pkey);
    this.notedSinceListing.add(pkey);
  }

  /** The reports marked retracted (see RETRACTED_PREFIX). */
  private async retractedPkeys(): Promise<Set<string>> {
    if (this.now() - this.marksListedAt >= MARKS_REFRESH_MS) {
      this.listingMarks ??= (async () => {
        const atMs = this.now();
        this.notedSinceListing = new Set();
        const listed = new Set<string>();
        for await (const info of this.store.list({ prefix: RETRACTED_PREFIX })) listed.add(info.key.slice(RETRACTED_PREFIX.length));
        // Those noted meanwhile may be marked after the listing's page: kept.
        for (const pkey of this.notedSinceListing) listed.add(pkey);
        this.retractedKnown = listed;
        this.marksListedAt = atMs;
      })().finally(() => {
        this.listingMarks = undefined;
      });
      await this.listingMarks;
    }
    return this.retractedKnown;
  }

  private async append(kind: EventKind, features: ReportFeature[]): Promise<void> {
    if (features.length === 0) return;
    const batch: LogBatch = { v: 1, kind, at: this.now(), features };
    const n = await this.seq.append(batch);
    this.remember(n, batch);
    this.head = Math.max(this.head, n);
  }

  // --- reading

  /** The newest batch number, listed at most every REFRESH_MS (one listing for every reader). */
  private async tail(fresh = false): Promise<number> {
    if (fresh) {
      // A listing begun now (one already under way may have begun before the batch asked about).
      this.head = Math.max(this.head, await this.seq.head());
      this.refreshedAt = this.now();
      return this.head;
    }
    if (this.now() - this.refreshedAt < REFRESH_MS) return this.head;
    this.refreshing ??= this.seq
      .head()
      .then((h) => {
        this.head = Math.max(this.head, h);
        this.refreshedAt = this.now();
        return this.head;
      })
      .finally(() => {
        this.refreshing = undefined;
      });
    return this.refreshing;
  }

  private remember(n: number, batch: LogBatch): void {
    if (this.cache.has(n)) return;
    this.cache.set(n, batch);
    this.cachedEvents += batch.features.length;
    // Evict the lowest numbers first (Map keys are not sorted; numbers mostly arrive in order).
    while (this.cachedEvents > CACHE_EVENTS && this.cache.size > 1) {
      const lowest = Math.min(...this.cache.keys());
      this.cachedEvents -= this.cache.get(lowest)!.features.length;
      this.cache.delete(lowest);
    }
  }

  private async batch(n: number): Promise<LogBatch | undefined> {
    if (n < 1) return undefined;
    const cached = this.cache.get(n);
    if (cached) return cached;
    const got = await this.seq.get(n);
    if (got) this.remember(n, got);
    return got;
  }

  /** The oldest batch kept (listed at most once a minute). */
  private async oldestBatch(): Promise<number> {
    if (!this.oldest || this.now() - this.oldest.atMs > 60_000) this.oldest = { n: await this.seq.first(), atMs: this.now() };
    return this.oldest.n;
  }

  /**
   * Events after `after`, the archived events of reports retracted since left out; read on past
   * those left out, so a reader whose next event is one of them still gets the ones after it.
   */
  async since(after: number, limit = 500): Promise<StoredEvent[]> {
    const out: StoredEvent[] = [];
    for (let from = after; out.length < limit; ) {
      const wanted = limit - out.length;
      const events = await this.logged(from, wanted);
      for (const e of events) if (e.kind === 'retracted') this.noteRetracted(e.pkey);
      const retracted = events.some((e) => e.kind === 'archived') ? await this.retractedPkeys() : undefined;
      for (const e of events) if (e.kind !== 'archived' || !retracted?.has(e.pkey)) out.push(e);
      // Fewer than asked for: the log's end.
      if (events.length < wanted) break;
      from = events.at(-1)!.seq;
    }
    return out;
  }

  /** The log's events after `after`, as they were written. */
  private async logged(after: number, limit: number): Promise<StoredEvent[]> {
    const head = await this.tail();
    let n = Math.floor(after / PER_BATCH);
    let index = after - n * PER_BATCH;
    if (n < head && !this.cache.has(n + 1)) {
      // Resuming from before what is kept starts at the oldest batch kept.
      const first = await this.oldestBatch();
      if (n + 1 < first) {
        n = first - 1;
        index = PER_BATCH - 1;
      }
    }
    const out: StoredEvent[] = [];
    while (out.length < limit && n <= head) {
      // A few batches read at once: a reader far behind (a resume, a fresh worker) catches up quickly.
      const numbers = Array.from({ length: Math.min(16, head - n + 1) }, (_, i) => n + i);
      const batches = await Promise.all(numbers.map((m) => this.batch(m)));
      for (const [k, b] of batches.entries()) {
        if (b) {
          for (let i = index + 1; i < b.features.length && out.length < limit; i++) out.push(eventOf(numbers[k]!, i, b));
          if (out.length >= limit) return out;
        }
        index = -1;
      }
      n += numbers.length;
    }
    return out;
  }

  async lastSeq(fresh = false): Promise<number> {
    const head = await this.tail(fresh);
    // Every event of the newest batch counts as sent: a stream starting now begins after it.
    return head === 0 ? 0 : head * PER_BATCH + PER_BATCH - 1;
  }

  async firstSeq(): Promise<number> {
    return (await this.oldestBatch()) * PER_BATCH;
  }

  // --- CAP: the last day's archived reports by pkey

  private async followIndex(): Promise<NonNullable<ObjectEventLog['index']>> {
    if (!this.index) {
      this.indexing ??= this.loadIndex().finally(() => {
        this.indexing = undefined;
      });
      await this.indexing;
    }
    const index = this.index!;
    for (;;) {
      const next = await this.logged(index.upto, 5000);
      if (next.length === 0) break;
      for (const e of next) addToIndex(index, e);
      index.upto = next.at(-1)!.seq;
    }
    const horizon = this.now() - INDEX_MS;
    for (const [pkey, e] of index.archived) if (e.at_ms < horizon) index.archived.delete(pkey);
    // Retractions as far back as a fresh process's index reads them, so the set stays bounded.
    for (const [pkey, r] of index.retracted) if (r.retractedMs < horizon) index.retracted.delete(pkey);
    return index;
  }

  /** Reads the batches written in the index's span (the listing gives each one's time). */
  private async loadIndex(): Promise<void> {
    const horizon = this.now() - INDEX_MS;
    const recent = (await this.seq.numbersAfter(0)).filter((e) => e.lastModified.getTime() >= horizon - 60_000);
    const index: EventIndex & { upto: number } = { upto: 0, archived: new Map(), retracted: new Map() };
    const batches: [number, LogBatch | undefined][] = [];
    for (let i = 0; i < recent.length; i += 16) {
      const slice = recent.slice(i, i + 16);
      batches.push(...(await Promise.all(slice.map(async (e) => [e.n, await this.batch(e.n)] as [number, LogBatch | undefined]))));
    }
    for (const [n, b] of batches) {
      if (!b) continue;
      b.features.forEach((_, i) => addToIndex(index, eventOf(n, i, b)));
      index.upto = n * PER_BATCH + PER_BATCH - 1;
    }
    this.head = Math.max(this.head, recent.at(-1)?.n ?? 0);
    this.index ??= index;
  }

  async createdBetween(fromMs: number, toMs: number, limit: number, cities?: readonly string[]): Promise<StoredEvent[]> {
    const index = await this.followIndex();
    const covered = cities && new Set(cities);
    const out: StoredEvent[] = [];
    for (const e of index.archived.values()) {
      const created = Date.parse(e.feature.properties.created_at);
      if (created >= fromMs && created <= toMs && (covered === undefined || covered.has(e.feature.properties.tags.instance_region_code ?? ''))) out.push(e);
    }
    out.sort((a, b) => Date.parse(b.feature.properties.created_at) - Date.parse(a.feature.properties.created_at) || (a.pkey < b.pkey ? -1 : 1));
    return out.slice(0, limit);
  }

  async cancelledBetween(fromMs: number, toMs: number, limit: number, cities?: readonly string[]): Promise<CancelledAlert[]> {
    const index = await this.followIndex();
    const covered = cities && new Set(cities);
    const out: CancelledAlert[] = [];
    for (const r of index.retracted.values()) {
      if (r.alert === undefined || r.createdMs < fromMs || r.createdMs > toMs || (covered !== undefined && !covered.has(r.city ?? ''))) continue;
      out.push(r.alert);
    }
    out.sort((a, b) => b.retractedMs - a.retractedMs || (a.pkey < b.pkey ? -1 : 1));
    return out.slice(0, limit);
  }

  async archivedReport(pkey: string): Promise<StoredEvent | undefined> {
    return (await this.followIndex()).archived.get(pkey);
  }

  /** `fresh`: the log's tail listed now, not up to REFRESH_MS ago (another process's append just made counts). */
  async wasRetracted(pkey: string, fresh = false): Promise<boolean> {
    if (fresh) await this.tail(true);
    return (await this.followIndex()).retracted.has(pkey);
  }

  async prune(retentionMs: number): Promise<number> {
    const before = this.now() - retentionMs;
    const n = await this.seq.prune(before);
    // Marks go with the retention too, an hour later: the events they hide are older, or later
    // by a flush at most.
    const old: string[] = [];
    for (const prefix of [RETRACTED_PREFIX, ANNOUNCING_PREFIX]) {
      for await (const info of this.store.list({ prefix })) if (info.lastModified.getTime() < before - MARKS_MARGIN_MS) old.push(info.key);
    }
    await this.store.delete(old);
    return n;
  }
}

function eventOf(n: number, i: number, b: LogBatch): StoredEvent {
  const feature = b.features[i]!;
  return { seq: n * PER_BATCH + i, kind: b.kind, pkey: feature.properties.pkey, at_ms: b.at, feature };
}

/** The CAP index: reports archived in the last INDEX_MS, and those retracted (with the alert each withdrew, if one went out). */
interface EventIndex {
  archived: Map<string, StoredEvent>;
  retracted: Map<string, { retractedMs: number; createdMs: number; city: string | null; alert: CancelledAlert | undefined }>;
}

function addToIndex(index: EventIndex, e: StoredEvent): void {
  if (e.kind === 'archived') {
    // The later of two events of a report: a repeat (the same report) or one superseding it.
    if (!index.retracted.has(e.pkey)) index.archived.set(e.pkey, e);
  } else if (!index.retracted.has(e.pkey)) {
    // The alert that went out, if its event is in the index, before the retraction takes it away.
    const sent = index.archived.get(e.pkey)?.at_ms;
    index.archived.delete(e.pkey);
    const p = e.feature.properties;
    index.retracted.set(e.pkey, {
      retractedMs: e.at_ms,
      createdMs: Date.parse(p.created_at),
      city: p.tags.instance_region_code,
      alert: sent === undefined ? undefined : { pkey: e.pkey, alertSentMs: sent, retractedMs: e.at_ms },
    });
  }
}
