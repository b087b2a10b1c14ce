// A window's reports serialised (GeoJSON Features, TopoJSON geometries or CSV lines), newest
// first, one batch per UTC day. The window is walked one day at a time and sorted only within
// the day, so memory stays flat however long the window is. A pkey always lives in one hour
// (partitions are by created_at), so de-duplicating within a day is de-duplicating the answer.
import { sqlString } from './duckdb.js';
import { fetchAhead } from './fetchAhead.js';
import { withDayReplanned } from './replan.js';
import { Holds } from './holds.js';
import type { WindowContext } from './context.js';
import { groupBySize, HOUR_MS, isClean, isDayClean, partsOf, type DayPlan } from './plan.js';
import type { Bbox, WindowQuery } from './query.js';
import type { ObjectInfo } from '../store/objectStore.js';
import { readyReads, readyRunsOf, servesText, type ReadyRun, type ReadyWant, type StoredSection } from './sidecars/index.js';
import { LIST, listValue, TIMESTAMPTZ, VARCHAR } from '@duckdb/node-api';
import { ANSWER_ORDER, filteredRows, ITEM_SQL, micros, type Bound, type FeatureShape } from './sql.js';

/** An hour's items as DuckDB built them, joined by the separator, newest first. */
interface RenderedHour {
  text: Run;
  /** [minLng, minLat, maxLng, maxLat] of its points; undefined for an hour without reports. */
  bbox: [number, number, number, number] | undefined;
}

/**
 * Items already joined by the separator, or a function that reads them when they are about to
 * be sent, as chunks (a sidecar's hours, one stored section at a time).
 */
export type Run = Uint8Array | (() => Iterable<Uint8Array | StoredSection> | AsyncIterable<Uint8Array>);

/** Where a report sits in answer order, and its point. */
export interface ItemKey {
  createdMs: number;
  pkey: string;
  lng: number;
  lat: number;
}

export interface FeatureBatch {
  /** Serialized items, newest first: one per report (pages), or runs of them already joined by the separator. */
  items: string[] | Run[];
  /** [minLng, minLat, maxLng, maxLat] of the batch, undefined when empty. */
  bbox: Bbox | undefined;
  /** Each item's sort key and point, when paging (the next page starts after the last one). */
  keys: ItemKey[] | undefined;
}

/**
 * Days prepared ahead of the one being sent. One: DuckDB builds the next day while this one
 * goes out; two overlapped more (about 20% faster on a cold year) but DuckDB's working memory
 * then took the server past 300 MB.
 */
const READ_AHEAD = 1;
/** Bytes of parts one rendering query reads at most (unless one hour alone is more). */
const QUERY_BYTES = 256 * 1024;

export function unionBbox(a: Bbox, b: Bbox): Bbox {
  return [Math.min(a[0], b[0]), Math.min(a[1], b[1]), Math.max(a[2], b[2]), Math.max(a[3], b[3])];
}

/**
 * Serialized reports, newest first, one batch per UTC day (the query's limit respected).
 * Whole windows come as runs of joined items (`separator` between items), read from ready
 * texts or built by DuckDB, while the next day is already being prepared; pages come
 * item by item, with keys.
 */
