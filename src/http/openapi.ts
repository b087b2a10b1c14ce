// The OpenAPI 3.1 description of the service, built from the same schemas
// and parameter lists that validate requests, served at /openapi.json.
import { PKEY_PATTERN } from '../reports/layout.js';
import { partnerReportSchema, QUERY_DATE_TIME_PATTERN } from '../reports/partnerReport.js';
import { reportPropertiesSchema } from '../archive/schema.js';
import { STATS_BY, STATS_INTERVALS } from '../archive/stats.js';
import { ARCHIVE_FORMATS, MAX_PAGE } from './archive.js';
import { MAX_BODY_BYTES } from './feedPost.js';
import { BBOX_PATTERN } from './query.js';
import { ogcPaths, ogcSchemas } from './ogc/openapi.js';

const errorSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['statusCode', 'error', 'message', 'details'],
  properties: {
    statusCode: { type: 'integer', minimum: 400, maximum: 599 },
    error: { type: 'string' },
    message: { type: 'string', description: 'One line a person can act on.' },
    details: {
      type: 'array',
      description: 'Every problem found, not only the first.',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['in', 'field', 'message'],
        properties: {
          in: { enum: ['body', 'query', 'header', 'path'] },
          field: { type: 'string' },
          message: { type: 'string' },
        },
      },
    },
  },
} as const;

/** The {statusCode: 200, result} envelope of every GET answer. */
const envelope = (result: object) => ({
  type: 'object',
  additionalProperties: false,
  required: ['statusCode', 'result'],
  properties: {
    statusCode: { const: 200 },
    watermark: { type: 'string', format: 'date-time', description: 'In answers to updated_after: the instant up to which the answer holds every change (the next updated_after).' },
    result,
  },
});

/** A TopoJSON Topology with its geometries under object `output`. */
const topology = (geometry: object, extra: Record<string, object>, required: string[]) => ({
  type: 'object',
  additionalProperties: false,
  required: ['type', 'objects', ...required],
  properties: {
    type: { const: 'Topology' },
    objects: {
      type: 'object',
      additionalProperties: false,
      required: ['output'],
      properties: {
        output: {
          type: 'object',
          additionalProperties: false,
          required: ['type', 'geometries'],
          properties: { type: { const: 'GeometryCollection' }, geometries: { type: 'array', items: geometry } },
        },
      },
    },
    bbox: { type: 'array', minItems: 4, maxItems: 4, items: { type: 'number' } },
    ...extra,
  },
});

/** A FeatureCollection whose features have this geometry and these properties. */
const featureCollection = (geometry: object, properties: object) => ({
  type: 'object',
  additionalProperties: false,
  required: ['type', 'features'],
  properties: {
    type: { const: 'FeatureCollection' },
    features: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['type', 'geometry', 'properties'],
        properties: { type: { const: 'Feature' }, geometry, properties },
      },
    },
  },
});
const position = { type: 'array', minItems: 2, maxItems: 2, items: { type: 'number' } } as const;

const reportProperties = reportPropertiesSchema();

