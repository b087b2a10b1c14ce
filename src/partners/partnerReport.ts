// The partner report (docs/http.md, "POST /feeds/partner"): its JSON schema (ajv) and its normal form.
import { Ajv, type ErrorObject } from 'ajv';
import addFormats from 'ajv-formats';
import type { PlaceNames } from '../boundaries/placeNames.js';
import type { ErrorDetail } from '../shared/errors.js';
import { parseOffsetDateTime } from '../shared/offsetDateTime.js';

export const DISASTER_TYPES = ['flood'] as const;
/** Reports dated further ahead than this are rejected (clock skew allowance). */
export const MAX_FUTURE_MS = 3_600_000;
/**
 * The earliest instant the service takes, on the feed and in archive queries: no flood
 * report predates the Unix epoch, and an earlier year (0070, 1900) is a client's mistake.
 */
export const EARLIEST_MS = Date.UTC(1970, 0, 1);
/** The latest instant an archive query may name: the last a four-digit year writes. */
export const LATEST_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/**
 * A calendar date that exists (days per month, leap years), in the years the service takes
 * (1970–9999 once the offset is applied, so 1969 too: its last hours west of UTC are 1970 in
 * UTC): the published patterns say exactly what the parser accepts, so a client that checks
 * against the OpenAPI document never sends a date the service refuses as impossible.
 */
const YEAR = '(?:19(?:69|[7-9]\\d)|[2-9]\\d{3})';
const LEAP_YEAR = '(?:19(?:7[26]|8[048]|9[26])|[2-9]\\d(?:0[48]|[2468][048]|[13579][26])|(?:[2468][048]|[3579][26])00)';
const CALENDAR_DATE =
  `(?:${YEAR}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|02-(?:0[1-9]|1\\d|2[0-8]))|${LEAP_YEAR}-02-29)`;
const TIME = '(?:[01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(?:\\.\\d{1,9})?';
const OFFSET = '(?:0\\d|1[0-4]):?[0-5]\\d';
/** ISO 8601 date-time with an explicit offset: Z, ±HH:MM or ±HHMM; fractional seconds allowed. */
export const DATE_TIME_PATTERN = `^${CALENDAR_DATE}T${TIME}(?:Z|[+-]${OFFSET})$`;
/** The same in a query string, where an unencoded `+` arrives as a space (read as `+`). */
export const QUERY_DATE_TIME_PATTERN = `^${CALENDAR_DATE}T${TIME}(?:Z|[+ -]${OFFSET})$`;
const DATE_TIME = DATE_TIME_PATTERN;
/** OGC API datetime: an RFC 3339 date-time (t and z in either case) or a date; an interval a/b whose open ends are `..` or empty. */
// A `+` sent unencoded arrives as a space, read as `+` (plusRestored).
const DATETIME_END = `${CALENDAR_DATE}(?:[Tt]${TIME}(?:[Zz]|[+ -]${OFFSET}))?`;
export const OGC_DATETIME_PATTERN = `^(?:${DATETIME_END}|(?:${DATETIME_END}|\\.\\.)?/(?:${DATETIME_END}|\\.\\.)?)$`;

/**
 * A post_id written as a string (a JSON string, a path segment, a CLI option): digits, leading
 * zeros allowed (normalised: "0010" is post_id 10, as SPEC's post_id is an integer), its value up
 * to 2^53-1 (`postIdOf`).
 */
export const POST_ID_STRING_PATTERN = '^\\d{1,40}$';
const POST_ID_STRING = new RegExp(POST_ID_STRING_PATTERN);

/** The post_id a string of digits names; undefined when it is not one or exceeds 2^53-1. */
export function postIdOf(raw: string): number | undefined {
  if (!POST_ID_STRING.test(raw) || BigInt(raw) > BigInt(Number.MAX_SAFE_INTEGER)) return undefined;
  return Number(raw);
}