export async function* renderBatches(ctx: WindowContext, query: WindowQuery, plan: readonly DayPlan[], shape: FeatureShape, separator: string): AsyncIterable<FeatureBatch> {
  if (query.limit === undefined) {
    // A day's ready texts are held from its preparation until it has been sent: its hours are
    // read from them as they go out.
    const held = new Set<Holds>();
    const run = (i: number) => {
      const holds = new Holds();
      held.add(holds);
      const day = withDayReplanned(ctx, plan[i]!, (d) => renderDay(ctx, d, query, shape, separator, holds));
      // Handled from the start: a day that fails while the one before is still being sent is
      // awaited (and fails the answer) only then, and must not crash the process meanwhile.
      day.catch(() => undefined);
      return { day, holds };
    };
    // The next days are prepared (their sidecars' indexes read, or DuckDB queried) while one
    // is sent. Memory: READ_AHEAD days in preparation; sidecar ranges are read as they are sent.
    const inFlight: ReturnType<typeof run>[] = [];
    try {
      const ahead = fetchAhead(ctx, plan, readyWantOf(query, shape, separator));
      for (let i = 0; i < Math.min(READ_AHEAD, plan.length); i++) inFlight.push(run(i));
      for (let i = 0; i < plan.length; i++) {
        const { day, holds } = inFlight.shift()!;
        const batch = await day;
        // Nothing more is read ahead for a client that hung up.
        ctx.signal?.throwIfAborted();
        ahead.reached(i);
        if (i + READ_AHEAD < plan.length) inFlight.push(run(i + READ_AHEAD));
        yield batch;
        // Asked for the next day: this one's items have been read.
        holds.release();
        held.delete(holds);
      }
    } finally {
      for (const holds of held) holds.release();
    }
    return;
  }
  let remaining = query.limit;
  for (let i = 0; i < plan.length && remaining > 0; i++) {
    // The day's parts held until its query is done.
    const batch = await withDayReplanned(ctx, plan[i]!, (day) => Holds.during(async (holds) => queryDay(ctx, await ctx.files(partsOf(day), holds), query, shape, remaining, isDayClean(day))));
    remaining -= batch.items.length;
    yield batch;
  }
}

/** The hours of a day that may hold reports of the window, newest first: a compacted day may hold any of its hours; otherwise only listed hours have reports. */
export function candidatesOf(day: DayPlan, query: WindowQuery): number[] {
  return day.whole.length > 0
    ? Array.from({ length: 24 }, (_, i) => day.dayMs + (23 - i) * HOUR_MS).filter((h) => h + HOUR_MS - 1 >= query.startMs && h <= query.endMs)
    : day.hours.map((h) => h.hourMs);
}

/**
 * One day as runs of joined items, newest hour first. Hours whose reports all sit in one part
 * with ready texts are byte ranges of its sidecar (consecutive hours: one range, one read). The
 * others (several parts not yet compacted, a retraction not yet purged, parts without ready
 * texts) are built by DuckDB, one query for the day, or a few hours at a time of a storm day.
 */
async function renderDay(ctx: WindowContext, day: DayPlan, query: WindowQuery, shape: FeatureShape, separator: string, holds: Holds): Promise<FeatureBatch> {
  const partsOfHour = new Map(day.hours.map((h) => [h.hourMs, h.parts]));
  // A compacted day may hold any of its hours; otherwise only listed hours have reports.
  const candidates = candidatesOf(day, query);
  // Held with the day: a storm hour's slices are queried as they are sent.
  const filesOf = (hours: number[]) => ctx.files([...day.whole, ...hours.flatMap((h) => partsOfHour.get(h) ?? [])], holds);
  const clean = (hours: number[]) => isClean(day.whole, day.hours.filter((h) => hours.includes(h.hourMs)));
  // A DuckDB query's memory grows with the text it builds (several times over): a storm
  // day is built a few hours at a time, each run reading about QUERY_BYTES of parts.
  const wholeBytes = day.whole.reduce((n, p) => n + p.size, 0) / 24;
  const bytesOf = (hourMs: number) => wholeBytes + (partsOfHour.get(hourMs) ?? []).reduce((n, p) => n + p.size, 0);
  const build = async (hours: number[]) => {
    const built = new Map<number, RenderedHour>();
    for (const group of groupBySize(hours, bytesOf, QUERY_BYTES)) {
      ctx.signal?.throwIfAborted();
      const narrowed = { ...query, startMs: Math.max(query.startMs, Math.min(...group)), endMs: Math.min(query.endMs, Math.max(...group) + HOUR_MS - 1) };
      if (group.length === 1 && bytesOf(group[0]!) > QUERY_BYTES) {
        built.set(group[0]!, await slicedHour(ctx, await filesOf(group), narrowed, shape, separator, clean(group)));
        continue;
      }
      for (const [hourMs, rendered] of await queryHours(ctx, await filesOf(group), narrowed, shape, separator, clean(group))) built.set(hourMs, rendered);
    }
    return built;
  };

  const ready = await readyRuns(ctx, day, candidates, query, shape, separator, holds);
  const rest = candidates.filter((hourMs) => !ready.has(hourMs));
  const runs = rest.length > 0 ? await build(rest) : new Map<number, RenderedHour>();
  const items: Run[] = [];
  let bbox: FeatureBatch['bbox'];
  // Ready hours with no other hour between them: their reads (consecutive hours of one sidecar: one range).
  let pending: ReadyRun[] = [];
  const flush = () => {
    items.push(...readyReads(pending, shape, separator));
    pending = [];
  };
  for (const hourMs of candidates) {
    const r = ready.get(hourMs);
    if (r) {
      pending.push(r);
      if (r.bbox) bbox = bbox ? unionBbox(bbox, r.bbox) : r.bbox;
      continue;
    }
    const run = runs.get(hourMs);
    // An hour without reports has no bbox.
    if (!run?.bbox) continue;
    flush();
    items.push(run.text);
    bbox = bbox ? unionBbox(bbox, run.bbox) : run.bbox;
  }
  flush();
  return { items, bbox, keys: undefined };
}

