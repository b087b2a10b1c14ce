// Answers archive windows with DuckDB over the hourly parts, newest first.
// The window is walked one UTC day at a time (newest day first) and sorted
// only within the day, so memory stays flat however long the window is.
// A pkey always lives in one hour (partitions are by created_at), so
// de-duplicating within a day is de-duplicating the whole answer.
import { LIST, TIMESTAMPTZ, VARCHAR, listValue, timestampTZValue } from '@duckdb/node-api';
import type { DuckDb } from '../duckdb.js';
import type { ObjectStore } from '../store/objectStore.js';
import type { PartCache } from './partCache.js';
import { listWindowParts, type HourParts } from './parts.js';

export interface ArchiveQuery {
  startMs: number;
  /** Inclusive. */
  endMs: number;
  admin: string | undefined;
}

export type FeatureShape = 'geojson' | 'topojson';

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

const ITEM_SQL: Record<FeatureShape, string> = {
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

  private files(day: HourParts[]): Promise<string[]> {
    return Promise.all(day.flatMap((h) => h.parts).map((p) => this.cache.localFile(p)));
  }

  private async queryDay(files: string[], query: ArchiveQuery, shape: FeatureShape): Promise<FeatureBatch> {
    const adminFilter = query.admin === undefined ? '' : 'AND instance_region_code = $admin';
    const sql = `
      SELECT ${ITEM_SQL[shape]} AS item, lng, lat
      FROM read_parquet($files)
      WHERE created_at BETWEEN $start AND $end ${adminFilter}
      QUALIFY row_number() OVER (PARTITION BY pkey ORDER BY received_at, boundary_version) = 1
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

/** The archive answer as text, in the {statusCode, result} envelope, one piece at a time. */
export async function* renderArchive(batches: AsyncIterable<FeatureBatch>, shape: FeatureShape): AsyncIterable<string> {
  yield shape === 'geojson'
    ? '{"statusCode":200,"result":{"type":"FeatureCollection","features":['
    : '{"statusCode":200,"result":{"type":"Topology","objects":{"output":{"type":"GeometryCollection","geometries":[';
  let first = true;
  let bbox: [number, number, number, number] | undefined;
  for await (const batch of batches) {
    if (batch.items.length === 0) continue;
    yield (first ? '' : ',') + batch.items.join(',');
    first = false;
    if (batch.bbox) {
      bbox = bbox
        ? [Math.min(bbox[0], batch.bbox[0]), Math.min(bbox[1], batch.bbox[1]), Math.max(bbox[2], batch.bbox[2]), Math.max(bbox[3], batch.bbox[3])]
        : batch.bbox;
    }
  }
  if (shape === 'geojson') yield ']}}';
  // topojson-server puts the bbox of the points on the topology, and none when there are no points.
  else yield `]}},"arcs":[]${bbox ? `,"bbox":${JSON.stringify(bbox)}` : ''}}}`;
}
