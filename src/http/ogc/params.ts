// The query parameters of OGC API – Features items: bbox, datetime, limit.
// Every problem is collected, as everywhere else, so one 400 lists them all.
import type { ErrorDetail } from '../../shared/errors.js';
import { EARLIEST_MS, LATEST_MS, MAX_FUTURE_MS } from '../../partners/partnerReport.js';
import { parseOffsetDateTime } from '../../shared/offsetDateTime.js';
import { plusRestored } from '../query.js';

export const DEFAULT_LIMIT = 10;
export const MAX_LIMIT = 10_000;

export type Bbox = [number, number, number, number];

/** A resolved time window, both ends inclusive. */
export interface Interval {
  startMs: number;
  endMs: number;
  /** Whether the end is open (`..`, or no datetime): the latest a report can be, which moves with the clock. */
  openEnd?: boolean;
}

const RANGE = 'from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z';
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;

/** A decimal number as JSON writes one (and a leading + or a bare fraction, as people type them). */
const DECIMAL = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;

/** OGC bbox: minLon,minLat,maxLon,maxLat (or six numbers with heights, which points without height ignore). */
export function readBbox(raw: string | undefined, details: ErrorDetail[]): Bbox | undefined {
  if (raw === undefined) return undefined;
  // A '+' sent unencoded (`+121.0`, `1e+2`) arrives as a space, which no number holds otherwise.
  const parts = raw.replace(/ /g, '+').split(',');
  // Decimal numbers only: Number() would also read hex, octal, binary and padded text.
  const nums = parts.map((p) => (DECIMAL.test(p) ? Number(p) : NaN));
  if ((parts.length !== 4 && parts.length !== 6) || nums.some((n) => !Number.isFinite(n))) {
    details.push({ in: 'query', field: 'bbox', message: 'must be minLon,minLat,maxLon,maxLat (four numbers, or six with heights)' });
    return undefined;
  }
  const [minLng, minLat, maxLng, maxLat] = parts.length === 4 ? nums : [nums[0]!, nums[1]!, nums[3]!, nums[4]!];
  if ([minLng, maxLng].some((v) => Math.abs(v!) > 180) || [minLat, maxLat].some((v) => Math.abs(v!) > 90)) {
    details.push({ in: 'query', field: 'bbox', message: 'longitudes must be within ±180 and latitudes within ±90' });
    return undefined;
  }
  if (minLat! > maxLat!) {
    details.push({ in: 'query', field: 'bbox', message: 'the minimum latitude must not exceed the maximum' });
    return undefined;
  }
  if (minLng! > maxLng!) {
    // A box across the antimeridian: the Philippines are nowhere near it; refuse rather than misread.
    details.push({ in: 'query', field: 'bbox', message: 'boxes across the antimeridian (minLon > maxLon) are not supported' });
    return undefined;
  }
  return [minLng!, minLat!, maxLng!, maxLat!];
}

export function readLimit(raw: string | undefined, details: ErrorDetail[]): number {
  if (raw === undefined) return DEFAULT_LIMIT;
  if (!/^\d+$/.test(raw) || Number(raw) < 1) {
    details.push({ in: 'query', field: 'limit', message: `must be a whole number of at least 1 (pages hold at most ${MAX_LIMIT})` });
    return DEFAULT_LIMIT;
  }
  // Part 1 (/req/core/fc-limit-response-1): a limit above the maximum is answered with the maximum, not an error.
  return Math.min(Number(raw), MAX_LIMIT);
}

/**
 * One end of a datetime: an RFC 3339 date-time, or a full date (its first or last millisecond).
 * An interval's start between two milliseconds is the later (reports keep milliseconds); an
 * instant is its millisecond (`asInstant`).
 */
function readEnd(sent: string, end: 'start' | 'end', asInstant = false): number | undefined {
  const text = plusRestored(sent);
  const date = DATE.exec(text);
  if (date) {
    const ms = parseOffsetDateTime(`${text}T00:00:00Z`);
    return ms === undefined ? undefined : end === 'start' ? ms : ms + 86_400_000 - 1;
  }
  // RFC 3339 allows a lower-case t and z.
  return parseOffsetDateTime(text.replace(/^(\d{4}-\d{2}-\d{2})t/, '$1T').replace(/z$/, 'Z'), end === 'start' && !asInstant);
}

/**
 * datetime: an instant, a date, or an interval `a/b` whose open ends are `..` or empty: an open
 * start is the archive's earliest instant, an open end an hour from now (nothing is dated
 * later), and no datetime at all is every report (OGC API – Features, /req/core/fc-time-response:
 * a filter only when one is asked for). Any span: items come a page at a time (`limit`), each
 * page read at its own cost, so the archive endpoint's bound on a window is not needed here.
 */
export function readDatetime(raw: string | undefined, details: ErrorDetail[], now = Date.now()): Interval {
  const latest = Math.min(LATEST_MS, now + MAX_FUTURE_MS);
  const fallback = { startMs: EARLIEST_MS, endMs: latest, openEnd: true };
  if (raw === undefined) return fallback;
  const problem = (message: string) => {
    details.push({ in: 'query', field: 'datetime', message });
    return fallback;
  };
  const usage = 'must be an RFC 3339 date-time (2026-11-21T05:00:00Z), a date, or an interval a/b with .. (or nothing) for an open end';
  const pieces = raw.split('/');
  if (pieces.length > 2) return problem(usage);
  if (pieces.length === 1) {
    const text = pieces[0]!;
    const startMs = readEnd(text, 'start', true);
    const endMs = readEnd(text, 'end');
    if (startMs === undefined || endMs === undefined) return problem(usage);
    if (startMs < EARLIEST_MS || endMs > LATEST_MS) return problem(`must be ${RANGE}`);
    return { startMs, endMs };
  }
  const [a, b] = pieces as [string, string];
  const open = (s: string) => s === '..' || s === '';
  if (open(a) && open(b)) return fallback;
  const startMs = open(a) ? undefined : readEnd(a, 'start');
  const endMs = open(b) ? undefined : readEnd(b, 'end');
  if ((!open(a) && startMs === undefined) || (!open(b) && endMs === undefined)) return problem(usage);
  if ((startMs !== undefined && (startMs < EARLIEST_MS || startMs > LATEST_MS)) || (endMs !== undefined && (endMs < EARLIEST_MS || endMs > LATEST_MS))) {
    return problem(`each end must be ${RANGE}`);
  }
  const end = endMs ?? Math.max(latest, startMs!);
  const start = startMs ?? EARLIEST_MS;
  // Against the start as sent: both ends within one millisecond (the start rounded up) is an interval no report is in.
  if (end < (startMs === undefined ? start : readEnd(a, 'start', true)!)) return problem('the interval must not end before it starts');
  return { startMs: start, endMs: end, ...(endMs === undefined && end === latest && { openEnd: true }) };
}
