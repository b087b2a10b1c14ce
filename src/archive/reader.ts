// Answers archive windows with DuckDB over the parts (hourly, or a compacted
// day), newest first. The window is walked one UTC day at a time (newest day
// first) and sorted only within the day, so memory stays flat however long the
// window is.
// A pkey always lives in one hour (partitions are by created_at), so
// de-duplicating within a day is de-duplicating the whole answer.
import {
  DOUBLE,
  LIST,
  TIMESTAMPTZ,
  VARCHAR,
  listValue,
  timestampTZValue,
  type DuckDBType,
  type DuckDBValue,
} from '@duckdb/node-api';
import fs from 'node:fs/promises';
import path from 'node:path';
import { sqlString, type DuckDb } from '../duckdb.js';
import { dayStart } from '../reports/layout.js';
import type { ObjectInfo, ObjectStore } from '../store/objectStore.js';
import type { PartCache } from './partCache.js';
import { listWindowParts, type HourParts } from './parts.js';
import { RenderCache, type RenderedHour } from './renderCache.js';
import { bboxOf, GEOMETRY_SQL, geoCopyOption, prepareGeometry } from './geoparquet.js';
import { ARCHIVE_TABLE_DDL } from './row.js';
import { DEDUPE_WINDOW } from './rows.js';
import { mergeStats, statsSql, type StatsRow, type StatsSpec } from './stats.js';

/** Position after which a page continues: the last report of the previous page. */
export interface Cursor {
  createdMs: number;
  pkey: string;
  /** Only reports received up to here: pages stay stable while reports arrive. */
  receivedBeforeMs: number;
}

export interface ArchiveQuery {
  startMs: number;
  /** Inclusive. */
  endMs: number;
  admin: string | undefined;
  /** [minLng, minLat, maxLng, maxLat], inclusive. */
  bbox?: [number, number, number, number] | undefined;
  after?: Cursor | undefined;
  receivedBeforeMs?: number | undefined;
  /** At most this many reports (a page); undefined: the whole window. */
  limit?: number | undefined;
}

/** How each report is serialized: a GeoJSON Feature, a TopoJSON Point geometry, or a CSV line. */
export type FeatureShape = 'geojson' | 'topojson' | 'csv';

const HOUR_MS = 3_600_000;

/** Items already joined by the separator, or a function that reads them when they are about to be sent. */
export type Run = Uint8Array | (() => Uint8Array);

export interface FeatureBatch {
  /** Serialized items, newest first: one per report (pages), or runs of them already joined by the separator. */
  items: string[] | Run[];
  /** [minLng, minLat, maxLng, maxLat] of the batch, undefined when empty. */
  bbox: [number, number, number, number] | undefined;
  /** Each item's sort key and point, when paging (the next page starts after the last one). */
  keys: { createdMs: number; pkey: string; lng: number; lat: number }[] | undefined;
}

/**
 * Days prepared ahead of the one being sent. One: DuckDB builds the next day while this one
 * goes out; two overlapped more (about 20% faster on a cold year) but DuckDB's working memory
 * then took the server past 300 MB.
 */
const READ_AHEAD = 1;
/** Bytes of parts one rendering query reads at most (unless one hour alone is more). */
const QUERY_BYTES = 256 * 1024;

/** Consecutive runs of `items` whose sizes add up to about `limit` each. */
export function groupBySize<T>(items: readonly T[], size: (item: T) => number, limit: number): T[][] {
  const groups: T[][] = [];
  let current: T[] = [];
  let bytes = 0;
  for (const item of items) {
    if (current.length > 0 && bytes + size(item) > limit) {
      groups.push(current);
      current = [];
      bytes = 0;
    }
    current.push(item);
    bytes += size(item);
  }
  if (current.length > 0) groups.push(current);
  return groups;
}

const ISO_MS = `strftime(created_at, '%Y-%m-%dT%H:%M:%S.%gZ')`;