export const partnerReportSchema = {
  $id: 'PartnerReport',
  type: 'object',
  additionalProperties: false,
  required: ['post_id', 'created_at', 'partner_city', 'disaster_type', 'location'],
  properties: {
    post_id: {
      description: 'Unique identifier of the report at the source. A string of digits is accepted and normalised ("0010" is 10), its value at most 2^53-1 (9007199254740991) as an integer\'s.',
      oneOf: [
        { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
        { type: 'string', pattern: POST_ID_STRING_PATTERN },
      ],
    },
    created_at: {
      type: 'string',
      pattern: DATE_TIME,
      maxLength: 40,
      description: 'ISO 8601 with an offset (Z, ±HH:MM or ±HHMM), from 1970-01-01T00:00:00Z once the offset is applied, and not more than an hour in the future',
    },
    title: { type: 'string', maxLength: 500, description: 'At most 500 characters (code points); a NUL or a lone surrogate is refused.' },
    text: { type: 'string', maxLength: 10_000, description: 'At most 10,000 characters (code points); a NUL or a lone surrogate is refused.' },
    image_url: {
      type: 'string',
      format: 'uri',
      pattern: '^https?://',
      maxLength: 2048,
      description: 'An http(s) URL (RFC 3986, a lower-case scheme) with a host, a port if any from 1 to 65535, and no user name or password (it would be published).',
    },
    partner_city: {
      type: 'string',
      minLength: 1,
      maxLength: 200,
      description:
        'City, municipality or province the report comes from, by name, in the current boundary version: "Quezon City" and "Pampanga" in the two-city set; nationally any of them, forgiving case, accents and "City of X"/"X City", as "Name, Province" where a name repeats (an unknown or ambiguous name is a 400 listing the closest names)',
    },
    disaster_type: { type: 'string', enum: [...DISASTER_TYPES] },
    location: {
      type: 'object',
      additionalProperties: false,
      required: ['lat', 'lng'],
      properties: {
        lat: { type: 'number', minimum: -90, maximum: 90 },
        lng: { type: 'number', minimum: -180, maximum: 180 },
      },
    },
  },
} as const;

/** A validated report in normal form: what is stored and archived. */
export interface PartnerReport {
  post_id: number;
  /** ISO 8601 in UTC with milliseconds. */
  created_at: string;
  title: string | null;
  text: string | null;
  image_url: string | null;
  /** The canonical label of the place it names (see parsePartnerReport). */
  partner_city: string;
  disaster_type: (typeof DISASTER_TYPES)[number];
  location: { lat: number; lng: number };
}

/**
 * The report as a purged retraction keeps it: its personal fields (those the archive's schema
 * marks personal that a partner sends: title, text, image_url) cleared; place, time and the rest kept.
 */
export function withoutPersonalFields(report: PartnerReport): PartnerReport {
  return { ...report, title: null, text: null, image_url: null };
}

const ajv = new Ajv({ allErrors: true, strict: true, verbose: true });
addFormats.default(ajv);
const validateSchema = ajv.compile(partnerReportSchema);

const POST_ID_MESSAGE = 'must be a non-negative integer (or a string of digits) up to 2^53-1';

const LONE_SURROGATE_MESSAGE = 'holds a lone UTF-16 surrogate (an escape such as \\ud800 without its pair): not valid Unicode';

const NUL_MESSAGE = 'holds U+0000 (NUL), which CSV readers such as GDAL and pandas stop at: leave it out';

export class InvalidReportError extends Error {
  override name = 'InvalidReportError';
  constructor(readonly details: ErrorDetail[]) {
    super(details.map((d) => `${d.field}: ${d.message}`).join('; '));
  }
}

/**
 * Validates a parsed body and returns its normal form; throws InvalidReportError listing every
 * problem. With `places` (the feed, imports), `partner_city` must name one place of the current
 * boundary version and is kept as its canonical label; without (the worker, re-reading what was
 * accepted under some version), it is kept as it is.
 */
export function parsePartnerReport(body: unknown, now = Date.now(), places?: Pick<PlaceNames, 'resolve'>): PartnerReport {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new InvalidReportError([{ in: 'body', field: '(body)', message: 'must be a JSON object' }]);
  }
  const named = (body as { partner_city?: unknown }).partner_city;
  const city = places && typeof named === 'string' && named.length > 0 && named.length <= 200 ? partnerCityOf(named, places) : undefined;
  // Every problem at once: the schema's, then the checks beyond it of each field the schema let
  // through (a partner fixing the first list must not meet a second).
  const details: ErrorDetail[] = validateSchema(body) ? [] : schemaDetails(validateSchema.errors ?? []);
  const refused = new Set(details.map((d) => d.field));
  if (city && 'problem' in city) details.push(city.problem);
  const input = body as unknown as Record<string, unknown> & { location: { lat: number; lng: number } };
  const passed = (field: string) => !refused.has(field) && input[field] !== undefined;
  // The schema caps numbers; a string of digits can still exceed 2^53-1 and would lose precision.
  if (passed('post_id') && typeof input.post_id === 'string' && postIdOf(input.post_id) === undefined) {
    details.push({ in: 'body', field: 'post_id', message: POST_ID_MESSAGE });
  }
  const createdMs = passed('created_at') ? parseOffsetDateTime(String(input.created_at)) : undefined;
  if (passed('created_at')) {
    if (createdMs === undefined) {
      details.push({ in: 'body', field: 'created_at', message: 'is not a real date and time' });
    } else if (createdMs > now + MAX_FUTURE_MS) {
      details.push({ in: 'body', field: 'created_at', message: 'is more than an hour in the future' });
    } else if (createdMs < EARLIEST_MS) {
      details.push({ in: 'body', field: 'created_at', message: 'must not be before 1970-01-01T00:00:00Z' });
    }
  }
  // As invalid UTF-8 bytes are refused (utf8.ts), so is their escaped form: nothing is kept altered.
  for (const field of ['title', 'text', 'image_url'] as const) {
    const value = input[field];
    if (passed(field) && typeof value === 'string' && !isWellFormed(value)) details.push({ in: 'body', field, message: LONE_SURROGATE_MESSAGE });
  }
  // As it arrives (a report accepted before this check is re-read as it is): a NUL ends a CSV
  // row or cell for its readers, silently, where every other format keeps it.
  if (places) {
    for (const field of ['title', 'text'] as const) {
      const value = input[field];
      if (passed(field) && typeof value === 'string' && value.includes('\u0000')) details.push({ in: 'body', field, message: NUL_MESSAGE });
    }
  }
  // A URL the schema's pattern lets through but no client can fetch (no host, a port past
  // 65535): refused as it arrives; a report accepted before this check is re-read as it is.
  if (places && passed('image_url') && typeof input.image_url === 'string') {
    if (!isFetchableUrl(input.image_url)) {
      details.push({ in: 'body', field: 'image_url', message: 'must be an http(s) URL with a host written after // (no backslash; a port, if any, from 1 to 65535)' });
    } else if (hasCredentials(input.image_url)) {
      // Published with the report in every format: a password in it would be too.
      details.push({ in: 'body', field: 'image_url', message: 'must not carry a user name or password (user:password@): it is published with the report' });
    }
  }
  if (details.length > 0) throw new InvalidReportError(details);
  return {
    post_id: Number(input.post_id),
    created_at: new Date(createdMs!).toISOString(),
    title: typeof input.title === 'string' ? input.title : null,
    text: typeof input.text === 'string' ? input.text : null,
    image_url: typeof input.image_url === 'string' ? input.image_url : null,
    partner_city: city && 'label' in city ? city.label : (input.partner_city as string),
    disaster_type: input.disaster_type as PartnerReport['disaster_type'],
    location: { lat: input.location.lat, lng: input.location.lng },
  };
}

