// Pieces of the OpenAPI document shared by the schemas (openapi.ts) and the route table's
// operations (routes.ts): the answer envelope, error answers, the archive window's parameters.
import { QUERY_DATE_TIME_PATTERN } from '../partners/partnerReport.js';
import { BBOX_PATTERN, unknownParameter } from './query.js';

/** admin=: a code of the boundary version (version=, else the current one), at any level. */
export const ADMIN_DESCRIPTION =
  'Only reports of this area: a city code of the boundary version (`version`, else the current one) (`PH-QC`, `PH-PG` by default; nationally `PH-` and the PSGC code of a city or municipality), or nationally a province or region code (`PH-0305400000` Pampanga, `PH-0300000000` Central Luzon), which covers its cities. With updated_after, also the reports a re-tag moved out of the area since, with their new tags (a mirror of the area drops them). An unknown code is a 400 naming the closest.';
export const ADMIN_SCHEMA = { type: 'string', pattern: '^[A-Z]{2}-[A-Z0-9]{1,12}$', examples: ['PH-QC', 'PH-PG', 'PH-0300000000'] };

/** The {statusCode: 200, result} envelope of every GET answer. */
export const envelope = (result: object) => ({
  type: 'object',
  additionalProperties: false,
  required: ['statusCode', 'result'],
  properties: {
    statusCode: { const: 200 },
    watermark: { type: 'string', format: 'date-time', description: 'In answers to updated_after: the instant up to which the answer holds every change (the next updated_after).' },
    result,
  },
});

export const error = (description: string, example?: unknown) => ({
  description,
  content: {
    'application/json': {
      schema: { $ref: '#/components/schemas/Error' },
      ...(example ? { example } : {}),
    },
  },
});

/** A revalidation: If-None-Match names the ETag of the answer the request would get. */
export const notModified = { description: 'Not modified: If-None-Match names the ETag of the answer the request would get.' };

export const retryAfter = { 'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer' } } };

export const exampleFeature = {
  type: 'Feature',
  geometry: { type: 'Point', coordinates: [121.0497, 14.6516] },
  properties: {
    pkey: 'partner-1',
    created_at: '2026-11-21T05:05:00.000Z',
    source: 'partner',
    status: 'confirmed',
    url: null,
    image_url: null,
    disaster_type: 'flood',
    report_data: null,
    tags: { instance_region_code: 'PH-QC', local_area_id: '1381300020', province_code: null, region_code: null },
    title: 'Baha sa QMC',
    text: 'Hanggang tuhod',
  },
};

/** `version=`: a map's requests pinned to the boundary version it began with, across a publish. */
const SERVED_VERSION =
  "A boundary version's id, as GET /cities/levels gives it, while the service still serves it (the version published now or just before it, or one the answering process still keeps loaded); another is a 410. Without it, the current version.";
export const versionParam = {
  name: 'version',
  in: 'query',
  schema: { type: 'string', pattern: '^[0-9a-f]{24}$' },
  description: `The answer comes from this boundary version, so the parts of a map all come from one version. ${SERVED_VERSION}`,
};
/** The same for the archive: the areas admin= and by= name are that version's. */
export const archiveVersionParam = {
  ...versionParam,
  description: `admin= and by= (province, region) name the areas of this boundary version, so a map's counts and filters come from the version it was drawn with. ${SERVED_VERSION}`,
};
/** The 410 for a version no longer served. */
export const versionGone = error('The boundary version named by `version` is unknown or no longer served (and the query has no other problem): GET /cities/levels gives the current one.');