const schemas = {
  PartnerReport: (({ $id: _id, ...rest }) => rest)(partnerReportSchema),
  Created: {
    type: 'object',
    additionalProperties: false,
    required: ['post_id', 'created', 'pkey'],
    properties: { post_id: { type: 'integer' }, created: { const: true }, pkey: { type: 'string' } },
  },
  AlreadyExists: {
    type: 'object',
    additionalProperties: false,
    required: ['post_id', 'created', 'pkey', 'message'],
    properties: {
      post_id: { type: 'integer' },
      created: { const: false },
      pkey: { type: 'string', description: 'The key of the report this partner posted first with this post_id.' },
      retracted: { const: true, description: 'Present when the report with this post_id was retracted: it is not archived again.' },
      message: { type: 'string' },
    },
  },
  Retracted: {
    type: 'object',
    additionalProperties: false,
    required: ['post_id', 'pkey', 'retracted', 'retracted_at'],
    properties: { post_id: { type: 'integer' }, pkey: { type: 'string' }, retracted: { const: true }, retracted_at: { type: 'string', format: 'date-time' } },
  },
  Error: errorSchema,
  ReportProperties: reportProperties,
  ArchiveGeoJson: envelope(
    featureCollection(
      { type: 'object', additionalProperties: false, required: ['type', 'coordinates'], properties: { type: { const: 'Point' }, coordinates: position } },
      { $ref: '#/components/schemas/ReportProperties' },
    ),
  ),
  // The unquantized topology of the points (no arcs), as topojson-server makes it.
  ArchiveTopoJson: envelope(
    topology(
      {
        type: 'object',
        additionalProperties: false,
        required: ['type', 'coordinates', 'properties'],
        properties: { type: { const: 'Point' }, coordinates: position, properties: { $ref: '#/components/schemas/ReportProperties' } },
      },
      { arcs: { type: 'array', maxItems: 0 } },
      ['arcs'],
    ),
  ),
  // The same without the envelope: format=geojson and format=topojson.
  ArchivePlainGeoJson: featureCollection(
      { type: 'object', additionalProperties: false, required: ['type', 'coordinates'], properties: { type: { const: 'Point' }, coordinates: position } },
      { $ref: '#/components/schemas/ReportProperties' },
    ),
  ArchivePlainTopoJson: topology(
      {
        type: 'object',
        additionalProperties: false,
        required: ['type', 'coordinates', 'properties'],
        properties: { type: { const: 'Point' }, coordinates: position, properties: { $ref: '#/components/schemas/ReportProperties' } },
      },
      { arcs: { type: 'array', maxItems: 0 } },
      ['arcs'],
    ),
  Count: envelope({ type: 'object', additionalProperties: false, required: ['count'], properties: { count: { type: 'integer', minimum: 0 } } }),
  CitiesGeoJson: envelope(
    featureCollection(
      { type: 'object', required: ['type', 'coordinates'], properties: { type: { enum: ['Polygon', 'MultiPolygon'] }, coordinates: { type: 'array' } } },
      { $ref: '#/components/schemas/CityProperties' },
    ),
  ),
  // Quantized: integer, delta-encoded arcs and a transform.
  CitiesTopoJson: envelope(
    topology(
      {
        type: 'object',
        required: ['type', 'arcs', 'properties'],
        properties: { type: { enum: ['Polygon', 'MultiPolygon'] }, arcs: { type: 'array' }, properties: { $ref: '#/components/schemas/CityProperties' } },
      },
      {
        arcs: { type: 'array', items: { type: 'array', items: { type: 'array', minItems: 2, maxItems: 2, items: { type: 'integer' } } } },
        transform: {
          type: 'object',
          required: ['scale', 'translate'],
          properties: {
            scale: { type: 'array', minItems: 2, maxItems: 2, items: { type: 'number' } },
            translate: { type: 'array', minItems: 2, maxItems: 2, items: { type: 'number' } },
          },
        },
      },
      ['arcs', 'transform', 'bbox'],
    ),
  ),
  Stats: envelope({
    type: 'object',
    additionalProperties: false,
    required: ['interval', 'by', 'tz', 'total', 'rows'],
    properties: {
      interval: { enum: [...STATS_INTERVALS] },
      by: { enum: [...STATS_BY] },
      tz: { type: 'string', pattern: '^[+-]\\d{2}:\\d{2}$', description: 'The offset the buckets are cut at.' },
      total: { type: 'integer', minimum: 0, description: 'Equals /reports/archive/count for the same filters.' },
      rows: {
        type: 'array',
        description: 'Oldest bucket first; buckets with no report are left out.',
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['bucket', 'key', 'count'],
          properties: {
            bucket: { type: 'string', format: 'date-time', description: 'Start of the bucket, in the tz offset.' },
            key: { type: ['string', 'null'], description: 'City code (by=city) or barangay PSGC code (by=local_area); null outside every one, and for by=none.' },
            count: { type: 'integer', minimum: 1 },
          },
        },
      },
    },
  }),
  LocalAreasGeoJson: envelope(
    featureCollection(
      { type: 'object', required: ['type', 'coordinates'], properties: { type: { enum: ['Polygon', 'MultiPolygon'] }, coordinates: { type: 'array' } } },
      { $ref: '#/components/schemas/LocalAreaProperties' },
    ),
  ),
  LocalAreasTopoJson: envelope({
    ...topology(
      {
        type: 'object',
        required: ['type', 'arcs', 'properties'],
        properties: { type: { enum: ['Polygon', 'MultiPolygon'] }, arcs: { type: 'array' }, properties: { $ref: '#/components/schemas/LocalAreaProperties' } },
      },
      { arcs: { type: 'array' }, transform: { type: 'object', required: ['scale', 'translate'] } },
      ['arcs'],
    ),
    // Quantized, so with a transform and a bbox, unless the city has no barangays in this
    // boundary version (the approximate outlines have none): then there is nothing to quantize.
    anyOf: [{ required: ['transform', 'bbox'] }, { properties: { objects: { properties: { output: { properties: { geometries: { maxItems: 0 } } } } } } }],
  }),
  LocalAreaProperties: {
    type: 'object',
    additionalProperties: false,
    required: ['psgc', 'name', 'city_code'],
    properties: {
      psgc: { type: 'string', pattern: '^\\d{10}$', examples: ['1381300020'] },
      name: { type: 'string', examples: ['Central'] },
      city_code: { type: 'string', examples: ['PH-QC'] },
    },
  },
  CityProperties: {
    type: 'object',
    additionalProperties: false,
    required: ['code', 'name'],
    properties: { code: { type: 'string', examples: ['PH-QC'] }, name: { type: 'string', examples: ['Quezon City'] } },
  },
  Health: { type: 'object', required: ['status'], properties: { status: { const: 'ok' } } },
  Ready: {
    type: 'object',
    required: ['status', 'checks'],
    properties: {
      status: { const: 'ready' },
      checks: { type: 'object', properties: { storage: { type: 'string' }, queue: { type: 'string' }, boundaries: { type: 'string' }, writes: { type: 'string' } } },
    },
  },
} as const;