/**
 * The hours of a day that ready texts answer, by hour: only hours whose reports all sit in one
 * part (a compacted day without later hour parts, or an hour's single part) that has a
 * sidecar, so the sidecar is the whole answer for them. A whole hour is a byte range; an hour
 * the window cuts, or a window filtered by city or bbox, is the reports its per-report index
 * selects. Pages, syncs, tombstones and hours holding a retraction not yet purged are left to
 * DuckDB.
 */
export async function readyRuns(
  ctx: WindowContext,
  day: DayPlan,
  candidates: readonly number[],
  query: WindowQuery,
  shape: FeatureShape | 'arrow',
  separator: string,
  /** Keep the ready texts read until the runs have been read (released by the caller). */
  holds: Holds,
): Promise<Map<number, ReadyRun>> {
  const out = new Map<number, ReadyRun>();
  const want = readyWantOf(query, shape, separator);
  if (!want) return out;
  const retracted = new Set((query.retracted ?? []).map((r) => hourOf(r.createdMs)));
  const partsOfHour = new Map(day.hours.map((h) => [h.hourMs, h.parts]));
  const sourceOf = (hourMs: number) => {
    const own = partsOfHour.get(hourMs) ?? [];
    if (day.whole.length === 1 && own.length === 0) return day.whole[0];
    return day.whole.length === 0 && own.length === 1 ? own[0] : undefined;
  };
  const byPart = new Map<ObjectInfo, number[]>();
  for (const hourMs of candidates) {
    const part = retracted.has(hourMs) ? undefined : sourceOf(hourMs);
    if (part) byPart.set(part, [...(byPart.get(part) ?? []), hourMs]);
  }
  if (byPart.size === 0) return out;
  const parts = [...byPart.keys()];
  const files = await ctx.readyFiles(parts, want, holds);
  parts.forEach((part, i) => {
    const file = files[i];
    if (!file) return;
    for (const [hourMs, run] of readyRunsOf(file, byPart.get(part)!, query)) out.set(hourMs, run);
  });
  return out;
}

/** What a window's answer in `shape` reads of ready texts; undefined when it reads none (pages, syncs, tombstones, a shape or separator not kept ready). */
export function readyWantOf(query: WindowQuery, shape: FeatureShape | 'arrow', separator: string): ReadyWant | undefined {
  const servable = query.after === undefined && query.receivedBeforeMs === undefined && query.pkey === undefined && query.changed === undefined && !query.includeRetracted;
  if (!servable) return undefined;
  if (shape === 'arrow') return { shape, filter: query };
  return servesText(shape, separator) ? { shape, filter: query } : undefined;
}

const hourOf = (ms: number) => Math.floor(ms / HOUR_MS) * HOUR_MS;

