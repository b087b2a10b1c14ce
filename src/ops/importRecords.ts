// The records of an import file: NDJSON, GeoJSON or CSV, partner bodies or CogniCity-style
// export rows (point as GeoJSON or WKT), each mapped to a feed body for the feed's validation.
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import readline from 'node:readline';
import { parse as parseCsv } from 'csv-parse';

export type ImportFormat = 'ndjson' | 'geojson' | 'csv';

export function detectFormat(file: string): ImportFormat {
  const ext = file.toLowerCase().slice(file.lastIndexOf('.') + 1);
  if (ext === 'ndjson' || ext === 'jsonl') return 'ndjson';
  if (ext === 'geojson' || ext === 'json') return 'geojson';
  if (ext === 'csv') return 'csv';
  throw new Error(`cannot tell the format of ${file}; pass --format ndjson|geojson|csv`);
}

/** The file's records in order, each with the bytes it took (0 where the parser does not tell). */
export async function* records(file: string, format: ImportFormat): AsyncIterable<{ record: unknown; bytes: number }> {
  if (format === 'geojson') {
    const doc = JSON.parse(await fs.readFile(file, 'utf8')) as { type?: string; features?: unknown[] };
    const features = doc.type === 'FeatureCollection' && Array.isArray(doc.features) ? doc.features : [doc];
    for (const f of features) yield { record: f, bytes: 0 };
    return;
  }
  if (format === 'ndjson') {
    const lines = readline.createInterface({ input: createReadStream(file), crlfDelay: Infinity });
    for await (const line of lines) {
      if (line.trim() === '') continue;
      let record: unknown;
      try {
        record = JSON.parse(line);
      } catch {
        record = new RecordError('the line is not valid JSON');
      }
      yield { record, bytes: Buffer.byteLength(line) + 1 };
    }
    return;
  }
  const parser = createReadStream(file).pipe(parseCsv({ columns: true, bom: true, skip_empty_lines: true, trim: true }));
  for await (const row of parser) yield { record: row, bytes: 0 };
}

/** A record that cannot be read as a report at all (its reason goes to the rejects). */
export class RecordError extends Error {
  override name = 'RecordError';
}

type CityForPoint = (lng: number, lat: number) => string | null;

/** Maps one input record (partner body, GeoJSON Feature, CSV or CogniCity row) to a feed body. */
export function toPartnerInput(record: unknown, cityForPoint: CityForPoint): Record<string, unknown> {
  if (record instanceof RecordError) throw record;
  if (typeof record !== 'object' || record === null || Array.isArray(record)) throw new RecordError('the record is not an object');
  const r = record as Record<string, unknown>;
  const props = r.type === 'Feature' ? ((r.properties ?? {}) as Record<string, unknown>) : r;
  const location =
    r.type === 'Feature' ? pointOf(r.geometry) : pointOf(props.location ?? props.the_geom ?? props.geom ?? props.geometry ?? props.point) ?? latLngOf(props);
  if (!location) throw new RecordError('no point: give location {lat,lng}, lat/lng columns, or a GeoJSON or WKT point');
  const out: Record<string, unknown> = {
    post_id: props.post_id,
    created_at: normaliseTimestamp(props.created_at),
    partner_city: props.partner_city || cityForPoint(location.lng, location.lat) || undefined,
    disaster_type: props.disaster_type,
    location,
  };
  for (const field of ['title', 'text', 'image_url'] as const) {
    const value = props[field];
    if (value !== undefined && value !== null && value !== '') out[field] = value;
  }
  if (out.partner_city === undefined) {
    throw new RecordError('partner_city missing and the point is in no city of the current boundaries');
  }
  return Object.fromEntries(Object.entries(out).filter(([, v]) => v !== undefined));
}

function pointOf(value: unknown): { lat: number; lng: number } | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value === 'string') {
    const wkt = /^\s*(?:SRID=4326;)?POINT\s*\(\s*(-?[\d.]+(?:e-?\d+)?)\s+(-?[\d.]+(?:e-?\d+)?)\s*\)\s*$/i.exec(value);
    if (wkt) return { lng: Number(wkt[1]), lat: Number(wkt[2]) };
    try {
      return pointOf(JSON.parse(value));
    } catch {
      throw new RecordError(`not a GeoJSON or WKT point: ${value.slice(0, 60)}`);
    }
  }
  if (typeof value === 'object') {
    const v = value as { type?: string; coordinates?: unknown; lat?: unknown; lng?: unknown };
    if (v.type === 'Point' && Array.isArray(v.coordinates) && v.coordinates.length >= 2) {
      return { lng: Number(v.coordinates[0]), lat: Number(v.coordinates[1]) };
    }
    if ('lat' in v || 'lng' in v) return { lat: numberOrRaw(v.lat) as number, lng: numberOrRaw(v.lng) as number };
  }
  throw new RecordError('the point is not a GeoJSON Point, a WKT POINT or {lat, lng}');
}

function latLngOf(props: Record<string, unknown>): { lat: number; lng: number } | undefined {
  const lat = props.lat ?? props.latitude;
  const lng = props.lng ?? props.lon ?? props.long ?? props.longitude;
  if (lat === undefined || lng === undefined || lat === '' || lng === '') return undefined;
  return { lat: numberOrRaw(lat) as number, lng: numberOrRaw(lng) as number };
}

/** CSV gives strings; keep non-numeric ones as they are so validation names them. */
function numberOrRaw(value: unknown): unknown {
  if (typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value))) return Number(value);
  return value;
}

/** Accepts PostgreSQL's `2017-01-01 00:00:00+07` as CogniCity exports write it. */
function normaliseTimestamp(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  const m = /^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2}(?:\.\d+)?)(Z|[+-]\d{2}(?::?\d{2})?)$/.exec(value.trim());
  if (!m) return value;
  const zone = m[3]!.length === 3 ? `${m[3]}:00` : m[3];
  return `${m[1]}T${m[2]}${zone}`;
}