/** Why a URL is not one as RFC 3986 writes it, for a partner to mend. */
function imageUrlMessage(value: unknown): string {
  const text = String(value);
  if (!/^https?:\/\//.test(text)) return /^https?:\/\//i.test(text) ? 'must begin http:// or https://, in lower case' : 'must be an http(s) URL, beginning http:// or https://';
  if (/[^\x21-\x7e]/.test(text)) return 'must be written as RFC 3986 has it: spaces and characters outside ASCII percent-encoded (%C3%BC for ü), a host outside ASCII in punycode (xn--…)';
  return 'must be an http(s) URL as RFC 3986 writes it (characters such as | { } " < > percent-encoded)';
}

/** Whether `text` is an http(s) URL WHATWG's parser (a browser's, fetch's) reads, with a host. */
function isFetchableUrl(text: string): boolean {
  // The host as written: WHATWG URL (a browser) reads `http:///x` or `http:\\x` as host x, as
  // other clients (curl, Python) do not; the URL is kept as sent, so it must mean one thing.
  if (!/^https?:\/\/[^/\\?#]/i.test(text) || text.includes('\\')) return false;
  try {
    const url = new URL(text);
    // Port 0 parses, but no client can connect to it.
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '' && url.port !== '0';
  } catch {
    return false;
  }
}

/** Whether an http(s) URL names a user or password before its host. */
function hasCredentials(text: string): boolean {
  const url = new URL(text);
  return url.username !== '' || url.password !== '';
}

/**
 * Whether a string is whole Unicode: a JSON escape such as "\ud800" without its pair makes a lone
 * UTF-16 surrogate, which no store or encoder keeps as sent (each writes U+FFFD in its place).
 */
function isWellFormed(value: string): boolean {
  return (value as string & { isWellFormed(): boolean }).isWellFormed();
}

/** What `partner_city` names in the current boundary version: its canonical label, or the problem to report. */
function partnerCityOf(value: string, places: Pick<PlaceNames, 'resolve'>): { label: string } | { problem: ErrorDetail } {
  const found = places.resolve(value);
  if (found.ok) return { label: found.label };
  const names = found.suggestions.map((s) => JSON.stringify(s)).join(', ');
  const message =
    found.reason === 'ambiguous'
      ? `names several places; send one of: ${names}`
      : `is not a city, municipality or province of the current boundaries${names ? `; closest: ${names}` : ''}`;
  return { problem: { in: 'body', field: 'partner_city', message } };
}

function schemaDetails(errors: ErrorObject[]): ErrorDetail[] {
  const out = new Map<string, ErrorDetail>();
  for (const e of errors) {
    let field = e.instancePath.replace(/^\//, '').replace(/\//g, '.');
    let message: string;
    switch (e.keyword) {
      case 'required':
        field = [field, (e.params as { missingProperty: string }).missingProperty].filter(Boolean).join('.');
        message = 'is required';
        break;
      case 'additionalProperties':
        field = [field, (e.params as { additionalProperty: string }).additionalProperty].filter(Boolean).join('.');
        message = 'is not a known field';
        break;
      case 'enum':
        message = `must be one of: ${(e.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ')}`;
        break;
      case 'oneOf':
      case 'type':
        message = field === 'post_id' ? POST_ID_MESSAGE : `must be ${describeType(e)}`;
        break;
      case 'pattern':
      case 'format':
        message =
          field === 'created_at'
            ? createdAtMessage(e.data)
            : field === 'image_url'
              ? imageUrlMessage(e.data)
              : field === 'post_id'
                ? POST_ID_MESSAGE
                : `must match ${e.keyword}`;
        break;
      case 'minimum':
      case 'maximum':
        message =
          field === 'post_id'
            ? POST_ID_MESSAGE
            : `must be between ${field.endsWith('lat') ? '-90 and 90' : '-180 and 180'}`;
        break;
      case 'maxLength':
        message = `must be at most ${(e.params as { limit: number }).limit} characters`;
        break;
      default:
        message = e.message ?? 'is invalid';
    }
    // One line per field: oneOf branches report the same field more than once.
    if (!out.has(field)) out.set(field, { in: 'body', field: field || '(body)', message });
  }
  return [...out.values()];
}

/** Why a created_at is refused by the pattern: a date before 1970 is said so, the rest is a format problem. */
function createdAtMessage(value: unknown): string {
  const ms = typeof value === 'string' ? parseOffsetDateTime(value) : undefined;
  if (ms !== undefined && ms < EARLIEST_MS) return 'must not be before 1970-01-01T00:00:00Z';
  return 'must be an ISO 8601 date-time with an offset, e.g. 2026-11-21T13:05:00+08:00';
}

function describeType(e: ErrorObject): string {
  const type = (e.params as { type?: string }).type;
  return type === 'integer' ? 'an integer' : type === 'object' ? 'an object' : type === 'array' ? 'an array' : `a ${type}`;
}