/** Each hour's items built and joined by DuckDB (bytes: JS only passes them on), by hour. */
async function queryHours(ctx: WindowContext, files: string[], query: WindowQuery, shape: FeatureShape, separator: string, clean: boolean): Promise<Map<number, RenderedHour>> {
  const bound = filteredRows(files, query, clean);
  const sql = `SELECT epoch_ms(created_at) // ${HOUR_MS} AS hour,
      encode(string_agg(${ITEM_SQL[shape]}, ${sqlString(separator)} ORDER BY created_at DESC, pkey DESC)) AS items,
      min(lng) AS min_lng, min(lat) AS min_lat, max(lng) AS max_lng, max(lat) AS max_lat
    FROM ${bound.sql} GROUP BY 1`;
  return ctx.db.withMemory(async (conn) => {
    const reader = await conn.runAndReadAll(sql, bound.values, bound.types);
    const out = new Map<number, RenderedHour>();
    for (const row of reader.getRowsJS() as [bigint, Uint8Array, number, number, number, number][]) {
      out.set(Number(row[0]) * HOUR_MS, { text: row[1], bbox: [row[2], row[3], row[4], row[5]] });
    }
    return out;
  }, ctx.signal);
}

/**
 * An hour too large to build in one query (a storm hour of many parts not yet compacted: its
 * text alone may be tens of MB, and DuckDB's working memory several times that, whether it
 * aggregates or sorts), built in slices of its time of about SLICE_ROWS reports each: memory
 * is bounded by a slice however large the hour. A pkey lives at one instant, so each slice is
 * de-duplicated on its own; parts are written in time order, so a slice reads only the row
 * groups of the parts that overlap it. Each slice's bbox is counted now (empty slices are left
 * out, so the run is never empty); its items are built when they are sent, one slice at a time.
 * The same bytes as `queryHours` builds for the hour.
 */
async function slicedHour(ctx: WindowContext, files: string[], query: WindowQuery, shape: FeatureShape, separator: string, clean: boolean): Promise<RenderedHour> {
  const slices: { bound: Bound; bbox: Bbox }[] = [];
  for (const [startMs, endMs] of await timeSlices(ctx, files, query)) {
    const bound = filteredRows(files, { ...query, startMs, endMs }, clean);
    const bbox = await ctx.db.withMemory(async (conn) => {
      const reader = await conn.runAndReadAll(`SELECT min(lng), min(lat), max(lng), max(lat) FROM ${bound.sql}`, bound.values, bound.types);
      const row = reader.getRowsJS()[0] as [number | null, number, number, number];
      return row[0] === null ? undefined : (row as Bbox);
    }, ctx.signal);
    if (bbox) slices.push({ bound, bbox });
  }
  if (slices.length === 0) return { text: new Uint8Array(), bbox: undefined };
  const bbox = slices.map((s) => s.bbox).reduce(unionBbox);
  const sql = `SELECT encode(string_agg(${ITEM_SQL[shape]}, ${sqlString(separator)} ${ANSWER_ORDER})) FROM `;
  async function* text(): AsyncIterable<Uint8Array> {
    for (const [i, { bound }] of slices.entries()) {
      if (i > 0) yield Buffer.from(separator);
      yield await ctx.db.withMemory(async (conn) => (await conn.runAndReadAll(sql + bound.sql, bound.values, bound.types)).getRowsJS()[0]![0] as Uint8Array, ctx.signal);
    }
  }
  return { text, bbox };
}

/** Reports (copies counted) in a built slice of a storm hour, at most (unless one second alone holds more). */
const SLICE_ROWS = 4096;

