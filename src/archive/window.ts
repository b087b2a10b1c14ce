// The archive as readers see it: `archive.open(query)` plans a window once (its parts, by UTC
// day) and returns a `Window` that answers everything about it from that plan: its tag, its
// serialised reports, its count and stats, its Parquet file and its Arrow stream.
import { createHash } from 'node:crypto';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { DuckDb } from './duckdb.js';
import type { ObjectInfo, ObjectStore } from '../store/objectStore.js';
import { pipeToFile } from '../shared/files.js';
import { SERVICE_VERSION } from '../shared/version.js';
import type { Logger } from '../shared/log.js';
import { DAY_MS, dayStart } from '../store/layout.js';
import { arrowStream } from './arrow.js';
import type { WindowContext } from './context.js';
import { arrowDayBatches, type ArrowDay } from './arrowAnswer.js';
import { windowParquet } from './parquetAnswer.js';
import { ARCHIVE_TABLE_DDL } from './partColumns.js';
import { copyReleaseParquet, type ReleaseFileFacts } from './releaseParquet.js';
import type { ParquetAnswer } from './parquetSplice.js';
import type { PartCache } from './partCache.js';
import { isDayClean, partsOf, planWindow, type DayPlan } from './plan.js';
import { isUnfiltered, queryKey, type ChangedReport, type WindowQuery } from './query.js';
import { planChanges, PURGE_SETTLE_MS, SETTLE_MS, type ArchiveStates } from './changes.js';
import { readyWantOf, renderBatches, trimPage, type FeatureBatch } from './render.js';
import { fetchAhead } from './fetchAhead.js';
import { replanner, withDayReplanned, withReplan } from './replan.js';
import { Holds } from './holds.js';
import { filteredRows, type FeatureShape } from './sql.js';
import { countStats, type StatsRow, type StatsSpec } from './stats.js';
import { ReadySections, statsInfoOf, StoredSection } from './sidecars/index.js';

/** A page of a window: its batches, and where the next page starts when there is one. */
export interface Page {
  batches: FeatureBatch[];
  next: { createdMs: number; pkey: string } | undefined;
}

/**
 * Changed whenever the same parts come to be answered with other bytes, so that no validator
 * given before names them (2: a FeatureCollection's Features one a line; gzip answers joined
 * from the stored members).
 */
const ANSWER_FORM = 'answers-2';

export class Window {
  private readonly ctx: WindowContext;
  private replans = 0;

  /** @internal Built by `Archive.open`. */
  constructor(
    ctx: WindowContext,
    readonly query: Readonly<WindowQuery>,
    /** The window's parts by UTC day, newest day first. */
    readonly days: readonly DayPlan[],
    /** Every change up to this instant is in the answer (a mirror's next `updated_after`). */
    readonly watermarkMs: number,
  ) {
    this.ctx = {
      ...ctx,
      replan: async (planned) => {
        const again = await ctx.replan(planned);
        if (again) this.replans += 1;
        return again;
      },
    };
  }

  /**
   * Whether a read of this window found a part gone and read its days from a new listing
   * (replan.ts): two reads of it may then hold different versions of the same reports (their
   * tags re-written, say), whose counts alone do not tell apart.
   */
  get replanned(): boolean {
    return this.replans > 0;
  }

  /** Every part the window reads. */
  parts(): ObjectInfo[] {
    return this.days.flatMap(partsOf);
  }

  /**
   * Same release, same query, same parts (and the same `extra`: the format) ⇒ same bytes:
   * the strong validator of an answer about this window.
   */
  tag(...extra: string[]): string {
    return this.tagOf(this.query, extra);
  }

  /**
   * tag() of a window whose end is open (an hour past now, moving with the clock), its end left
   * out, so it holds while nothing the window reads changes. Weak, for a caller that digests the
   * body's reports and count with it (the OGC items page): a report stored past that end (another
   * host's clock ahead) changes no part this window reads until the end reaches it, and then
   * changes the body.
   */
  tagOfOpenEnd(...extra: string[]): string {
    return this.tagOf({ ...this.query, endMs: Number.MAX_SAFE_INTEGER }, extra);
  }