export const windowParams = [
  {
    name: 'start',
    in: 'query',
    description:
      'Required unless updated_after is given (then start and end may be left out together). Start of the window, inclusive: ISO 8601 with a UTC offset, from 1970-01-01T00:00:00Z (in UTC, once the offset is applied) to 9999-12-31T23:59:59Z. Send `+` as `%2B` (a space before the offset digits is read as `+`). With end not before start, the window spans at most ARCHIVE_MAX_WINDOW (366 days by default).',
    schema: { type: 'string', pattern: QUERY_DATE_TIME_PATTERN },
    example: '2026-11-21T00:00:00+0800',
  },
  {
    name: 'end',
    in: 'query',
    description:
      'Required unless updated_after is given (then start and end may be left out together). End of the window, inclusive (to the second given: all of that second, as reports keep milliseconds), in the same form and range as start; not before start; the window spans at most ARCHIVE_MAX_WINDOW (366 days by default).',
    schema: { type: 'string', pattern: QUERY_DATE_TIME_PATTERN },
    example: '2026-11-21T23:59:59+0800',
  },
  { name: 'admin', in: 'query', description: ADMIN_DESCRIPTION, schema: ADMIN_SCHEMA },
  archiveVersionParam,
  {
    name: 'bbox',
    in: 'query',
    description: 'Only reports inside minLng,minLat,maxLng,maxLat (inclusive; decimal degrees, up to 15 decimals; longitudes within ±180, latitudes within ±90); minimums must not exceed maximums.',
    schema: { type: 'string', pattern: BBOX_PATTERN },
    example: '121.0,14.6,121.1,14.7',
  },
  {
    name: 'include_retracted',
    in: 'query',
    description: 'true: retracted reports as tombstones (status retracted, title and text "", url and image_url null, place and time kept); false (default): left out. A sync (updated_after) always carries them as tombstones: false is refused there.',
    schema: { type: 'string', enum: ['true', 'false'], default: 'false' },
  },
  {
    name: 'updated_after',
    in: 'query',
    description:
      'Incremental sync: only the reports whose archived row or state changed after this instant (late arrivals and retractions included, retractions as tombstones, counted by /count and /stats too), whatever their created_at inside start and end. Same form as start, from 1970-01-01T00:00:00Z once the offset is applied, and not in the future. start and end may then be left out together, when updated_after is at most ARCHIVE_MAX_WINDOW ago. The answer carries no ETag, and tells in the X-Archive-Watermark header (and `watermark` in the JSON envelope) the instant up to which it holds every change: send it as the next updated_after. With limit, every page holds the changes up to the watermark of the first page (its cursor carries it). Changes are kept SYNC_RETENTION_DAYS (30 by default): an updated_after before that is a 410 naming the oldest instant served; pull the window in full, then sync from its watermark.',
    schema: { type: 'string', pattern: QUERY_DATE_TIME_PATTERN },
    example: '2026-11-22T00:00:00Z',
  },
  { name: 'User-Agent', in: 'header', required: true, description: 'Identifies your client.', schema: { type: 'string', minLength: 1 } },
];

export const badQuery = error('A query parameter is missing, malformed, unknown or out of range; every problem is listed.');
/** badQuery with an example of an unknown parameter, named as the operation's refusal names its own (openapi.ts adds it to each operation). */
export const badQueryOf = (allowed: readonly string[]) => ({
  ...badQuery,
  content: {
    'application/json': {
      ...badQuery.content['application/json'],
      example: {
        statusCode: 400,
        error: 'Bad Request',
        message: 'The query is invalid; see details for each problem.',
        details: [{ in: 'query', field: 'admn', message: unknownParameter(allowed) }],
      },
    },
  },
});
/** Answers any request may get before its route reads it (http.md, "Every request"): openapi.ts adds them to every operation. */
export const COMMON_ANSWERS = {
  '408': error('The headers or the body did not arrive in time; the connection is closed.'),
  '417': error('An Expect other than 100-continue.'),
  '431': error('The request headers are too large.'),
};
export const tooMany = { ...error('Past the rate limit.'), headers: retryAfter };
export const syncGone = error(
  'updated_after is before the change history kept (SYNC_RETENTION_DAYS), or before a change log the service cannot read: pull the window in full, then sync from its watermark; or the boundary version named by `version` is unknown or no longer served (and the query has no other problem): GET /cities/levels gives the current one.',
);
export const unavailable = { ...error('The object store or the queue is unreachable.'), headers: retryAfter };
/** A whole window's refusals before its first byte: its address's share of the turns, or the process's. */
export const archiveTooMany = { ...error("Past the rate limit, or this address already has its share of whole-window answers (ARCHIVE_MAX_CONCURRENT_PER_ADDRESS), or of pages (half of ARCHIVE_MAX_CONCURRENT_PAGES), under way: wait for one to end."), headers: retryAfter };
export const archiveUnavailable = {
  ...error('The object store is unreachable, or a whole window or a page found no turn (ARCHIVE_MAX_CONCURRENT, ARCHIVE_MAX_CONCURRENT_PAGES under way) or ran the query engine out of memory or temp space before its first byte.'),
  headers: retryAfter,
};
