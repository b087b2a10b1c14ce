// The service's routes, declared once: the path Express matches, the handler of each method
// (by name: createApp supplies the handlers), what its 405 allows, whether it is a public read
// under the read rate limit, its part of the OpenAPI document, and what warms it up. The order
// is the order of matching (a literal path before a parameter that would take it) and of the
// paths a 404 names.
import { STATS_ANSWER_BY, STATS_INTERVALS } from '../archive/stats.js';
import { PKEY_PATTERN } from '../store/layout.js';
import { ARCHIVE_FORMATS, MAX_PAGE } from './archive.js';
import { MAX_BODY_BYTES } from './feedPost.js';
import { BBOX_PATTERN } from './query.js';
import { OGC_ROUTES } from './ogc/routes.js';
import { ADMIN_DESCRIPTION, ADMIN_SCHEMA, badQuery, envelope, error, exampleFeature, retryAfter, syncGone, tooMany, unavailable, windowParams } from './openapiParts.js';
import type { Mount, Route } from './route.js';

const READ = { readLimit: true, preflight: true } as const;

export const ROUTES: readonly Route[] = [
  { path: '/', serve: { get: 'explorer' } },
  {
    path: '/feeds/partner',
    serve: { post: 'postPartnerReport' },
    direct: true,
    doc: () => ({
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
    }),
  },
  {
    path: '/feeds/partner/:postId',
    serve: { delete: 'retractPartnerReport' },
    doc: () => ({
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
    }),
  },
  {
    path: '/cities',
    serve: { get: 'getCities' },
    ...READ,
    doc: () => ({
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
    }),
  },
  {
    path: '/reports/archive',
    serve: { get: 'getArchive' },
    ...READ,
    doc: () => ({
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
    }),
    warmUp: (window) => [`${window}&geoformat=geojson`, `${window}&format=csv`, `${window}&format=parquet`],
  },
  {
    path: '/reports/stream',
    serve: { get: 'streamReports' },
    ...READ,
    noHead: true,
    doc: () => ({
      '/reports/stream': {
        get: {
          operationId: 'streamReports',
          summary: 'Newly archived reports, live, as Server-Sent Events',
          description:
            'Each report archived from now on (or after `Last-Event-ID`) as one `archived` event whose data is a GeoJSON Feature and whose id resumes the stream: reconnecting with `Last-Event-ID` (EventSource does it itself) sends exactly what came after it, for as long as events are kept (at least a day). A comment line every 15 s keeps proxies from closing an idle stream. Each API process serves a bounded number of streams; past it, 429.',
          parameters: [
            { name: 'admin', in: 'query', schema: ADMIN_SCHEMA, description: ADMIN_DESCRIPTION },
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
    }),
  },
  {
    path: '/reports/cap.atom',
    serve: { get: 'capFeed' },
    ...READ,
    doc: () => ({
      '/reports/cap.atom': {
        get: {
          operationId: 'capFeed',
          summary: 'CAP 1.2 alerts of the last 24 hours, in an Atom feed',
          description:
            'One entry per report created in the last 24 hours (newest first, at most 1,000), its content the report\'s CAP 1.2 alert: identifier the pkey, status Actual, msgType Alert, scope Public, category Met, event Flood, urgency Immediate, certainty Observed, severity from the flood depth when a report carries one (up to 70 cm Minor, 71–150 Moderate, above Severe; else Unknown), an area naming the barangay and city with a circle at the point. A retracted report leaves the feed.',
          parameters: [{ name: 'admin', in: 'query', schema: ADMIN_SCHEMA, description: ADMIN_DESCRIPTION }],
          responses: {
            '200': { description: 'The feed.', content: { 'application/atom+xml': { schema: { type: 'string' } } } },
            '400': badQuery,
            '429': tooMany,
            '503': unavailable,
          },
        },
      },
    }),
  },
  {
    path: '/reports/archive/count',
    serve: { get: 'countArchive' },
    ...READ,
    doc: () => ({
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
    }),
    warmUp: (window) => [window],
  },
  {
    path: '/reports/archive/stats',
    serve: { get: 'statsArchive' },
    ...READ,
    doc: () => ({
      '/reports/archive/stats': {
        get: {
          operationId: 'statsArchive',
          summary: 'Counts of a window by time bucket and by city or barangay (for charts and maps)',
          description:
            'One row per bucket and key with at least one report, oldest bucket first. Buckets are cut in UTC, or at the `tz` offset. At most 10,000 buckets (1,000 with by=local_area). Same filters, errors and caching as the archive.',
          parameters: [
            ...windowParams,
            { name: 'interval', in: 'query', schema: { type: 'string', enum: [...STATS_INTERVALS], default: 'day' }, description: 'Bucket length; weeks start on Monday.' },
            {
              name: 'by',
              in: 'query',
              schema: { type: 'string', enum: [...STATS_ANSWER_BY], default: 'none' },
              description:
                'Split each bucket by region, province or city code, or barangay PSGC code. Regions and provinces are the cities rolled up by the current boundary version, so by=region and by=province need a version that has them (the national one). An independent city, such as Angeles or Cebu City, counts in the province whose polygon holds it, as the province_code of its reports says.',
            },
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
    }),
  },
  {
    path: '/reports/archive/extent',
    serve: { get: 'archiveExtent' },
    ...READ,
    doc: () => ({
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
    }),
  },
  {
    path: '/reports/:pkey.cap',
    serve: { get: 'capAlert' },
    ...READ,
    unlisted: true,
    doc: () => ({
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
    }),
  },
  {
    path: '/reports/:pkey',
    serve: { get: 'getReport' },
    ...READ,
    doc: () => ({
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
    }),
  },
  {
    path: '/cities/:code/local-areas',
    serve: { get: 'getLocalAreas' },
    ...READ,
    doc: () => ({
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
    }),
  },
  {
    path: '/cities/levels',
    serve: { get: 'getLevels' },
    ...READ,
    doc: () => ({
      '/cities/levels': {
        get: {
          operationId: 'getLevels',
          summary: 'The levels of the current boundary version (region, province, city), with their number of areas',
          responses: {
            '200': {
              description: 'The version, its label, and the levels /cities/outlines draws. The two-city default has cities alone.',
              headers: { ETag: { schema: { type: 'string' } } },
              content: { 'application/json': { schema: { $ref: '#/components/schemas/BoundaryLevels' } } },
            },
            '304': { description: 'Not modified (If-None-Match).' },
            '400': badQuery,
            '429': tooMany,
            '503': unavailable,
          },
        },
      },
    }),
  },
  {
    path: '/cities/outlines',
    serve: { get: 'getOutlines' },
    ...READ,
    // Made on first use per version: the regions a country-wide map opens on are made before the API listens.
    warmUp: () => ['level=region'],
    doc: () => ({
      '/cities/outlines': {
        get: {
          operationId: 'getOutlines',
          summary: "One level's areas simplified for a map: small islands left out, quantized TopoJSON",
          description:
            'For drawing, not for measuring: regions are simplified for zooms up to 6, provinces for 7 and 8, cities for 9 and 10 (web maps\' zoom levels); /cities and /cities/{code}/local-areas keep the full geometry. Each geometry has `code` (a city\'s code, or `PH-` and the PSGC code of a province or region, as `admin=` takes it) and `name`.',
          parameters: [
            {
              name: 'level',
              in: 'query',
              schema: { type: 'string', enum: ['region', 'province', 'city'], default: 'city' },
              description: 'A level the current boundary version has (GET /cities/levels): the two-city default has cities alone.',
            },
          ],
          responses: {
            '200': {
              description: 'The level as quantized TopoJSON; the strong ETag names the boundary version.',
              headers: { ETag: { schema: { type: 'string' } } },
              content: { 'application/json': { schema: { $ref: '#/components/schemas/OutlinesTopoJson' } } },
            },
            '304': { description: 'Not modified (If-None-Match).' },
            '400': badQuery,
            '429': tooMany,
            '503': unavailable,
          },
        },
      },
    }),
  },
  {
    path: '/releases',
    serve: { get: 'getReleases' },
    ...READ,
    doc: () => ({
      '/releases': {
        get: {
          operationId: 'getReleases',
          summary: 'The releases: immutable, citable snapshots of closed periods',
          description:
            'Each release (`flood-archive release --period 2025`, and monthly by the scheduler) is a GeoParquet 1.1 and a gzipped CSV file per UTC month, a manifest (counts, extent, SHA-256 of every file, schema, licence), a STAC Item and a citation, at stable URLs that never change. A later revision of a period (after retractions were purged, or late reports) is a new release beside the earlier one. STAC clients start at /releases/catalog.json.',
          responses: {
            '200': { description: 'Every release, oldest period and revision first, with its files.', content: { 'application/json': { schema: { $ref: '#/components/schemas/Releases' } } } },
            '400': badQuery,
            '429': tooMany,
            '503': unavailable,
          },
        },
      },
    }),
  },
  {
    path: '/releases/:file',
    serve: { get: 'getReleaseIndex' },
    ...READ,
    doc: () => ({
      '/releases/{file}': {
        get: {
          operationId: 'getReleaseIndex',
          summary: 'The STAC Catalog (catalog.json) and Collection (collection.json) of the releases',
          parameters: [{ name: 'file', in: 'path', required: true, schema: { type: 'string', enum: ['catalog.json', 'collection.json'] } }],
          responses: {
            '200': { description: 'STAC 1.0 JSON, its links relative (the catalogue moves whole).', headers: { ETag: { schema: { type: 'string' } } }, content: { 'application/json': { schema: { type: 'object' } } } },
            '304': { description: 'Not modified (If-None-Match).' },
            '400': badQuery,
            '404': error('No release has been made yet, or no such file.'),
            '429': tooMany,
            '503': unavailable,
          },
        },
      },
    }),
  },
  {
    path: '/releases/:release/:file',
    serve: { get: 'getReleaseFile' },
    ...READ,
    doc: () => ({
      '/releases/{release}/{file}': {
        get: {
          operationId: 'getReleaseFile',
          summary: "A release's file: a month as GeoParquet or CSV.gz, its manifest, STAC Item or citation",
          description: 'Never changes once written: `Cache-Control: immutable`, an ETag and Last-Modified, and byte ranges (`Range`, 206) for resumed downloads and for Parquet readers that fetch a footer and row groups.',
          parameters: [
            { name: 'release', in: 'path', required: true, schema: { type: 'string', pattern: '^\\d{4}(-\\d{2})?-r[1-9]\\d*$' }, example: '2025-r1' },
            { name: 'file', in: 'path', required: true, schema: { type: 'string' }, example: 'reports-2025-06.parquet', description: 'manifest.json, item.json, CITATION.cff, reports-YYYY-MM.parquet or reports-YYYY-MM.csv.gz' },
          ],
          responses: {
            '200': { description: 'The file.', headers: { ETag: { schema: { type: 'string' } } }, content: { 'application/vnd.apache.parquet': {}, 'application/gzip': {}, 'application/json': {}, 'application/geo+json': {}, 'application/x-yaml': {} } },
            '206': { description: 'The range asked for.' },
            '304': { description: 'Not modified (If-None-Match, If-Modified-Since).' },
            '400': badQuery,
            '404': error('No such release or file.'),
            '416': { description: 'The range is outside the file.' },
            '429': tooMany,
            '503': unavailable,
          },
        },
      },
    }),
  },
  { path: '/openapi.json', serve: { get: 'openApiJson' }, preflight: true },
  {
    path: '/health',
    serve: { get: 'health' },
    doc: () => ({
      '/health': {
        get: {
          operationId: 'health',
          summary: 'Liveness',
          responses: { '200': { description: 'The process answers.', content: { 'application/json': { schema: { $ref: '#/components/schemas/Health' } } } } },
        },
      },
    }),
  },
  {
    path: '/ready',
    serve: { get: 'ready' },
    doc: () => ({
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
    }),
  },
  ...OGC_ROUTES,
];

/** Prefixes served as a whole: Swagger UI, the explorer's files. */
export const MOUNTS: readonly Mount[] = [
  { prefix: '/docs', serve: 'docs', listed: true },
  { prefix: '/explorer', serve: 'explorerAssets' },
];
