// The OGC API – Features routes under /ogc, declared once: what Express matches and the
// handler of each (ogc/router.ts), and their part of the OpenAPI document (written as the
// service's, OpenAPI 3.1, and converted to 3.0 for /ogc/api by ogc/openapi.ts). A collection's
// routes take its id as a parameter; the document names each collection's paths.
import { OGC_DATETIME_PATTERN } from '../../partners/partnerReport.js';
import { notModified } from '../openapiParts.js';
import { PUBLIC_READ, type Route } from '../route.js';
import { REPORT_FEATURE_ID } from './openapi.js';
import { DEFAULT_LIMIT, MAX_LIMIT } from './params.js';


const json = (schema: string, type = 'application/json') => ({ content: { [type]: { schema: { $ref: `#/components/schemas/${schema}` } } } });
const err = (description: string) => ({ description, content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } });
const f = (values: string[]) => ({ name: 'f', in: 'query', description: 'The encoding: JSON (GeoJSON for features), under either name; there is no HTML one.', schema: { type: 'string', enum: values } });
const linkHeader = { Link: { description: 'The self, next, prev and collection links (RFC 8288).', schema: { type: 'string' } } };

const itemsParams = (paging: object) => [
  {
    name: 'bbox',
    in: 'query',
    description:
      'Only items inside (reports) or intersecting (boundaries) minLon,minLat,maxLon,maxLat in CRS84 (six numbers with heights are taken too, the heights any); longitudes within ±180 and latitudes within ±90, minimums not above maximums (a box across the antimeridian is refused: ask for its two halves).',
    style: 'form',
    explode: false,
    schema: {
      type: 'array',
      oneOf: [
        { minItems: 4, maxItems: 4 },
        { minItems: 6, maxItems: 6 },
      ],
      items: { type: 'number' },
    },
  },
  {
    name: 'datetime',
    in: 'query',
    description:
      'An RFC 3339 date-time, a date, or an interval a/b (`..` or nothing for an open end) that does not end before it starts, each end from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z. Reports: an interval of any span; an open end is an hour from now, an open start the earliest report; without datetime, every report. Cities and barangays have no time: every one matches.',
    schema: { type: 'string', pattern: OGC_DATETIME_PATTERN },
  },
  { name: 'limit', in: 'query', description: `Items per page, at most ${MAX_LIMIT}: a larger limit is answered with ${MAX_LIMIT}.`, schema: { type: 'integer', minimum: 1, default: DEFAULT_LIMIT } },
  paging,
  f(['json', 'geojson']),
];

const items = (id: string, schema: string, paging: object, summary: string) => ({
  get: {
    operationId: `ogcItems_${id.replace('-', '_')}`,
    summary,
    tags: ['OGC API – Features'],
    parameters: itemsParams(paging),
    responses: {
      '200': { description: 'A page of items, with next (and prev) links in the body and the Link header.', headers: linkHeader, ...json(schema, 'application/geo+json') },
      '304': notModified,
      '400': err('A parameter is malformed, unknown or out of range; every problem is listed.'),
      '429': err("Past the rate limit, or (reports) this address already has its share of pages under way."),
      '503': err('The object store is unreachable, or (reports) a page found no turn (ARCHIVE_MAX_CONCURRENT_PAGES under way).'),
    },
  },
});

const item = (id: string, schema: string, idSchema: object, summary: string) => ({
  get: {
    operationId: `ogcItem_${id.replace('-', '_')}`,
    summary,
    tags: ['OGC API – Features'],
    parameters: [{ name: 'featureId', in: 'path', required: true, schema: idSchema }, f(['json', 'geojson'])],
    responses: {
      '200': { description: 'The item.', headers: linkHeader, ...json(schema, 'application/geo+json') },
      '304': notModified,
      '400': err('A query parameter is unknown or malformed.'),
      '404': err('No such item.'),
      '429': err('Past the rate limit.'),
      '503': err('The object store is unreachable.'),
    },
  },
});

const meta = (operationId: string, summary: string, schema: string, type = 'application/json') => ({
  get: {
    operationId,
    summary,
    tags: ['OGC API – Features'],
    parameters: [f(['json', 'geojson'])],
    responses: { '200': { description: summary, ...json(schema, type) }, '304': notModified, '400': err('A query parameter is unknown or malformed.'), '429': err('Past the rate limit.') },
  },
});