/** The window's time in the files as [startMs, endMs] slices of about SLICE_ROWS reports each, newest first (by whole seconds). */
async function timeSlices(ctx: WindowContext, files: string[], query: WindowQuery): Promise<[number, number][]> {
  const seconds = await ctx.db.withMemory(async (conn) => {
    const reader = await conn.runAndReadAll(
      `SELECT epoch_ms(created_at) // 1000 AS s, count(*)::INTEGER AS n FROM read_parquet($files) WHERE created_at BETWEEN $start AND $end GROUP BY 1 ORDER BY 1 DESC`,
      { files: listValue(files), start: micros(query.startMs), end: micros(query.endMs) },
      { files: LIST(VARCHAR), start: TIMESTAMPTZ, end: TIMESTAMPTZ },
    );
    return reader.getRowsJS() as [bigint, number][];
  }, ctx.signal);
  const groups = groupBySize(seconds, ([, n]) => n, SLICE_ROWS);
  // Newest first: a slice runs from its oldest second's start to its newest second's end.
  return groups.map((g) => [Math.max(query.startMs, Number(g[g.length - 1]![0]) * 1000), Math.min(query.endMs, Number(g[0]![0]) * 1000 + 999)]);
}

/** Up to `limit` reports of one day, item by item, with their keys when paging. */
async function queryDay(ctx: WindowContext, files: string[], query: WindowQuery, shape: FeatureShape, limit: number, clean: boolean): Promise<FeatureBatch> {
  // The page's reports first (filteredRows keeps the top `limit` alone), then their items.
  const bound = filteredRows(files, query, clean, Number.isFinite(limit) ? Math.trunc(limit) : undefined);
  const sql = `SELECT ${ITEM_SQL[shape]} AS item, lng, lat, epoch_ms(created_at) AS created_ms, pkey FROM ${bound.sql} ${ANSWER_ORDER}`;
  return ctx.db.withMemory(async (conn) => {
    const result = await conn.stream(sql, bound.values, bound.types);
    const items: string[] = [];
    let minX = Infinity;
    let minY = Infinity;
    let maxX = -Infinity;
    let maxY = -Infinity;
    const keys: FeatureBatch['keys'] = query.limit === undefined ? undefined : [];
    for await (const chunk of result) {
      const itemCol = chunk.getColumnVector(0);
      const lngCol = chunk.getColumnVector(1);
      const latCol = chunk.getColumnVector(2);
      for (let r = 0; r < chunk.rowCount; r++) {
        items.push(itemCol.getItem(r) as string);
        const x = lngCol.getItem(r) as number;
        const y = latCol.getItem(r) as number;
        if (x < minX) minX = x;
        if (x > maxX) maxX = x;
        if (y < minY) minY = y;
        if (y > maxY) maxY = y;
      }
      if (keys) {
        const created = chunk.getColumnVector(3);
        const pkeys = chunk.getColumnVector(4);
        for (let r = 0; r < chunk.rowCount; r++) {
          keys.push({ createdMs: Number(created.getItem(r)), pkey: pkeys.getItem(r) as string, lng: lngCol.getItem(r) as number, lat: latCol.getItem(r) as number });
        }
      }
    }
    return { items, bbox: items.length > 0 ? [minX, minY, maxX, maxY] : undefined, keys };
  }, ctx.signal);
}

/**
 * A page: the first `limit` reports of the batches (read with one extra, to learn whether
 * another page follows), and where the next page starts when it does.
 */
export function trimPage(batches: FeatureBatch[], limit: number): { createdMs: number; pkey: string } | undefined {
  const total = batches.reduce((n, b) => n + b.items.length, 0);
  if (total <= limit) return undefined;
  const withItems = batches.filter((b) => b.items.length > 0);
  const last = withItems[withItems.length - 1]!;
  last.items.pop();
  last.keys!.pop();
  // The page's TopoJSON bbox must be that of the points it holds.
  last.bbox =
    last.keys!.length === 0
      ? undefined
      : last.keys!.reduce<Bbox>((b, k) => [Math.min(b[0], k.lng), Math.min(b[1], k.lat), Math.max(b[2], k.lng), Math.max(b[3], k.lat)], [Infinity, Infinity, -Infinity, -Infinity]);
  const kept = withItems.flatMap((b) => b.keys ?? []);
  const end = kept[kept.length - 1]!;
  return { createdMs: end.createdMs, pkey: end.pkey };
}
