// Answers archive windows with DuckDB over the hourly parts, newest first.
// The window is walked one UTC day at a time (newest day first) and sorted
// only within the day, so memory stays flat however long the window is.
// A pkey always lives in one hour (partitions are by created_at), so
// de-duplicating within a day is de-duplicating the whole answer.
import { LIST, TIMESTAMPTZ, VARCHAR, listValue, timestampTZValue } from '@duckdb/node-api';
import { sqlString, type DuckDb } from '../duckdb.js';
import { ARCHIVE_TABLE_DDL } from './row.js';
import type { ObjectStore } from '../store/objectStore.js';
import type { PartCache } from './partCache.js';
import { listWindowParts, type HourParts } from './parts.js';
import { DEDUPE_WINDOW } from './rows.js';

export interface ArchiveQuery {
  startMs: number;
  /** Inclusive. */
  endMs: number;
  admin: string | undefined;
}

/** How each report is serialized: a GeoJSON Feature, a TopoJSON Point geometry, or a CSV line. */
export type FeatureShape = 'geojson' | 'topojson' | 'csv';

export interface FeatureBatch {
  /** Serialized GeoJSON Features (or TopoJSON Point geometries), newest first. */
  items: string[];
  /** [minLng, minLat, maxLng, maxLat] of the batch, undefined when empty. */
  bbox: [number, number, number, number] | undefined;
}

const str = (col: string) => `coalesce(to_json(${col})::VARCHAR, 'null')`;

/** SPEC 2.3 properties in their published order. */
const PROPERTIES_JSON = `concat(
  '{"pkey":', ${str('pkey')},
  ',"created_at":"', strftime(created_at, '%Y-%m-%dT%H:%M:%S.%gZ'),
  '","source":', ${str('source')},
  ',"status":', ${str('status')},
  ',"url":', ${str('url')},
  ',"image_url":', ${str('image_url')},
  ',"disaster_type":', ${str('disaster_type')},
  ',"report_data":', coalesce(report_data::VARCHAR, 'null'),
  ',"tags":{"instance_region_code":', ${str('instance_region_code')},
  ',"local_area_id":', ${str('local_area_id')},
  '},"title":', ${str('title')},
  ',"text":', ${str('text')},
  '}')`;

const COORDS = `concat('[', to_json(lng)::VARCHAR, ',', to_json(lat)::VARCHAR, ']')`;

const csv = (col: string) => `coalesce('"' || replace(${col}::VARCHAR, '"', '""') || '"', '')`;

export const CSV_HEADER =
  'pkey,created_at,source,status,url,image_url,disaster_type,report_data,instance_region_code,local_area_id,title,text,lng,lat';

const ITEM_SQL: Record<FeatureShape, string> = {
  csv: `concat_ws(',', ${csv('pkey')}, strftime(created_at, '%Y-%m-%dT%H:%M:%S.%gZ'), ${csv('source')}, ${csv('status')},
    ${csv('url')}, ${csv('image_url')}, ${csv('disaster_type')}, ${csv('report_data')}, ${csv('instance_region_code')},
    ${csv('local_area_id')}, ${csv('title')}, ${csv('text')}, to_json(lng)::VARCHAR, to_json(lat)::VARCHAR)`,
  geojson: `concat('{"type":"Feature","geometry":{"type":"Point","coordinates":', ${COORDS}, '},"properties":', ${PROPERTIES_JSON}, '}')`,
  // What topojson-server makes of a Point feature: {type, coordinates, properties}.
  topojson: `concat('{"type":"Point","coordinates":', ${COORDS}, ',"properties":', ${PROPERTIES_JSON}, '}')`,
};

export class ArchiveReader {
  constructor(
    private readonly store: ObjectStore,
    private readonly cache: PartCache,
    private readonly db: DuckDb,
  ) {}

  /** The window's hours with parts, grouped by UTC day, newest day first. */
  async plan(query: ArchiveQuery): Promise<HourParts[][]> {
    const hours = await listWindowParts(this.store, query.startMs, query.endMs);
    const days: HourParts[][] = [];
    for (let i = hours.length - 1; i >= 0; i--) {
      const hour = hours[i]!;
      const day = Math.floor(hour.hourMs / 86_400_000);
      const current = days[days.length - 1];
      if (current && Math.floor(current[0]!.hourMs / 86_400_000) === day) current.push(hour);
      else days.push([hour]);
    }
    return days;
  }

  async *batches(query: ArchiveQuery, shape: FeatureShape): AsyncIterable<FeatureBatch> {
    const days = await this.plan(query);
    // Fetch one day ahead while DuckDB reads the current one.
    let next = days[0] ? this.files(days[0]) : undefined;
    for (let i = 0; i < days.length; i++) {
      const files = await next!;
      next = days[i + 1] ? this.files(days[i + 1]!) : undefined;
      yield await this.queryDay(files, query, shape);
    }
  }