/** SPEC 2.3 properties in their published order, as a DuckDB struct (to_json keeps the order). */
const PROPERTIES = `{'pkey': pkey, 'created_at': ${ISO_MS}, 'source': source, 'status': status, 'url': url,
  'image_url': image_url, 'disaster_type': disaster_type, 'report_data': report_data,
  'tags': {'instance_region_code': instance_region_code, 'local_area_id': local_area_id}, 'title': title, 'text': text}`;

const csv = (col: string) => `coalesce('"' || replace(${col}::VARCHAR, '"', '""') || '"', '')`;

export const CSV_HEADER =
  'pkey,created_at,source,status,url,image_url,disaster_type,report_data,instance_region_code,local_area_id,title,text,lng,lat';

const ITEM_SQL: Record<FeatureShape, string> = {
  csv: `concat_ws(',', ${csv('pkey')}, ${ISO_MS}, ${csv('source')}, ${csv('status')},
    ${csv('url')}, ${csv('image_url')}, ${csv('disaster_type')}, ${csv('report_data')}, ${csv('instance_region_code')},
    ${csv('local_area_id')}, ${csv('title')}, ${csv('text')}, to_json(lng)::VARCHAR, to_json(lat)::VARCHAR)`,
  // DuckDB serialises the whole struct in one call: cheaper than concatenating pieces.
  geojson: `to_json({'type': 'Feature', 'geometry': {'type': 'Point', 'coordinates': [lng, lat]}, 'properties': ${PROPERTIES}})::VARCHAR`,
  // What topojson-server makes of a Point feature: {type, coordinates, properties}.
  topojson: `to_json({'type': 'Point', 'coordinates': [lng, lat], 'properties': ${PROPERTIES}})::VARCHAR`,
};

/** The archive columns researchers get in bulk formats. */
/** A window's columns as DuckDB gives them to the Arrow writer. */
export type ArrowColumns = Record<(typeof EXPORT_COLUMNS)[number] | 'geometry', unknown[]>;

export const EXPORT_COLUMNS = [
  'pkey',
  'created_at',
  'source',
  'status',
  'url',
  'image_url',
  'disaster_type',
  'report_data',
  'instance_region_code',
  'local_area_id',
  'title',
  'text',
  'lng',
  'lat',
] as const;

interface Bound {
  sql: string;
  values: Record<string, DuckDBValue>;
  types: Record<string, DuckDBType>;
}

const micros = (ms: number) => timestampTZValue(BigInt(Math.trunc(ms)) * 1000n);

/**
 * The de-duplicated, filtered rows of some part files, as a SQL subquery with bound parameters.
 * `clean`: the files are single parts of distinct hours, or one compacted day, which hold each
 * pkey once (writers guarantee it, and a pkey lives in one hour), so there is nothing to
 * de-duplicate.
 */
function filteredRows(files: readonly string[], query: ArchiveQuery, clean = false): Bound {
  // Every copy of a report shares its created_at, place and received_at, so those filters
  // can run before de-duplication (and reach the Parquet row groups); the tags may differ
  // between copies (reprocessing), so the admin filter runs after it.
  const where = ['created_at BETWEEN $start AND $end'];
  const after: string[] = [];
  const values: Record<string, DuckDBValue> = { files: listValue([...files]), start: micros(query.startMs), end: micros(query.endMs) };
  const types: Record<string, DuckDBType> = { files: LIST(VARCHAR), start: TIMESTAMPTZ, end: TIMESTAMPTZ };
  if (query.admin !== undefined) {
    after.push('instance_region_code = $admin');
    values.admin = query.admin;
    types.admin = VARCHAR;
  }
  if (query.bbox) {
    where.push('lng BETWEEN $minLng AND $maxLng AND lat BETWEEN $minLat AND $maxLat');
    [values.minLng, values.minLat, values.maxLng, values.maxLat] = query.bbox;
    Object.assign(types, { minLng: DOUBLE, minLat: DOUBLE, maxLng: DOUBLE, maxLat: DOUBLE });
  }
  const receivedBefore = query.after?.receivedBeforeMs ?? query.receivedBeforeMs;
  if (receivedBefore !== undefined) {
    where.push('received_at <= $receivedBefore');
    values.receivedBefore = micros(receivedBefore);
    types.receivedBefore = TIMESTAMPTZ;
  }
  if (query.after) {
    where.push('(created_at < $afterCreated OR (created_at = $afterCreated AND pkey < $afterPkey))');
    values.afterCreated = micros(query.after.createdMs);
    values.afterPkey = query.after.pkey;
    types.afterCreated = TIMESTAMPTZ;
    types.afterPkey = VARCHAR;
  }
  if (clean) return { sql: `(SELECT * FROM read_parquet($files) WHERE ${[...where, ...after].join(' AND ')})`, values, types };
  return {
    sql: `(SELECT * FROM (SELECT * EXCLUDE (filename) FROM read_parquet($files, filename = true)
             WHERE ${where.join(' AND ')} QUALIFY ${DEDUPE_WINDOW})
           ${after.length > 0 ? `WHERE ${after.join(' AND ')}` : ''})`,
    values,
    types,
  };
}