const error = (description: string, example?: unknown) => ({
  description,
  content: {
    'application/json': {
      schema: { $ref: '#/components/schemas/Error' },
      ...(example ? { example } : {}),
    },
  },
});

const retryAfter = { 'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer' } } };

const exampleFeature = {
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
    tags: { instance_region_code: 'PH-QC', local_area_id: '1381300020' },
    title: 'Baha sa QMC',
    text: 'Hanggang tuhod',
  },
};

const windowParams = [
  {
    name: 'start',
    in: 'query',
    required: true,
    description:
      'Start of the window, inclusive: ISO 8601 with a UTC offset, from 1970-01-01T00:00:00Z (in UTC, once the offset is applied) to 9999-12-31T23:59:59Z. Send `+` as `%2B` (a space before the offset digits is read as `+`). With end not before start, the window spans at most ARCHIVE_MAX_WINDOW (366 days by default).',
    schema: { type: 'string', pattern: QUERY_DATE_TIME_PATTERN },
    example: '2026-11-21T00:00:00+0800',
  },
  {
    name: 'end',
    in: 'query',
    required: true,
    description:
      'End of the window, inclusive, in the same form and range as start; not before start; the window spans at most ARCHIVE_MAX_WINDOW (366 days by default).',
    schema: { type: 'string', pattern: QUERY_DATE_TIME_PATTERN },
    example: '2026-11-21T23:59:59+0800',
  },
  { name: 'admin', in: 'query', description: 'Only reports tagged with this city code.', schema: { type: 'string', enum: ['PH-QC', 'PH-PG'] } },
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
    description: 'true: retracted reports as tombstones (status retracted, title and text "", url and image_url null, place and time kept); false (default): left out.',
    schema: { type: 'string', enum: ['true', 'false'], default: 'false' },
  },
  {
    name: 'updated_after',
    in: 'query',
    description:
      'Incremental sync: only the reports whose archived row or state changed after this instant (late arrivals and retractions included, retractions as tombstones), whatever their created_at inside start and end. Same form as start, from 1970-01-01T00:00:00Z once the offset is applied, and not in the future. start and end may then be left out together, when updated_after is at most ARCHIVE_MAX_WINDOW ago. The answer carries no ETag, and tells in the X-Archive-Watermark header (and `watermark` in the JSON envelope) the instant up to which it holds every change: send it as the next updated_after. With limit, every page holds the changes up to the watermark of the first page (its cursor carries it). Changes are kept SYNC_RETENTION_DAYS (30 by default): an updated_after before that is a 410 naming the oldest instant served; pull the window in full, then sync from its watermark.',
    schema: { type: 'string', pattern: QUERY_DATE_TIME_PATTERN },
    example: '2026-11-22T00:00:00Z',
  },
  { name: 'User-Agent', in: 'header', required: true, description: 'Identifies your client.', schema: { type: 'string', minLength: 1 } },
];