  /**
   * Writes the window as one Parquet file (archive columns, newest first).
   * DuckDB streams it and spills to its temp directory, so memory stays bounded.
   */
  async writeParquet(query: ArchiveQuery, out: string): Promise<number> {
    const days = await this.plan(query);
    const files = (await Promise.all(days.map((d) => this.files(d)))).flat();
    const adminFilter = query.admin === undefined ? '' : `AND instance_region_code = ${sqlString(query.admin)}`;
    const source =
      files.length === 0
        ? `(SELECT * FROM (VALUES (NULL)) WHERE false)`
        : `(SELECT * EXCLUDE (filename) FROM read_parquet([${files.map(sqlString).join(', ')}], filename = true)
            WHERE epoch_ms(created_at) BETWEEN ${Math.trunc(query.startMs)} AND ${Math.trunc(query.endMs)} ${adminFilter}
            QUALIFY ${DEDUPE_WINDOW})`;
    return this.db.withConnection(async (conn) => {
      if (files.length === 0) {
        await conn.run(`CREATE TEMP TABLE "empty" ${ARCHIVE_TABLE_DDL}`);
        await conn.run(`COPY "empty" TO ${sqlString(out)} (FORMAT parquet, COMPRESSION zstd)`);
        return 0;
      }
      const result = await conn.run(
        `COPY (SELECT * FROM ${source} ORDER BY created_at DESC, pkey DESC) TO ${sqlString(out)} (FORMAT parquet, COMPRESSION zstd)`,
      );
      return result.rowsChanged;
    });
  }

  private files(day: HourParts[]): Promise<string[]> {
    return Promise.all(day.flatMap((h) => h.parts).map((p) => this.cache.localFile(p)));
  }

  private async queryDay(files: string[], query: ArchiveQuery, shape: FeatureShape): Promise<FeatureBatch> {
    const adminFilter = query.admin === undefined ? '' : 'AND instance_region_code = $admin';
    const sql = `
      SELECT ${ITEM_SQL[shape]} AS item, lng, lat
      FROM read_parquet($files, filename = true)
      WHERE created_at BETWEEN $start AND $end ${adminFilter}
      QUALIFY ${DEDUPE_WINDOW}
      ORDER BY created_at DESC, pkey DESC`;
    const values: Record<string, ReturnType<typeof listValue> | ReturnType<typeof timestampTZValue> | string> = {
      files: listValue(files),
      start: timestampTZValue(BigInt(query.startMs) * 1000n),
      end: timestampTZValue(BigInt(query.endMs) * 1000n),
    };
    const types: Record<string, ReturnType<typeof LIST> | typeof TIMESTAMPTZ | typeof VARCHAR> = {
      files: LIST(VARCHAR),
      start: TIMESTAMPTZ,
      end: TIMESTAMPTZ,
    };
    if (query.admin !== undefined) {
      values.admin = query.admin;
      types.admin = VARCHAR;
    }
    return this.db.withConnection(async (conn) => {
      const result = await conn.stream(sql, values, types);
      const items: string[] = [];
      let minX = Infinity;
      let minY = Infinity;
      let maxX = -Infinity;
      let maxY = -Infinity;
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
      }
      return { items, bbox: items.length > 0 ? [minX, minY, maxX, maxY] : undefined };
    });
  }
}

/** Output formats built from serialized items: how they open, separate and close. */
export type TextFormat = 'geojson' | 'topojson' | 'ndjson' | 'csv' | 'featurecollection';

const SHAPE_OF: Record<TextFormat, FeatureShape> = {
  geojson: 'geojson',
  topojson: 'topojson',
  ndjson: 'geojson',
  csv: 'csv',
  featurecollection: 'geojson',
};

export function shapeOf(format: TextFormat): FeatureShape {
  return SHAPE_OF[format];
}

/** The archive answer as text, one piece at a time; geojson and topojson come in the {statusCode, result} envelope. */
export async function* renderArchive(batches: AsyncIterable<FeatureBatch>, format: TextFormat): AsyncIterable<string> {
  const sep = format === 'ndjson' || format === 'csv' ? '\n' : ',';
  if (format === 'geojson') yield '{"statusCode":200,"result":{"type":"FeatureCollection","features":[';
  else if (format === 'featurecollection') yield '{"type":"FeatureCollection","features":[';
  else if (format === 'topojson') yield '{"statusCode":200,"result":{"type":"Topology","objects":{"output":{"type":"GeometryCollection","geometries":[';
  else if (format === 'csv') yield `${CSV_HEADER}\n`;
  let first = true;
  let bbox: [number, number, number, number] | undefined;
  for await (const batch of batches) {
    if (batch.items.length === 0) continue;
    const lead = first || sep === '\n' ? '' : sep;
    yield lead + batch.items.join(sep) + (sep === '\n' ? '\n' : '');
    first = false;
    if (batch.bbox) {
      bbox = bbox
        ? [Math.min(bbox[0], batch.bbox[0]), Math.min(bbox[1], batch.bbox[1]), Math.max(bbox[2], batch.bbox[2]), Math.max(bbox[3], batch.bbox[3])]
        : batch.bbox;
    }
  }
  if (format === 'geojson') yield ']}}';
  else if (format === 'featurecollection') yield ']}';
  // topojson-server puts the bbox of the points on the topology, and none when there are no points.
  else if (format === 'topojson') yield `]}},"arcs":[]${bbox ? `,"bbox":${JSON.stringify(bbox)}` : ''}}}`;
}