/** The parts of one UTC day of a window. */
export interface DayPlan {
  dayMs: number;
  /** Compacted parts holding the whole day (one, once compaction has run). */
  whole: ObjectInfo[];
  /** Hour parts, newest hour first. */
  hours: HourParts[];
}

export function partsOf(day: DayPlan): ObjectInfo[] {
  return [...day.whole, ...day.hours.flatMap((h) => h.parts)];
}

/**
 * The files hold each pkey once, so there is nothing to de-duplicate (see `filteredRows`):
 * one compacted part alone, or single parts of distinct hours.
 */
function isClean(whole: readonly ObjectInfo[], hours: readonly HourParts[]): boolean {
  return whole.length === 0 ? hours.every((h) => h.parts.length === 1) : whole.length === 1 && hours.length === 0;
}

const isDayClean = (day: DayPlan) => isClean(day.whole, day.hours);

/** No filter but the window: an hour inside it is answered whole. */
function isUnfiltered(query: ArchiveQuery): boolean {
  return query.admin === undefined && query.bbox === undefined && query.after === undefined && query.receivedBeforeMs === undefined;
}

function unionBbox(a: [number, number, number, number], b: [number, number, number, number]): [number, number, number, number] {
  return [Math.min(a[0], b[0]), Math.min(a[1], b[1]), Math.max(a[2], b[2]), Math.max(a[3], b[3])];
}

export class ArchiveReader {
  constructor(
    private readonly store: ObjectStore,
    private readonly cache: PartCache,
    private readonly db: DuckDb,
    /** Rendered hours; without it every answer is built by DuckDB. */
    private readonly rendered?: RenderCache,
  ) {}

  /** The window's parts, grouped by UTC day, newest day first. */
  async plan(query: ArchiveQuery): Promise<DayPlan[]> {
    const endMs = query.after ? Math.min(query.endMs, query.after.createdMs) : query.endMs;
    const partitions = await listWindowParts(this.store, query.startMs, endMs);
    const days: DayPlan[] = [];
    for (let i = partitions.length - 1; i >= 0; i--) {
      const partition = partitions[i]!;
      const dayMs = dayStart(partition.hourMs);
      let day = days[days.length - 1];
      if (!day || day.dayMs !== dayMs) days.push((day = { dayMs, whole: [], hours: [] }));
      if (partition.wholeDay) day.whole.push(...partition.parts);
      else day.hours.push(partition);
    }
    return days;
  }

  /**
   * Serialized reports, newest first, one batch per UTC day (the page's limit respected).
   * Whole windows come as one run of joined items per hour (`separator` between items),
   * from the render cache or built by DuckDB, while the next days are already being read;
   * pages come item by item, with keys.
   */
  async *batches(query: ArchiveQuery, shape: FeatureShape, days?: DayPlan[], separator = ','): AsyncIterable<FeatureBatch> {
    const plan = days ?? (await this.plan(query));
    if (query.limit === undefined) {
      const run = (i: number) => this.renderDay(plan[i]!, query, shape, separator);
      // The next days are prepared (queried, or looked up in the render cache) while one is
      // sent. Memory: READ_AHEAD days in preparation; cached hours are read as they are sent.
      const inFlight: Promise<FeatureBatch>[] = [];
      for (let i = 0; i < Math.min(READ_AHEAD, plan.length); i++) inFlight.push(run(i));
      try {
        for (let i = 0; i < plan.length; i++) {
          const batch = await inFlight.shift()!;
          if (i + READ_AHEAD < plan.length) inFlight.push(run(i + READ_AHEAD));
          yield batch;
        }
      } finally {
        for (const p of inFlight) p.catch(() => undefined);
      }
      return;
    }
    let remaining = query.limit;
    for (let i = 0; i < plan.length && remaining > 0; i++) {
      const day = plan[i]!;
      const batch = await this.queryDay(await this.files(partsOf(day)), query, shape, remaining, isDayClean(day));
      remaining -= batch.items.length;
      yield batch;
    }
  }