  private tagOf(query: WindowQuery, extra: string[]): string {
    const hash = createHash('sha256').update(SERVICE_VERSION).update(ANSWER_FORM).update(queryKey(query));
    for (const e of extra) hash.update('\u0000').update(e);
    for (const p of this.parts()) hash.update(`\n${p.key}\n${p.etag}`);
    return hash.digest('base64url').slice(0, 32);
  }

  /**
   * Serialized reports in `shape`, newest first, one batch per UTC day. A whole window
   * (no limit) comes as runs of items already joined by `separator`; a page item by item.
   */
  batches(shape: FeatureShape, separator = ','): AsyncIterable<FeatureBatch> {
    return renderBatches(this.ctx, this.query, this.days, shape, separator);
  }

  /** The query's page (`limit` reports, item by item, with keys), and where the next one starts. */
  async page(shape: FeatureShape): Promise<Page> {
    const limit = this.query.limit;
    if (limit === undefined) throw new Error('page() needs a query with a limit');
    const batches: FeatureBatch[] = [];
    // One report more than the page: whether a next page exists.
    for await (const batch of renderBatches(this.ctx, { ...this.query, limit: limit + 1 }, this.days, shape, ',')) batches.push(batch);
    return { batches, next: trimPage(batches, limit) };
  }

  /**
   * How many reports the window holds (the same filters as the answer): counted as the stats
   * are, from the stats sidecars where they answer (on S3, a cold count fetches them, not the
   * parts), by DuckDB for the rest.
   */
  async count(): Promise<number> {
    const rows = await this.stats({ interval: 'month', by: 'none', offsetMinutes: 0 });
    return rows.reduce((n, r) => n + r.count, 0);
  }

  /**
   * How many reports, and the first and last created_at (ms; undefined when none): counted by
   * day as count() is (the stats sidecars, where they answer), then the first and the last
   * instant read from the parts of the first and the last day that holds any, not from all.
   */
  async extent(): Promise<{ count: number; firstMs: number | undefined; lastMs: number | undefined }> {
    const rows = await this.stats({ interval: 'day', by: 'none', offsetMinutes: 0 });
    const held = rows.filter((r) => r.count > 0).map((r) => Date.parse(r.bucket));
    const count = rows.reduce((n, r) => n + r.count, 0);
    if (held.length === 0) return { count, firstMs: undefined, lastMs: undefined };
    const bound = async (dayMs: number, fn: 'min' | 'max'): Promise<number | undefined> => {
      const planned = this.days.find((d) => d.dayMs === dayMs);
      if (!planned) return undefined;
      return withDayReplanned(this.ctx, planned, (day) =>
        Holds.during(async (holds) => {
          const rowsOf = filteredRows(await this.ctx.files(partsOf(day), holds), this.query, isDayClean(day));
          const row = await this.ctx.db.withMemory(async (conn) => (await conn.runAndReadAll(`SELECT ${fn}(epoch_ms(created_at))::DOUBLE AS ms FROM ${rowsOf.sql}`, rowsOf.values, rowsOf.types)).getRowObjectsJS()[0], this.ctx.signal);
          return row?.ms === null || row?.ms === undefined ? undefined : Number(row.ms);
        }),
      );
    };
    return { count, firstMs: await bound(Math.min(...held), 'min'), lastMs: await bound(Math.max(...held), 'max') };
  }

  /** Counts by time bucket and place (the same filters as the answer), oldest bucket first. */
  stats(spec: StatsSpec): Promise<StatsRow[]> {
    // Read again a month at a time should parts go meanwhile (countStats).
    return countStats(this.ctx, this.query, this.days, spec);
  }

