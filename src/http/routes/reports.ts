// The archive's routes: a window's reports in every format, the live stream and CAP feed, the
// count, stats and extent, and one report.
import { STATS_ANSWER_BY, STATS_INTERVALS } from '../../archive/stats.js';
import { PKEY_PATTERN } from '../../store/layout.js';
import { ARCHIVE_FORMATS, MAX_PAGE } from '../archive.js';
import { BBOX_PATTERN } from '../query.js';
import { ADMIN_DESCRIPTION, ADMIN_SCHEMA, archiveTooMany, notModified, archiveUnavailable, badQuery, envelope, error, exampleFeature, retryAfter, syncGone, tooMany, unavailable, windowParams } from '../openapiParts.js';
import { PUBLIC_READ, type Route } from '../route.js';

/** What the pattern does not say: a post_id is a whole number a JSON number holds exactly. */
const PKEY_DESCRIPTION = 'A report key, `<source>-<post_id>` or `<source>-<partner>-<post_id>`, its post_id at most 9007199254740991 (2^53 − 1).';

export const REPORTS_ROUTES: readonly Route[] = [
  {
    path: '/reports/archive',
    serve: { get: 'getArchive' },
    ...PUBLIC_READ,
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
            { name: 'limit', in: 'query', description: 'Page size (json, geojson, topojson, csv, ndjson; 1,000 when only cursor is given).', schema: { type: 'integer', minimum: 1, maximum: MAX_PAGE } },
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
            '429': archiveTooMany,
            '503': archiveUnavailable,
          },
        },
      },
    }),
    warmUp: (window) => [`${window}&geoformat=geojson`, `${window}&format=csv`, `${window}&format=parquet`],
  },
  {
    path: '/reports/stream',
    serve: { get: 'streamReports' },
    ...PUBLIC_READ,
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
    ...PUBLIC_READ,
    doc: () => ({
      '/reports/cap.atom': {
        get: {
          operationId: 'capFeed',
          summary: 'CAP 1.2 alerts of the last 24 hours, in an Atom feed',
          description:
            'One entry per report created in the last 24 hours (newest first, at most 1,000), its content the report\'s CAP 1.2 alert: identifier the pkey, status Actual, msgType Alert, scope Public, category Met, event Flood, urgency Immediate, certainty Observed, severity from the flood depth when a report carries one (up to 70 cm Minor, 71–150 Moderate, above Severe; else Unknown), an area naming the barangay and city with a circle at the point. A retracted report\'s alert leaves the feed, and a CAP Cancel of it takes its place (identifier the pkey and `.cancel`, references `flood-archive,<pkey>,<the alert\'s sent>`, nothing of the report).',
          parameters: [{ name: 'admin', in: 'query', schema: ADMIN_SCHEMA, description: ADMIN_DESCRIPTION }],
          responses: {
            '200': { description: 'The feed.', content: { 'application/atom+xml': { schema: { type: 'string' } } } },
            '304': notModified,
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
    ...PUBLIC_READ,
    doc: () => ({
      '/reports/archive/count': {
        get: {
          operationId: 'countArchive',
          summary: 'How many reports a window holds (size a pull first)',
          parameters: windowParams,
          responses: {
            '200': { description: 'The count.', content: { 'application/json': { schema: { $ref: '#/components/schemas/Count' }, example: { statusCode: 200, result: { count: 6912 } } } } },
            '304': notModified,
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
    ...PUBLIC_READ,
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
              schema: { type: 'string', pattern: '^(Z|[+ -](?:0\\d|1[01]):?[0-5]\\d|[+ -]12:?00|[+ ]1[23]:?[0-5]\\d|[+ ]14:?00)$', default: 'Z' },
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
    ...PUBLIC_READ,
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
            '304': notModified,
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
    ...PUBLIC_READ,
    unlisted: true,
    doc: () => ({
      '/reports/{pkey}.cap': {
        get: {
          operationId: 'capAlert',
          summary: 'One report as a CAP 1.2 alert',
          parameters: [{ name: 'pkey', in: 'path', required: true, schema: { type: 'string', pattern: PKEY_PATTERN }, description: PKEY_DESCRIPTION, example: 'partner-alpha-1' }],
          responses: {
            '200': { description: 'The alert.', content: { 'application/cap+xml': { schema: { type: 'string' } } } },
            '304': notModified,
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
    ...PUBLIC_READ,
    doc: () => ({
      '/reports/{pkey}': {
        get: {
          operationId: 'getReport',
          summary: 'One report by its key',
          description: 'Read from the hour the report belongs to (its key is looked up in the ledger). 410 once retracted; 404 when unknown, or accepted and not archived yet (then with Retry-After).',
          parameters: [
            { name: 'pkey', in: 'path', required: true, schema: { type: 'string', pattern: PKEY_PATTERN }, description: PKEY_DESCRIPTION, example: 'partner-alpha-1' },
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
            '304': notModified,
            '400': error('The pkey or a query parameter is invalid.'),
            '404': { ...error('No report has this key, or it is not archived yet (then with Retry-After: ask again then).'), headers: retryAfter },
            '410': error('The report was retracted.'),
            '429': tooMany,
            '503': unavailable,
          },
        },
      },
    }),
  },
];