  /** How many reports the window holds (the same filters as the answer). */
  async count(query: ArchiveQuery): Promise<number> {
    const days = await this.plan(query);
    let total = 0;
    // A month of days per query: few round trips, bounded memory for the distinct set.
    for (let i = 0; i < days.length; i += 31) {
      const month = days.slice(i, i + 31);
      const files = await this.files(month.flatMap(partsOf));
      const bound = filteredRows(files, query, month.every(isDayClean));
      total += await this.db.withConnection(async (conn) => {
        const reader = await conn.runAndReadAll(`SELECT count(*)::BIGINT AS n FROM ${bound.sql}`, bound.values, bound.types);
        return Number(reader.getRowObjectsJS()[0]?.n ?? 0);
      });
    }
    return total;
  }

  /** Counts by time bucket and place (the same filters as the answer), oldest bucket first. */
  async stats(query: ArchiveQuery, spec: StatsSpec): Promise<StatsRow[]> {
    const days = await this.plan(query);
    const partials: { bucketMs: number; key: string | null; count: number }[] = [];
    // A month of days per query, as count does.
    for (let i = 0; i < days.length; i += 31) {
      const month = days.slice(i, i + 31);
      const bound = filteredRows(await this.files(month.flatMap(partsOf)), query, month.every(isDayClean));
      await this.db.withConnection(async (conn) => {
        const reader = await conn.runAndReadAll(statsSql(bound.sql, spec), bound.values, bound.types);
        for (const row of reader.getRowObjectsJS()) {
          partials.push({ bucketMs: Number(row.bucket_ms), key: row.key === null ? null : String(row.key), count: Number(row.n) });
        }
      });
    }
    return mergeStats(partials, spec.offsetMinutes);
  }

  /**
   * Writes the window as one Parquet file (archive columns, newest first), by one streaming
   * COPY over the window's files in answer order. Hours with a single part are read as they
   * are (each part is de-duplicated and sorted newest first); an hour with several parts is
   * first merged into a de-duplicated, sorted segment. Memory stays bounded however long the
   * window: nothing is sorted beyond one hour.
   */
  async writeParquet(query: ArchiveQuery, out: string, planned?: DayPlan[]): Promise<void> {
    const days = planned ?? (await this.plan(query));
    const segmentDir = `${out}.segments`;
    await fs.mkdir(segmentDir, { recursive: true });
    try {
      const segments: string[] = [];
      const merge = async (parts: ObjectInfo[]) => {
        const segment = path.join(segmentDir, `${String(segments.length).padStart(6, '0')}.parquet`);
        const bound = filteredRows(await this.files(parts), query);
        await this.db.withConnection((conn) =>
          conn.run(`COPY (SELECT * FROM ${bound.sql} ORDER BY created_at DESC, pkey DESC) TO ${sqlString(segment)} (FORMAT parquet, COMPRESSION zstd)`, bound.values, bound.types),
        );
        segments.push(segment);
      };
      for (const day of days) {
        if (day.whole.length > 0) {
          if (isDayClean(day)) segments.push(...(await this.files(day.whole)));
          else await merge(partsOf(day));
          continue;
        }
        for (const hour of day.hours) {
          if (hour.parts.length === 1) segments.push(...(await this.files(hour.parts)));
          else await merge(hour.parts);
        }
      }
      await this.db.withConnection(async (conn) => {
        // GeoParquet: a WKB geometry column after the archive columns, and the `geo` file metadata.
        await prepareGeometry(conn);
        if (segments.length === 0) {
          await conn.run(`CREATE OR REPLACE TEMP TABLE "empty" ${ARCHIVE_TABLE_DDL}`);
          await conn.run(`COPY (SELECT ${EXPORT_COLUMNS.join(', ')}, ${GEOMETRY_SQL} FROM "empty") TO ${sqlString(out)} (FORMAT parquet, COMPRESSION zstd, ${geoCopyOption(undefined)})`);
          return;
        }
        // preserve_insertion_order (DuckDB's default) keeps the files' order and their rows' order.
        await conn.run('SET preserve_insertion_order = true');
        const bound = filteredRows(segments, query, true);
        const bbox = await bboxOf(conn, bound.sql, bound.values, bound.types);
        // Row groups of half DuckDB's default: its order-preserving writer then keeps both
        // threads busy (a year: 1.7 s instead of 2.2 s, for 8% more bytes).
        await conn.run(
          `COPY (SELECT ${EXPORT_COLUMNS.join(', ')}, ${GEOMETRY_SQL} FROM ${bound.sql}) TO ${sqlString(out)} (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 61440, ${geoCopyOption(bbox)})`,
          bound.values,
          bound.types,
        );
      });
    } finally {
      await fs.rm(segmentDir, { recursive: true, force: true });
    }
  }

