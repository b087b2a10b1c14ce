// The releases' routes: the STAC catalogue of immutable snapshots and their files.
import { badQuery, error, notModified, tooMany, unavailable } from '../openapiParts.js';
import { PUBLIC_READ, type Route } from '../route.js';

export const RELEASES_ROUTES: readonly Route[] = [
  {
    path: '/releases',
    serve: { get: 'getReleases' },
    ...PUBLIC_READ,
    doc: () => ({
      '/releases': {
        get: {
          operationId: 'getReleases',
          summary: 'The releases: immutable, citable snapshots of closed periods',
          description:
            'Each release (`flood-archive release --period 2025`, and monthly by the scheduler) is a GeoParquet 1.1 and a gzipped CSV file per UTC month, a manifest (counts, extent, SHA-256 of every file, schema, licence), a STAC Item and a citation, at stable URLs that never change. A later revision of a period (after retractions were purged, or late reports) is a new release beside the earlier one. STAC clients start at /releases/catalog.json.',
          responses: {
            '200': { description: 'Every release, oldest period and revision first, with its files.', content: { 'application/json': { schema: { $ref: '#/components/schemas/Releases' } } } },
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
    path: '/releases/:file',
    serve: { get: 'getReleaseIndex' },
    ...PUBLIC_READ,
    doc: () => ({
      // The URL a release's citation gives (`/releases/2025-r1/`): served by the same handler, its name ended by a slash.
      '/releases/{release}/': {
        get: {
          operationId: 'getRelease',
          summary: "A release's URL, as its citation gives it: redirected to its STAC Item",
          parameters: [{ name: 'release', in: 'path', required: true, schema: { type: 'string', pattern: '^\\d{4}(-\\d{2})?-r[1-9]\\d{0,5}$' }, example: '2025-r1' }],
          responses: {
            '302': { description: "To the release's STAC Item (`item.json`).", headers: { Location: { schema: { type: 'string' } } } },
            '400': badQuery,
            '404': error('No such release, or it is not published yet.'),
            '429': tooMany,
            '503': unavailable,
          },
        },
      },
      '/releases/{file}': {
        get: {
          operationId: 'getReleaseIndex',
          summary: 'The STAC Catalog (catalog.json) and Collection (collection.json) of the releases; a release\'s own URL',
          parameters: [{ name: 'file', in: 'path', required: true, schema: { type: 'string' }, description: 'catalog.json, collection.json, or a release (`2025-r1`: its URL in its citation), redirected to its STAC Item' }],
          responses: {
            '200': { description: 'STAC 1.0 JSON, its links relative (the catalogue moves whole).', headers: { ETag: { schema: { type: 'string' } } }, content: { 'application/json': { schema: { type: 'object' } } } },
            '302': { description: "A release's URL: to its STAC Item (`item.json`).", headers: { Location: { schema: { type: 'string' } } } },
            '304': notModified,
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
    ...PUBLIC_READ,
    doc: () => ({
      '/releases/{release}/{file}': {
        get: {
          operationId: 'getReleaseFile',
          summary: "A release's file: a month as GeoParquet or CSV.gz, its manifest, STAC Item or citation",
          description: 'Never changes once written: `Cache-Control: immutable`, an ETag and Last-Modified, and byte ranges (`Range`, 206) for resumed downloads and for Parquet readers that fetch a footer and row groups.',
          parameters: [
            { name: 'release', in: 'path', required: true, schema: { type: 'string', pattern: '^\\d{4}(-\\d{2})?-r[1-9]\\d{0,5}$' }, example: '2025-r1' },
            { name: 'file', in: 'path', required: true, schema: { type: 'string' }, example: 'reports-2025-06.parquet', description: 'manifest.json, item.json, CITATION.cff, reports-YYYY-MM.parquet or reports-YYYY-MM.csv.gz' },
          ],
          responses: {
            '200': { description: 'The file.', headers: { ETag: { schema: { type: 'string' } } }, content: { 'application/vnd.apache.parquet': {}, 'application/gzip': {}, 'application/json': {}, 'application/geo+json': {}, 'application/x-yaml': {} } },
            '206': {
              description: 'The range asked for.',
              headers: { 'Content-Range': { schema: { type: 'string' } } },
              content: { 'application/vnd.apache.parquet': {}, 'application/gzip': {}, 'application/json': {}, 'application/geo+json': {}, 'application/x-yaml': {} },
            },
            '304': { description: 'Not modified (If-None-Match, If-Modified-Since).' },
            '400': badQuery,
            '404': error('No such release or file, or the release is not published yet (its manifest is written last).'),
            '416': error('The range asks for no byte of the file.'),
            '429': tooMany,
            '503': unavailable,
          },
        },
      },
    }),
  },
];
