// Query-string checks shared by the endpoints. Every problem is collected,
// so one 400 tells the caller everything to fix.
import type { IncomingMessage } from 'node:http';
import type { Request } from 'express';
import type { AdminAreas } from '../boundaries/adminAreas.js';
import { BadRequestError, type ErrorDetail } from '../shared/errors.js';

const LNG = '-?(?:180(?:\\.0{1,15})?|(?:1[0-7]\\d|\\d{1,2})(?:\\.\\d{1,15})?)';
const LAT = '-?(?:90(?:\\.0{1,15})?|[0-8]?\\d(?:\\.\\d{1,15})?)';
/** bbox as the archive takes it, published as is: minLng,minLat,maxLng,maxLat in decimal degrees. */
export const BBOX_PATTERN = `^${LNG},${LAT},${LNG},${LAT}$`;
const BBOX = new RegExp(BBOX_PATTERN);

/** The archive's and the stream's bbox (BBOX_PATTERN), or the problem with it in `details`. */
export function readBbox(raw: string | undefined, details: ErrorDetail[]): [number, number, number, number] | undefined {
  if (raw === undefined) return undefined;
  const parts = raw.split(',');
  const [minLng, minLat, maxLng, maxLat] = parts.map(Number) as [number, number, number, number];
  if (parts.length !== 4 || parts.some((p) => !/^-?\d+(\.\d+)?$/.test(p))) {
    details.push({ in: 'query', field: 'bbox', message: 'must be minLng,minLat,maxLng,maxLat (four decimal numbers)' });
  } else if (!BBOX.test(raw)) {
    details.push({ in: 'query', field: 'bbox', message: 'longitudes must be within ±180 and latitudes within ±90, with at most 15 decimals' });
  } else if (minLng > maxLng || minLat > maxLat) {
    details.push({ in: 'query', field: 'bbox', message: 'minimums must not exceed maximums' });
  } else {
    return [minLng, minLat, maxLng, maxLat];
  }
  return undefined;
}

export type QueryValues = Record<string, string | undefined>;

/** Rejects unknown and repeated parameters; returns the single string values. */
export function readQuery(req: Request, allowed: readonly string[]): { values: QueryValues; details: ErrorDetail[] } {
  const details: ErrorDetail[] = [];
  const values: QueryValues = {};
  for (const [name, raw] of Object.entries(req.query as Record<string, unknown>)) {
    if (!allowed.includes(name)) {
      details.push({ in: 'query', field: name, message: unknownParameter(allowed) });
      continue;
    }
    if (typeof raw !== 'string') {
      details.push({ in: 'query', field: name, message: 'must be given once, as a plain value' });
      continue;
    }
    values[name] = raw;
  }
  return { values, details };
}

export function oneOf(
  values: QueryValues,
  name: string,
  allowed: readonly string[],
  fallback: string,
  details: ErrorDetail[],
): string {
  const value = values[name];
  if (value === undefined) return fallback;
  if (!allowed.includes(value)) {
    details.push({ in: 'query', field: name, message: `must be one of: ${allowed.join(', ')}` });
    return fallback;
  }
  return value;
}

/** A time as sent in a query: a '+' sent unencoded arrives as a space, which before four offset digits can only mean '+'. */
export function plusRestored(raw: string): string {
  return raw.replace(/ (\d{2}:?\d{2})$/, '+$1');
}

export function throwIfAny(details: ErrorDetail[], message = invalidPart(details)): void {
  if (details.length > 0) throw new BadRequestError(message, details);
}

const PART_WORDS: Record<ErrorDetail['in'], string> = { query: 'The query is', path: 'The path is', header: 'A request header is', body: 'The body is' };

/** What the problems are of: the query, the path, a header, the body, or several parts of the request. */
function invalidPart(details: readonly ErrorDetail[]): string {
  const parts = new Set(details.map((d) => d.in));
  const part = parts.size === 1 ? PART_WORDS[[...parts][0]!] : 'The request is';
  return `${part} invalid; see details for each problem.`;
}

/** The cities `admin` covers, or a problem for a code the boundaries (`of`: the current ones) lack. */
export function readAdmin(code: string, areas: AdminAreas, details: ErrorDetail[], of?: string): readonly string[] | undefined {
  const area = areas.get(code);
  if (!area) details.push({ in: 'query', field: 'admin', message: areas.problem(code, of) });
  return area?.cities;
}

/** What a 400 says of a parameter the operation does not take (also the OpenAPI document's example). */
export const unknownParameter = (allowed: readonly string[]) =>
  allowed.length > 0 ? `is not a known parameter (allowed: ${allowed.join(', ')})` : 'is not a known parameter (this operation takes none)';

/** A 400 for any query parameter: for operations that take none, served on Node's request (layer.ts). */
export function refuseQuery(req: IncomingMessage): void {
  const at = (req.url ?? '').indexOf('?');
  if (at < 0) return;
  const names = [...new Set(new URLSearchParams((req.url ?? '').slice(at + 1)).keys())];
  throwIfAny(names.map((name) => ({ in: 'query', field: name.slice(0, 100), message: unknownParameter([]) })));
}