  /**
   * The window as one GeoParquet file (archive columns and WKB geometry, newest first), its
   * size known before it is sent. `tmpDir`: where DuckDB writes what cannot be copied.
   */
  parquet(tmpDir: string): Promise<ParquetAnswer> {
    // Its pieces read again a month at most at a time should parts go meanwhile (windowParquet).
    return windowParquet(this.ctx, this.query, this.days, tmpDir);
  }

  /** Writes the window's GeoParquet answer to `out`; `tmpDir`: where DuckDB writes what cannot be copied (beside `out`). */
  async writeParquet(out: string, tmpDir = path.dirname(out)): Promise<void> {
    const answer = await this.parquet(tmpDir);
    try {
      await pipeToFile(out, Readable.from(answer.chunks()));
    } finally {
      await answer.close();
    }
  }

  /**
   * Writes the window (a month at most: a release's file) to `out` as a release GeoParquet file
   * (releaseParquet.ts), and says how many reports it holds, where and when.
   */
  writeReleaseParquet(out: string): Promise<ReleaseFileFacts> {
    return withReplan(this.ctx, this.days, (days) => Holds.during(async (holds) => {
      const bounds = await this.monthly(days, holds);
      if (bounds.length > 1) throw new Error('a release file holds a month at most');
      return this.ctx.db.withConnection(async (conn) => {
        if (bounds[0]) return copyReleaseParquet(conn, bounds[0], out);
        // No part at all: an empty file with the same columns.
        await conn.run(`CREATE OR REPLACE TEMP TABLE "empty" ${ARCHIVE_TABLE_DDL}`);
        return copyReleaseParquet(conn, { sql: '"empty"', values: {}, types: {} }, out);
      }, this.ctx.signal);
    }));
  }

  /**
   * The window as an Arrow IPC stream, with the Parquet answer's schema: a day whose hours are
   * all whole in sidecars is their record batches read as they are; another is built from the
   * buffers DuckDB reads.
   */
  arrow(): AsyncIterable<Uint8Array | StoredSection> {
    return arrowStream(this.arrowBatches(), (batch): batch is StoredSection => batch instanceof StoredSection);
  }

  private async *arrowBatches(): AsyncIterable<Uint8Array | ArrowDay | StoredSection> {
    const ahead = fetchAhead(this.ctx, this.days, isUnfiltered(this.query) ? readyWantOf(this.query, 'arrow', '') : undefined);
    for (const [i, day] of this.days.entries()) {
      this.ctx.signal?.throwIfAborted();
      ahead.reached(i);
      yield* arrowDayBatches(this.ctx, this.query, day);
    }
  }

  /** The filtered rows a month of days at a time (few round trips, bounded memory for de-duplication), their parts held for `holds`. */
  private async monthly(days: readonly DayPlan[], holds: Holds) {
    const out = [];
    for (let i = 0; i < days.length; i += 31) {
      const month = days.slice(i, i + 31);
      out.push(filteredRows(await this.ctx.files(month.flatMap(partsOf), holds), this.query, month.every(isDayClean)));
    }
    return out;
  }
}

/** The archive's reader: opens windows over the parts in the store. */
export class Archive {
  private readonly ctx: WindowContext;

  constructor(
    private readonly store: ObjectStore,
    cache: PartCache,
    db: DuckDb,
    /** Retractions (from the ledger) and what changed when (the change log). */
    private readonly states: ArchiveStates = { retracted: async () => [], changed: async () => [], watermark: () => Date.now() - SETTLE_MS },
    log?: Pick<Logger, 'error'>,
  ) {
    const sections = new ReadySections((info, headBytes, holds) => cache.rangedFileIfPresent(info, headBytes, holds));
    this.ctx = {
      db,
      signal: undefined,
      replan: async () => undefined,
      files: (parts, holds) => Promise.all(parts.map((p) => cache.localFile(p, holds))),
      readyFiles: (parts, want, holds) => Promise.all(parts.map((p) => sections.fileOf(p, want, holds))),
      statsFiles: (parts, holds) => Promise.all(parts.map((p) => cache.localFileIfPresent(statsInfoOf(p), holds))),
      unreadable: (part, sidecar, err) => log?.error({ part: part.key, sidecar, err: String(err) }, `a ${sidecar} cannot be read: answered from its part; delete it (the next compaction writes it again)`),
    };
  }