  /**
   * Typed columns of the window, one UTC day at a time, newest first (for Arrow): the Parquet
   * answer's columns, geometry included, with its types (created_at in microseconds).
   */
  async *columns(query: ArchiveQuery, planned?: DayPlan[]): AsyncIterable<ArrowColumns> {
    const select = EXPORT_COLUMNS.map((c) => (c === 'created_at' ? 'epoch_us(created_at) AS created_at' : c === 'report_data' ? 'report_data::VARCHAR AS report_data' : c));
    for (const day of planned ?? (await this.plan(query))) {
      const bound = filteredRows(await this.files(partsOf(day)), query, isDayClean(day));
      yield await this.db.withConnection(async (conn) => {
        await prepareGeometry(conn);
        const reader = await conn.runAndReadAll(
          `SELECT ${select.join(', ')}, ${GEOMETRY_SQL} FROM ${bound.sql} ORDER BY created_at DESC, pkey DESC`,
          bound.values,
          bound.types,
        );
        return reader.getColumnsObjectJS() as unknown as ArrowColumns;
      });
    }
  }

  private files(parts: readonly ObjectInfo[]): Promise<string[]> {
    return Promise.all(parts.map((p) => this.cache.localFile(p)));
  }

  /**
   * One day as one run of joined items per hour, newest hour first. An hour's rendering is
   * the same text whoever asks, so for unfiltered windows it is taken from (and kept in) the
   * render cache, keyed by the parts that hold it; it serves a window that cuts the hour when
   * all its reports fall inside anyway. The other hours are built by DuckDB: one query for the
   * day, or for a few hours at a time of a storm day.
   */
  private async renderDay(day: DayPlan, query: ArchiveQuery, shape: FeatureShape, separator: string): Promise<FeatureBatch> {
    const partsOfHour = new Map(day.hours.map((h) => [h.hourMs, h.parts]));
    // A compacted day may hold any of its hours; otherwise only listed hours have reports.
    const candidates =
      day.whole.length > 0
        ? Array.from({ length: 24 }, (_, i) => day.dayMs + (23 - i) * HOUR_MS).filter((h) => h + HOUR_MS - 1 >= query.startMs && h <= query.endMs)
        : day.hours.map((h) => h.hourMs);
    const filesOf = (hours: number[]) => this.files([...day.whole, ...hours.flatMap((h) => partsOfHour.get(h) ?? [])]);
    const clean = (hours: number[]) => isClean(day.whole, day.hours.filter((h) => hours.includes(h.hourMs)));
    // A DuckDB query's memory grows with the text it builds (several times over): a storm
    // day is built a few hours at a time, each run reading about QUERY_BYTES of parts.
    const wholeBytes = day.whole.reduce((n, p) => n + p.size, 0) / 24;
    const bytesOf = (hourMs: number) => wholeBytes + (partsOfHour.get(hourMs) ?? []).reduce((n, p) => n + p.size, 0);
    // `keep` (the render cache) may swap each built hour for one read back when it is sent.
    const build = async (hours: number[], window: ArchiveQuery, keep?: (hourMs: number, r: RenderedHour) => Promise<RenderedHour>) => {
      const built = new Map<number, RenderedHour>();
      for (const group of groupBySize(hours, bytesOf, QUERY_BYTES)) {
        const narrowed = {
          ...window,
          startMs: Math.max(window.startMs, Math.min(...group)),
          endMs: Math.min(window.endMs, Math.max(...group) + HOUR_MS - 1),
        };
        const result = await this.queryHours(await filesOf(group), narrowed, shape, separator, clean(group));
        await Promise.all(
          group.map(async (hourMs) => {
            // An hour of a compacted day may be empty: kept too, so it is not asked again.
            const rendered = result.get(hourMs) ?? { text: new Uint8Array(0), bbox: undefined, minMs: hourMs, maxMs: hourMs };
            built.set(hourMs, keep ? await keep(hourMs, rendered) : rendered);
          }),
        );
      }
      return built;
    };
    const fits = (r: RenderedHour) => r.bbox === undefined || (r.minMs >= query.startMs && r.maxMs <= query.endMs);
    const cacheKey = (hourMs: number) => RenderCache.keyOf(`${shape}\u0000${separator}\u0000${hourMs}`, [...day.whole, ...(partsOfHour.get(hourMs) ?? [])]);
    const cache = isUnfiltered(query) ? this.rendered : undefined;

    const runs = new Map<number, RenderedHour>();
    const filtered: number[] = [];
    const unrendered: number[] = [];
    // Looked up together: each is a small file read, and waiting for them one by one adds up.
    const hits = await Promise.all(candidates.map((hourMs) => cache?.get(cacheKey(hourMs))));
    for (const [i, hourMs] of candidates.entries()) {
      const hit = hits[i];
      if (hit && fits(hit)) runs.set(hourMs, hit);
      else if (cache && !hit) unrendered.push(hourMs);
      else filtered.push(hourMs);
    }
    if (cache && unrendered.length > 0) {
      // Whole hours, so they can be kept; an hour the window cuts is used only if it fits.
      // Kept as they are built, and read back when sent: a storm day does not wait in memory.
      const built = await build(unrendered, { startMs: -Infinity, endMs: Infinity, admin: undefined }, (hourMs, r) => cache.put(cacheKey(hourMs), r));
      for (const hourMs of unrendered) {
        const rendered = built.get(hourMs)!;
        if (fits(rendered)) runs.set(hourMs, rendered);
        else filtered.push(hourMs);
      }
    }
    if (filtered.length > 0) for (const [hourMs, rendered] of await build(filtered, query)) runs.set(hourMs, rendered);
    const items: Run[] = [];
    let bbox: FeatureBatch['bbox'];
    for (const hourMs of candidates) {
      const run = runs.get(hourMs);
      // An hour without reports has no bbox.
      if (!run?.bbox) continue;
      items.push(run.text);
      bbox = bbox ? unionBbox(bbox, run.bbox) : run.bbox;
    }
    return { items, bbox, keys: undefined };
  }