const cursor = () => ({ name: 'cursor', in: 'query', description: 'Opaque: where the page starts. Follow the next link.', schema: { type: 'string', pattern: '^[A-Za-z0-9_-]{1,512}$' } });
const offset = () => ({ name: 'offset', in: 'query', description: 'Items skipped. Follow the next and prev links.', schema: { type: 'integer', minimum: 0, maximum: 9_999_999 } });

export const OGC_ROUTES: readonly Route[] = [
  { path: '/ogc', serve: { get: 'ogcLandingPage' }, ...PUBLIC_READ, doc: () => ({ '/ogc': meta('ogcLandingPage', 'The OGC API – Features landing page', 'OgcLandingPage') }) },
  { path: '/ogc/conformance', serve: { get: 'ogcConformance' }, ...PUBLIC_READ, doc: () => ({ '/ogc/conformance': meta('ogcConformance', 'The conformance classes implemented', 'OgcConformance') }) },
  {
    path: '/ogc/api',
    serve: { get: 'ogcApiDefinition' },
    ...PUBLIC_READ,
    doc: () => ({
      '/ogc/api': {
        get: {
          operationId: 'ogcApiDefinition',
          summary: 'The OGC API definition (OpenAPI 3.0)',
          tags: ['OGC API – Features'],
          parameters: [f(['json', 'geojson'])],
          responses: {
            '200': { description: 'OpenAPI 3.0', content: { 'application/vnd.oai.openapi+json;version=3.0': { schema: { type: 'object' } } } },
            '304': notModified,
            '400': err('A query parameter is unknown or malformed.'),
            '429': err('Past the rate limit.'),
          },
        },
      },
    }),
  },
  { path: '/ogc/collections', serve: { get: 'ogcCollections' }, ...PUBLIC_READ, doc: () => ({ '/ogc/collections': meta('ogcCollections', 'The collections: reports, regions, provinces, cities, local-areas', 'OgcCollections') }) },
  {
    path: '/ogc/collections/:collectionId',
    serve: { get: 'ogcCollection' },
    ...PUBLIC_READ,
    doc: () => ({
      '/ogc/collections/reports': meta('ogcCollection_reports', 'The reports collection', 'OgcCollection'),
      '/ogc/collections/regions': meta('ogcCollection_regions', 'The regions collection', 'OgcCollection'),
      '/ogc/collections/provinces': meta('ogcCollection_provinces', 'The provinces collection', 'OgcCollection'),
      '/ogc/collections/cities': meta('ogcCollection_cities', 'The cities collection', 'OgcCollection'),
      '/ogc/collections/local-areas': meta('ogcCollection_local_areas', 'The barangays collection', 'OgcCollection'),
    }),
  },
  {
    path: '/ogc/collections/:collectionId/items',
    serve: { get: 'ogcItems' },
    ...PUBLIC_READ,
    doc: () => ({
      '/ogc/collections/reports/items': items('reports', 'OgcReports', cursor(), 'Flood reports, newest first'),
      '/ogc/collections/regions/items': items('regions', 'OgcRegions', offset(), 'Regions and their boundaries'),
      '/ogc/collections/provinces/items': items('provinces', 'OgcProvinces', offset(), 'Provinces and their boundaries'),
      '/ogc/collections/cities/items': items('cities', 'OgcCities', offset(), 'Cities and their boundaries'),
      '/ogc/collections/local-areas/items': items('local-areas', 'OgcLocalAreas', offset(), 'Barangays and their boundaries'),
    }),
  },
  {
    path: '/ogc/collections/:collectionId/items/:featureId',
    serve: { get: 'ogcItem' },
    ...PUBLIC_READ,
    doc: () => ({
      '/ogc/collections/reports/items/{featureId}': item('reports', 'OgcReport', { type: 'string', pattern: REPORT_FEATURE_ID }, 'One report (its id: pkey@created_at)'),
      '/ogc/collections/regions/items/{featureId}': item('regions', 'OgcRegion', { type: 'string', pattern: '^\\d{10}$' }, 'One region, by PSGC code'),
      '/ogc/collections/provinces/items/{featureId}': item('provinces', 'OgcProvince', { type: 'string', pattern: '^\\d{10}$' }, 'One province, by PSGC code'),
      '/ogc/collections/cities/items/{featureId}': item('cities', 'OgcCity', { type: 'string' }, 'One city, by code'),
      '/ogc/collections/local-areas/items/{featureId}': item('local-areas', 'OgcLocalArea', { type: 'string', pattern: '^\\d{10}$' }, 'One barangay, by PSGC code'),
    }),
  },
];