  /**
   * Plans the window (one ranged listing of its parts) and returns it. `signal`: aborts when
   * its answer is no longer wanted (the client hung up); what the window is doing stops.
   */
  async open(query: WindowQuery, options: { signal?: AbortSignal } = {}): Promise<Window> {
    // Taken before anything is read: what was written up to it is in the parts read after. A
    // walk's later pages answer their first page's (a sync's cursor carries it; a pull's, the
    // instant before which its pages keep reports): they leave out what came after it, so a sync
    // from a later page's own would miss that.
    const watermarkMs = query.updatedAfterMs !== undefined && query.after ? query.after.receivedBeforeMs : this.states.watermark(query.after?.receivedBeforeMs ?? query.receivedBeforeMs);
    const ctx = options.signal ? { ...this.ctx, signal: options.signal } : this.ctx;
    // The retractions and the parts (or the changes) are listed at once: on S3 each is a round trip.
    if (query.updatedAfterMs !== undefined) {
      // A sync: the changed reports alone, read from their hours alone; retractions as tombstones.
      const [retracted, allChanged] = await Promise.all([this.states.retracted(query.startMs, query.endMs), this.states.changed(query.updatedAfterMs, watermarkMs)]);
      const changed = allChanged.filter((c) => c.createdMs >= query.startMs && c.createdMs <= query.endMs);
      const frozen = Object.freeze({ ...query, retracted, changed, movedOut: movedOutOf(changed, query.admin), includeRetracted: true });
      const days = await planChanges(this.store, changed);
      options.signal?.throwIfAborted();
      const again = (some: readonly DayPlan[]) => planChanges(this.store, changed.filter((c) => some.some((d) => d.dayMs === dayStart(c.createdMs))));
      return new Window({ ...ctx, replan: replanner(again) }, frozen, days, watermarkMs);
    }
    const askedMs = performance.now();
    const [{ retracted, tookMs }, listed] = await Promise.all([
      this.states.retracted(query.startMs, query.endMs).then((retracted) => ({ retracted, tookMs: performance.now() - askedMs })),
      planWindow(this.store, query),
    ]);
    // Retractions as slow as a purge's settling could have been read after a purge whose
    // rewritten parts this listing predates: those parts are listed again (half: a margin).
    const days = tookMs < PURGE_SETTLE_MS / 2 ? listed : await planWindow(this.store, query);
    const frozen = Object.freeze({ ...query, retracted });
    options.signal?.throwIfAborted();
    // The days' own range alone is listed again.
    const again = (some: readonly DayPlan[]) => {
      const firstDay = Math.min(...some.map((d) => d.dayMs));
      const lastDay = Math.max(...some.map((d) => d.dayMs));
      return planWindow(this.store, { ...query, startMs: Math.max(query.startMs, firstDay), endMs: Math.min(query.endMs, lastDay + DAY_MS - 1) });
    };
    return new Window({ ...ctx, replan: replanner(again) }, frozen, days, watermarkMs);
  }
}

/** Of a sync's changed reports, those a re-tag moved out of one of the `admin` cities (none without an area). */
function movedOutOf(changed: readonly ChangedReport[], admin: readonly string[] | undefined): ChangedReport[] | undefined {
  if (admin === undefined) return undefined;
  const cities = new Set(admin);
  return changed.filter((r) => r.movedFrom !== undefined && r.movedFrom.some((city) => cities.has(city)));
}