  /** Each hour's items built and joined by DuckDB (bytes: JS only passes them on), by hour. */
  private async queryHours(files: string[], query: ArchiveQuery, shape: FeatureShape, separator: string, clean: boolean): Promise<Map<number, RenderedHour>> {
    const bound = filteredRows(files, query, clean);
    const sql = `SELECT epoch_ms(created_at) // ${HOUR_MS} AS hour,
        encode(string_agg(${ITEM_SQL[shape]}, ${sqlString(separator)} ORDER BY created_at DESC, pkey DESC)) AS items,
        min(lng) AS min_lng, min(lat) AS min_lat, max(lng) AS max_lng, max(lat) AS max_lat,
        min(epoch_ms(created_at)) AS min_ms, max(epoch_ms(created_at)) AS max_ms
      FROM ${bound.sql} GROUP BY 1`;
    return this.db.withConnection(async (conn) => {
      const reader = await conn.runAndReadAll(sql, bound.values, bound.types);
      const out = new Map<number, RenderedHour>();
      for (const row of reader.getRowsJS() as [bigint, Uint8Array, number, number, number, number, bigint, bigint][]) {
        out.set(Number(row[0]) * HOUR_MS, { text: row[1], bbox: [row[2], row[3], row[4], row[5]], minMs: Number(row[6]), maxMs: Number(row[7]) });
      }
      return out;
    });
  }