const badQuery = error('A query parameter is missing, malformed, unknown or out of range; every problem is listed.', {
  statusCode: 400,
  error: 'Bad Request',
  message: 'The query is invalid; see details for each problem.',
  details: [{ in: 'query', field: 'admn', message: 'is not a known parameter (allowed: start, end, admin, geoformat, format, bbox, limit, cursor)' }],
});
const tooMany = { ...error('Past the rate limit.'), headers: retryAfter };
const syncGone = error('updated_after is before the change history kept (SYNC_RETENTION_DAYS): pull the window in full, then sync from its watermark.');
const unavailable = { ...error('The object store or the queue is unreachable.'), headers: retryAfter };

export function openApiDocument(serverUrl?: string): Record<string, unknown> {
  return {
    openapi: '3.1.0',
    info: {
      title: 'Flood report archive',
      version: '1.0.0',
      description:
        'Public data service for flood reports in the Philippines: partners post reports, researchers pull the archive by time window, anyone reads the supported cities and their boundaries.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    ...(serverUrl ? { servers: [{ url: serverUrl }] } : {}),
    components: {
      schemas: { ...schemas, ...ogcSchemas },
      securitySchemes: { ApiKey: { type: 'apiKey', in: 'header', name: 'X-Api-Key' } },
    },
    paths: {
      ...ogcPaths(),
      '/feeds/partner': {
        post: {
          operationId: 'postPartnerReport',
          summary: 'Add one flood report from a partner',
          description: `Accepted durably before the answer: a 2xx means the report is kept. The same post_id from the same partner (the name of its key) is "already exists" ever after; the first version is kept. Each partner's post_ids are its own: another partner's same post_id is another report, with a pkey of its own (partner-<key name>-<post_id>; reports accepted before post_ids were per partner keep partner-<post_id>). Bodies up to ${MAX_BODY_BYTES / 1024} KiB.`,
          security: [{ ApiKey: [] }],
          requestBody: {
            required: true,
            content: {
              'application/json': {
                schema: { $ref: '#/components/schemas/PartnerReport' },
                example: {
                  post_id: 1,
                  created_at: '2026-11-21T13:05:00+08:00',
                  partner_city: 'Quezon City',
                  disaster_type: 'flood',
                  location: { lat: 14.6516, lng: 121.0497 },
                  title: 'Baha sa QMC',
                  text: 'Hanggang tuhod',
                },
              },
            },
          },
          responses: {
            '201': {
              description: 'Created.',
              content: { 'application/json': { schema: { $ref: '#/components/schemas/Created' }, example: { post_id: 1, created: true, pkey: 'partner-alpha-1' } } },
            },
            '200': {
              description: 'This partner already posted a report with this post_id; nothing changed.',
              content: {
                'application/json': {
                  schema: { $ref: '#/components/schemas/AlreadyExists' },
                  example: { post_id: 1, created: false, pkey: 'partner-alpha-1', message: 'post_id 1 already exists' },
                },
              },
            },
            '400': error('The body is not valid JSON or breaks the schema; every problem is listed.', {
              statusCode: 400,
              error: 'Bad Request',
              message: 'The report is invalid; see details for each problem.',
              details: [{ in: 'body', field: 'location.lat', message: 'must be between -90 and 90' }],
            }),
            '401': error('X-Api-Key is missing.'),
            '403': error('X-Api-Key is not a valid key.'),
            '413': error('The body is larger than 64 KiB.'),
            '415': error('The body is not JSON.'),
            '429': tooMany,
            '503': unavailable,
          },
        },
      },
      '/reports/archive/extent': {
        get: {
          operationId: 'archiveExtent',
          summary: 'What the archive holds at all: first and last created_at, count, watermark',
          description: 'Tells "no reports in this window" from "no data yet". Retracted reports are not counted. The watermark is the instant up to which every change is in the archive (a mirror may start its updated_after syncs from it).',
          responses: {
            '200': {
              description: 'The extent; first_created_at and last_created_at are null while the archive is empty.',
              content: {
                'application/json': {
                  schema: envelope({
                    type: 'object',
                    additionalProperties: false,
                    required: ['first_created_at', 'last_created_at', 'count', 'watermark'],
                    properties: {
                      first_created_at: { type: ['string', 'null'], format: 'date-time' },
                      last_created_at: { type: ['string', 'null'], format: 'date-time' },
                      count: { type: 'integer', minimum: 0 },
                      watermark: { type: 'string', format: 'date-time' },
                    },
                  }),
                  example: { statusCode: 200, result: { first_created_at: '2025-01-01T00:03:00.000Z', last_created_at: '2026-11-23T08:59:12.000Z', count: 2500000, watermark: '2026-11-23T08:59:30.000Z' } },
                },
              },
            },
            '400': badQuery,
            '429': tooMany,
            '503': unavailable,
          },
        },
      },
      '/feeds/partner/{post_id}': {
        delete: {
          operationId: 'retractPartnerReport',
          summary: 'Retract a report the same partner posted',
          description:
            'States: a report is `confirmed` when accepted and `retracted` once withdrawn; retraction is final (a later post of the post_id answers 200 "already exists" with `retracted: true`). Only the partner whose key (by name) posted it may retract it here: the post_id is the calling partner\'s own, so another partner\'s report of the same post_id is not found (404) and never touched; the operators may retract any report (`flood-archive retract`). Durable before the answer; a repeat answers 200 again with the first retraction\'s time. The report leaves every archive answer at once, and its title, text and URLs are purged from storage by the next compaction.',
          security: [{ ApiKey: [] }],
          parameters: [{ name: 'post_id', in: 'path', required: true, schema: { type: 'string', pattern: '^(0|[1-9]\\d{0,15})$' } }],
          responses: {
            '200': {
              description: 'Retracted (now or before).',
              content: { 'application/json': { schema: { $ref: '#/components/schemas/Retracted' }, example: { post_id: 1, pkey: 'partner-alpha-1', retracted: true, retracted_at: '2026-11-22T01:00:00.000Z' } } },
            },
            '400': error('The post_id is not a non-negative integer.'),
            '401': error('X-Api-Key is missing.'),
            '403': error('X-Api-Key is not a valid key, or was revoked.'),
            '404': error('This partner posted no report with this post_id.'),
            '429': tooMany,
            '503': unavailable,
          },
        },
      },
      '/reports/{pkey}': {
        get: {
          operationId: 'getReport',
          summary: 'One report by its key',
          description: 'Read from the hour the report belongs to (its key is looked up in the ledger). 410 once retracted; 404 when unknown, or accepted and not archived yet (then with Retry-After).',
          parameters: [
            { name: 'pkey', in: 'path', required: true, schema: { type: 'string', pattern: PKEY_PATTERN }, example: 'partner-alpha-1' },
            { name: 'geoformat', in: 'query', description: 'geojson: the Feature; topojson: a Topology holding its one geometry.', schema: { type: 'string', enum: ['geojson', 'topojson'], default: 'geojson' } },
          ],
          responses: {
            '200': {
              description: 'The report.',
              content: {
                'application/json': {
                  schema: {
                    oneOf: [
                      envelope({ type: 'object', required: ['type', 'geometry', 'properties'], properties: { type: { const: 'Feature' }, geometry: { type: 'object' }, properties: { $ref: '#/components/schemas/ReportProperties' } } }),
                      { $ref: '#/components/schemas/ArchiveTopoJson' },
                    ],
                  },
                  example: { statusCode: 200, result: exampleFeature },
                },
              },
            },
            '400': error('The pkey or a query parameter is invalid.'),
            '404': error('No report has this key, or it is not archived yet.'),
            '410': error('The report was retracted.'),
            '429': tooMany,
            '503': unavailable,
          },
        },
      },
      '/cities': {
        get: {
          operationId: 'getCities',
          summary: 'The supported cities and their boundaries',
          parameters: [
            { name: 'format', in: 'query', schema: { type: 'string', enum: ['json'], default: 'json' } },
            { name: 'geoformat', in: 'query', schema: { type: 'string', enum: ['topojson', 'geojson'], default: 'topojson' } },
          ],
          responses: {
            '200': {
              description: 'The cities of the current boundary version; its strong ETag names the version.',
              headers: { ETag: { schema: { type: 'string' } } },
              content: {
                'application/json': {
                  schema: { oneOf: [{ $ref: '#/components/schemas/CitiesTopoJson' }, { $ref: '#/components/schemas/CitiesGeoJson' }] },
                },
              },
            },
            '304': { description: 'Not modified (If-None-Match).' },
            '400': error('A query parameter is unknown, repeated or not an allowed value; every problem is listed.', {
              statusCode: 400,
              error: 'Bad Request',
              message: 'The query is invalid; see details for each problem.',
              details: [{ in: 'query', field: 'geoformat', message: 'must be one of: topojson, geojson' }],
            }),
            '429': tooMany,
            '503': unavailable,
          },
        },
      },
      '/reports/archive': {
        get: {
          operationId: 'getArchive',
          summary: 'Flood reports received within a time window, newest first',
          description:
            'Streams the window whatever its length. JSON (GeoJSON or TopoJSON in the {statusCode, result} envelope) by default; csv, ndjson, parquet and arrow for bulk pulls. Closed windows carry a strong ETag. With `limit` the answer is a page and the next one is in the `Link` header.',
          parameters: [
            ...windowParams,
            {
              name: 'geoformat',
              in: 'query',
              description: 'GeoJSON or TopoJSON inside the envelope of format=json; geoformat applies to format=json only.',
              schema: { type: 'string', enum: ['topojson', 'geojson'], default: 'topojson' },
            },
            {
              name: 'format',
              in: 'query',
              description:
                'json: the SPEC envelope {statusCode, result} with GeoJSON or TopoJSON (geoformat); geojson (application/geo+json) and topojson: the same collection without the envelope (geoformat applies to format=json only); csv, ndjson, parquet (GeoParquet 1.1), arrow for bulk pulls.',
              schema: { type: 'string', enum: [...ARCHIVE_FORMATS], default: 'json' },
            },
            { name: 'limit', in: 'query', description: 'Page size (json, csv, ndjson).', schema: { type: 'integer', minimum: 1, maximum: MAX_PAGE } },
            {
              name: 'cursor',
              in: 'query',
              description: 'Opaque and signed; take it from the Link header of the previous page. Valid only with the filters it was issued for; an altered, truncated or foreign cursor is a 400.',
              schema: { type: 'string', maxLength: 512, pattern: '^[A-Za-z0-9_-]{23,512}$' },
            },
          ],
          responses: {
            '200': {
              description: 'The reports of the window.',
              headers: {
                Link: { description: 'rel="next": the next page, when paging.', schema: { type: 'string' } },
                ETag: { description: 'On closed windows.', schema: { type: 'string' } },
              },
              content: {
                'application/json': {
                  schema: {
                    oneOf: [
                      { $ref: '#/components/schemas/ArchiveTopoJson' },
                      { $ref: '#/components/schemas/ArchiveGeoJson' },
                      { $ref: '#/components/schemas/ArchivePlainTopoJson' },
                    ],
                  },
                  example: { statusCode: 200, result: { type: 'FeatureCollection', features: [exampleFeature] } },
                },
                'application/geo+json': { schema: { $ref: '#/components/schemas/ArchivePlainGeoJson' }, example: { type: 'FeatureCollection', features: [exampleFeature] } },
                'text/csv': { schema: { type: 'string' } },
                'application/x-ndjson': { schema: { type: 'string' } },
                'application/vnd.apache.parquet': { schema: { type: 'string', contentMediaType: 'application/vnd.apache.parquet' } },
                'application/vnd.apache.arrow.stream': { schema: { type: 'string', contentMediaType: 'application/vnd.apache.arrow.stream' } },
              },
            },
            '304': { description: 'Not modified (If-None-Match, closed windows).' },
            '400': badQuery,
            '410': syncGone,
            '429': tooMany,
            '503': unavailable,
          },
        },
      },
      '/reports/stream': {
        get: {
          operationId: 'streamReports',
          summary: 'Newly archived reports, live, as Server-Sent Events',
          description:
            'Each report archived from now on (or after `Last-Event-ID`) as one `archived` event whose data is a GeoJSON Feature and whose id resumes the stream: reconnecting with `Last-Event-ID` (EventSource does it itself) sends exactly what came after it, for as long as events are kept (at least a day). A comment line every 15 s keeps proxies from closing an idle stream. Each API process serves a bounded number of streams; past it, 429.',
          parameters: [
            { name: 'admin', in: 'query', schema: { type: 'string', enum: ['PH-QC', 'PH-PG'] }, description: 'Only reports of this city code.' },
            { name: 'bbox', in: 'query', schema: { type: 'string', pattern: BBOX_PATTERN }, description: 'Only reports inside minLng,minLat,maxLng,maxLat (latitudes within ±90); minimums must not exceed maximums.' },
            { name: 'Last-Event-ID', in: 'header', schema: { type: 'string', pattern: '^\\d{1,15}$' }, description: 'Resume after this event.' },
            { name: 'lastEventId', in: 'query', schema: { type: 'string', pattern: '^\\d{1,15}$' }, description: 'The same, for clients that cannot set headers (0: everything kept).' },
          ],
          responses: {
            '200': { description: 'The stream.', content: { 'text/event-stream': { schema: { type: 'string' }, example: 'id: 42\nevent: archived\ndata: {"type":"Feature",…}\n\n' } } },
            '400': badQuery,
            '429': { ...error('Too many streams open on this server.'), headers: retryAfter },
            '503': unavailable,
          },
        },
      },
      '/reports/cap.atom': {
        get: {
          operationId: 'capFeed',
          summary: 'CAP 1.2 alerts of the last 24 hours, in an Atom feed',
          description:
            'One entry per report created in the last 24 hours (newest first, at most 1,000), its content the report\'s CAP 1.2 alert: identifier the pkey, status Actual, msgType Alert, scope Public, category Met, event Flood, urgency Immediate, certainty Observed, severity from the flood depth when a report carries one (up to 70 cm Minor, 71–150 Moderate, above Severe; else Unknown), an area naming the barangay and city with a circle at the point. A retracted report leaves the feed.',
          parameters: [{ name: 'admin', in: 'query', schema: { type: 'string', enum: ['PH-QC', 'PH-PG'] }, description: 'Only reports of this city code.' }],
          responses: {
            '200': { description: 'The feed.', content: { 'application/atom+xml': { schema: { type: 'string' } } } },
            '400': badQuery,
            '429': tooMany,
            '503': unavailable,
          },
        },
      },
      '/reports/{pkey}.cap': {
        get: {
          operationId: 'capAlert',
          summary: 'One report as a CAP 1.2 alert',
          parameters: [{ name: 'pkey', in: 'path', required: true, schema: { type: 'string', pattern: PKEY_PATTERN }, example: 'partner-alpha-1' }],
          responses: {
            '200': { description: 'The alert.', content: { 'application/cap+xml': { schema: { type: 'string' } } } },
            '400': error('The path does not name a report.'),
            '404': error('No alert: the report is not archived, or older than the events kept.'),
            '410': error('The report was retracted.'),
            '429': tooMany,
            '503': unavailable,
          },
        },
      },
      '/reports/archive/count': {
        get: {
          operationId: 'countArchive',
          summary: 'How many reports a window holds (size a pull first)',
          parameters: windowParams,
          responses: {
            '200': { description: 'The count.', content: { 'application/json': { schema: { $ref: '#/components/schemas/Count' }, example: { statusCode: 200, result: { count: 6912 } } } } },
            '400': badQuery,
            '410': syncGone,
            '429': tooMany,
            '503': unavailable,
          },
        },
      },
      '/reports/archive/stats': {
        get: {
          operationId: 'statsArchive',
          summary: 'Counts of a window by time bucket and by city or barangay (for charts and maps)',
          description:
            'One row per bucket and key with at least one report, oldest bucket first. Buckets are cut in UTC, or at the `tz` offset. At most 10,000 buckets (1,000 with by=local_area). Same filters, errors and caching as the archive.',
          parameters: [
            ...windowParams,
            { name: 'interval', in: 'query', schema: { type: 'string', enum: [...STATS_INTERVALS], default: 'day' }, description: 'Bucket length; weeks start on Monday.' },
            { name: 'by', in: 'query', schema: { type: 'string', enum: [...STATS_BY], default: 'none' }, description: 'Split each bucket by city code or barangay PSGC code.' },
            {
              name: 'tz',
              in: 'query',
              // -12:00 to +14:00, the offsets in use.
              schema: { type: 'string', pattern: '^(Z|[+-](?:0\\d|1[01]):?[0-5]\\d|[+-]12:?00|\\+1[23]:?[0-5]\\d|\\+14:?00)$', default: 'Z' },
              description: 'UTC offset of the buckets, from -1200 to +1400, e.g. +0800 for Manila (send + as %2B).',
            },
          ],
          responses: {
            '200': {
              description: 'The counts.',
              headers: { ETag: { description: 'On closed windows.', schema: { type: 'string' } } },
              content: {
                'application/json': {
                  schema: { $ref: '#/components/schemas/Stats' },
                  example: { statusCode: 200, result: { interval: 'day', by: 'city', tz: '+08:00', total: 2, rows: [{ bucket: '2025-06-01T00:00:00.000+08:00', key: 'PH-QC', count: 2 }] } },
                },
              },
            },
            '304': { description: 'Not modified (If-None-Match, closed windows).' },
            '400': badQuery,
            '410': syncGone,
            '429': tooMany,
            '503': unavailable,
          },
        },
      },
      '/cities/{code}/local-areas': {
        get: {
          operationId: 'getLocalAreas',
          summary: 'The barangays of one city in the current boundary version',
          parameters: [
            { name: 'code', in: 'path', required: true, schema: { type: 'string' }, example: 'PH-QC', description: 'A city code from /cities.' },
            { name: 'geoformat', in: 'query', schema: { type: 'string', enum: ['topojson', 'geojson'], default: 'topojson' } },
          ],
          responses: {
            '200': {
              description: 'PSGC code, name and polygon of each barangay; quantized TopoJSON by default. The strong ETag names the boundary version.',
              headers: { ETag: { schema: { type: 'string' } } },
              content: {
                'application/json': {
                  schema: { oneOf: [{ $ref: '#/components/schemas/LocalAreasTopoJson' }, { $ref: '#/components/schemas/LocalAreasGeoJson' }] },
                },
              },
            },
            '304': { description: 'Not modified (If-None-Match).' },
            '400': badQuery,
            '404': error('No city with this code in the current boundary version.'),
            '429': tooMany,
            '503': unavailable,
          },
        },
      },
      '/health': {
        get: {
          operationId: 'health',
          summary: 'Liveness',
          responses: { '200': { description: 'The process answers.', content: { 'application/json': { schema: { $ref: '#/components/schemas/Health' } } } } },
        },
      },
      '/ready': {
        get: {
          operationId: 'ready',
          summary: 'Readiness: reports can be accepted now (object store and queue answer in time, a write goes through, boundaries loaded)',
          responses: {
            '200': { description: 'Ready.', content: { 'application/json': { schema: { $ref: '#/components/schemas/Ready' } } } },
            '503': unavailable,
          },
        },
      },
    },
  };
}