  private async queryDay(files: string[], query: ArchiveQuery, shape: FeatureShape, limit: number, clean: boolean): Promise<FeatureBatch> {
    const bound = filteredRows(files, query, clean);
    const sql = `SELECT ${ITEM_SQL[shape]} AS item, lng, lat, epoch_ms(created_at) AS created_ms, pkey
      FROM ${bound.sql}
      ORDER BY created_at DESC, pkey DESC
      ${Number.isFinite(limit) ? `LIMIT ${Math.trunc(limit)}` : ''}`;
    return this.db.withConnection(async (conn) => {
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
    });
  }
}

/** Output formats built from serialized items: how they open, separate and close. */
/** geojson and topojson: in the SPEC's envelope; featurecollection and topology: the same without it. */
export type TextFormat = 'geojson' | 'topojson' | 'ndjson' | 'csv' | 'featurecollection' | 'topology';

const SHAPE_OF: Record<TextFormat, FeatureShape> = {
  geojson: 'geojson',
  topojson: 'topojson',
  ndjson: 'geojson',
  csv: 'csv',
  featurecollection: 'geojson',
  topology: 'topojson',
};

export function shapeOf(format: TextFormat): FeatureShape {
  return SHAPE_OF[format];
}

/** What goes between two items of a format. */
export function separatorOf(format: TextFormat): string {
  return format === 'ndjson' || format === 'csv' ? '\n' : ',';
}

/** The archive answer as text, one piece at a time; geojson and topojson come in the {statusCode, result} envelope. */
export async function* renderArchive(batches: AsyncIterable<FeatureBatch>, format: TextFormat): AsyncIterable<string | Uint8Array> {
  const sep = separatorOf(format);
  if (format === 'geojson') yield '{"statusCode":200,"result":{"type":"FeatureCollection","features":[';
  else if (format === 'featurecollection') yield '{"type":"FeatureCollection","features":[';
  else if (format === 'topojson') yield '{"statusCode":200,"result":{"type":"Topology","objects":{"output":{"type":"GeometryCollection","geometries":[';
  else if (format === 'topology') yield '{"type":"Topology","objects":{"output":{"type":"GeometryCollection","geometries":[';
  else if (format === 'csv') yield `${CSV_HEADER}\n`;
  let first = true;
  let bbox: [number, number, number, number] | undefined;
  for await (const batch of batches) {
    if (batch.items.length === 0) continue;
    if (typeof batch.items[0] === 'string') {
      const lead = first || sep === '\n' ? '' : sep;
      yield lead + (batch.items as string[]).join(sep) + (sep === '\n' ? '\n' : '');
      first = false;
    } else {
      // Runs of joined items go out as they are: no copy into a JS string.
      for (const run of batch.items as Run[]) {
        if (!first && sep !== '\n') yield sep;
        yield typeof run === 'function' ? run() : run;
        if (sep === '\n') yield '\n';
        first = false;
      }
    }
    if (batch.bbox) bbox = bbox ? unionBbox(bbox, batch.bbox) : batch.bbox;
  }
  if (format === 'geojson') yield ']}}';
  else if (format === 'featurecollection') yield ']}';
  // topojson-server puts the bbox of the points on the topology, and none when there are no points.
  else if (format === 'topojson') yield `]}},"arcs":[]${bbox ? `,"bbox":${JSON.stringify(bbox)}` : ''}}}`;
  else if (format === 'topology') yield `]}},"arcs":[]${bbox ? `,"bbox":${JSON.stringify(bbox)}` : ''}}`;
}
