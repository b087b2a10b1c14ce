// The OGC routes in the OpenAPI document: written once (OpenAPI 3.1 style, as the
// service's document), and converted to OpenAPI 3.0 for /ogc/api, the definition
// the OGC "oas30" conformance class asks for (GDAL and QGIS read it).
import { PKEY_PATTERN_BODY } from '../../reports/layout.js';
import { OGC_DATETIME_PATTERN } from '../../reports/partnerReport.js';
import { CONFORMS_TO } from './conformance.js';
import { DEFAULT_LIMIT, MAX_LIMIT } from './params.js';

const link = {
  type: 'object',
  required: ['href', 'rel'],
  properties: { href: { type: 'string', format: 'uri' }, rel: { type: 'string' }, type: { type: 'string' }, title: { type: 'string' } },
};
const links = { type: 'array', items: { $ref: '#/components/schemas/OgcLink' } };
const bbox = { type: 'array', minItems: 4, maxItems: 4, items: { type: 'number' } };

const collection = {
  type: 'object',
  required: ['id', 'links', 'extent', 'itemType', 'crs'],
  properties: {
    id: { type: 'string', enum: ['reports', 'cities', 'local-areas'] },
    title: { type: 'string' },
    description: { type: 'string' },
    itemType: { type: 'string', enum: ['feature'] },
    crs: { type: 'array', items: { type: 'string' } },
    extent: {
      type: 'object',
      required: ['spatial'],
      properties: {
        spatial: { type: 'object', required: ['bbox'], properties: { bbox: { type: 'array', minItems: 1, items: bbox }, crs: { type: 'string' } } },
        temporal: {
          type: 'object',
          required: ['interval'],
          properties: {
            interval: { type: 'array', items: { type: 'array', minItems: 2, maxItems: 2, items: { type: ['string', 'null'], format: 'date-time' } } },
            trs: { type: 'string' },
          },
        },
      },
    },
    links,
  },
};

const feature = (geometry: object, properties: object, id: object) => ({
  type: 'object',
  required: ['type', 'id', 'geometry', 'properties'],
  properties: { type: { type: 'string', enum: ['Feature'] }, id, geometry, properties, links },
});
const point = {
  type: 'object',
  required: ['type', 'coordinates'],
  properties: { type: { type: 'string', enum: ['Point'] }, coordinates: { type: 'array', minItems: 2, maxItems: 2, items: { type: 'number' } } },
};
const area = {
  type: 'object',
  required: ['type', 'coordinates'],
  properties: { type: { type: 'string', enum: ['Polygon', 'MultiPolygon'] }, coordinates: { type: 'array' } },
};
const featureCollection = (item: object) => ({
  type: 'object',
  required: ['type', 'features', 'links', 'numberMatched', 'numberReturned', 'timeStamp'],
  properties: {
    type: { type: 'string', enum: ['FeatureCollection'] },
    features: { type: 'array', items: item },
    links,
    numberMatched: { type: 'integer', minimum: 0 },
    numberReturned: { type: 'integer', minimum: 0 },
    timeStamp: { type: 'string', format: 'date-time' },
  },
});

export const REPORT_FEATURE_ID = `^${PKEY_PATTERN_BODY}@\\d{8}T\\d{6}\\.\\d{3}Z$`;

export const ogcSchemas = {
  OgcLink: link,
  OgcLandingPage: { type: 'object', required: ['links'], properties: { title: { type: 'string' }, description: { type: 'string' }, links } },
  OgcConformance: { type: 'object', required: ['conformsTo'], properties: { conformsTo: { type: 'array', items: { type: 'string', enum: [...CONFORMS_TO] } } } },
  OgcCollection: collection,
  OgcCollections: { type: 'object', required: ['links', 'collections'], properties: { links, collections: { type: 'array', items: { $ref: '#/components/schemas/OgcCollection' } } } },
  OgcReport: feature(point, { $ref: '#/components/schemas/ReportProperties' }, { type: 'string', pattern: REPORT_FEATURE_ID }),
  OgcCity: feature(area, { $ref: '#/components/schemas/CityProperties' }, { type: 'string' }),
  OgcLocalArea: feature(
    area,
    {
      type: 'object',
      required: ['psgc', 'name', 'city_code'],
      properties: { psgc: { type: 'string', pattern: '^\\d{10}$' }, name: { type: 'string' }, city_code: { type: 'string' } },
    },
    { type: 'string', pattern: '^\\d{10}$' },
  ),
  OgcReports: featureCollection({ $ref: '#/components/schemas/OgcReport' }),
  OgcCities: featureCollection({ $ref: '#/components/schemas/OgcCity' }),
  OgcLocalAreas: featureCollection({ $ref: '#/components/schemas/OgcLocalArea' }),
};

const json = (schema: string, type = 'application/json') => ({ content: { [type]: { schema: { $ref: `#/components/schemas/${schema}` } } } });
const err = (description: string) => ({ description, content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } });
const f = (values: string[]) => ({ name: 'f', in: 'query', description: 'The encoding (JSON only; there is no HTML one).', schema: { type: 'string', enum: values } });
const linkHeader = { Link: { description: 'The self, next, prev and collection links (RFC 8288).', schema: { type: 'string' } } };

const itemsParams = (paging: object) => [
  {
    name: 'bbox',
    in: 'query',
    description:
      'Only items inside (reports) or intersecting (boundaries) minLon,minLat,maxLon,maxLat in CRS84 (six numbers with heights are taken too); latitudes within ±90, minimums not above maximums.',
    style: 'form',
    explode: false,
    schema: {
      type: 'array',
      oneOf: [
        { minItems: 4, maxItems: 4 },
        { minItems: 6, maxItems: 6 },
      ],
      items: { type: 'number', minimum: -180, maximum: 180 },
    },
  },
  {
    name: 'datetime',
    in: 'query',
    description:
      'An RFC 3339 date-time, a date, or an interval a/b (`..` or nothing for an open end) that does not end before it starts, each end from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z. Reports: an interval spans at most ARCHIVE_MAX_WINDOW (366 days by default); an open end is an hour from now, an open start ARCHIVE_MAX_WINDOW before the end; without datetime, the newest ARCHIVE_MAX_WINDOW. Cities and barangays have no time: every one matches.',
    schema: { type: 'string', pattern: OGC_DATETIME_PATTERN },
  },
  { name: 'limit', in: 'query', description: 'Items per page.', schema: { type: 'integer', minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT } },
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
      '400': err('A parameter is malformed, unknown or out of range; every problem is listed.'),
      '429': err('Past the rate limit.'),
      '503': err('The object store is unreachable.'),
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
    parameters: [f(['json'])],
    responses: { '200': { description: summary, ...json(schema, type) }, '400': err('A query parameter is unknown or malformed.'), '429': err('Past the rate limit.') },
  },
});

export function ogcPaths(): Record<string, unknown> {
  const cursor = { name: 'cursor', in: 'query', description: 'Opaque: where the page starts. Follow the next link.', schema: { type: 'string', pattern: '^[A-Za-z0-9_-]{1,512}$' } };
  const offset = { name: 'offset', in: 'query', description: 'Items skipped. Follow the next and prev links.', schema: { type: 'integer', minimum: 0, maximum: 9_999_999 } };
  return {
    '/ogc': meta('ogcLandingPage', 'The OGC API – Features landing page', 'OgcLandingPage'),
    '/ogc/conformance': meta('ogcConformance', 'The conformance classes implemented', 'OgcConformance'),
    '/ogc/api': {
      get: {
        operationId: 'ogcApiDefinition',
        summary: 'The OGC API definition (OpenAPI 3.0)',
        tags: ['OGC API – Features'],
        parameters: [f(['json'])],
        responses: {
          '200': { description: 'OpenAPI 3.0', content: { 'application/vnd.oai.openapi+json;version=3.0': { schema: { type: 'object' } } } },
          '400': err('A query parameter is unknown or malformed.'),
        },
      },
    },
    '/ogc/collections': meta('ogcCollections', 'The collections: reports, cities, local-areas', 'OgcCollections'),
    '/ogc/collections/reports': meta('ogcCollection_reports', 'The reports collection', 'OgcCollection'),
    '/ogc/collections/cities': meta('ogcCollection_cities', 'The cities collection', 'OgcCollection'),
    '/ogc/collections/local-areas': meta('ogcCollection_local_areas', 'The barangays collection', 'OgcCollection'),
    '/ogc/collections/reports/items': items('reports', 'OgcReports', cursor, 'Flood reports, newest first'),
    '/ogc/collections/cities/items': items('cities', 'OgcCities', offset, 'Cities and their boundaries'),
    '/ogc/collections/local-areas/items': items('local-areas', 'OgcLocalAreas', offset, 'Barangays and their boundaries'),
    '/ogc/collections/reports/items/{featureId}': item('reports', 'OgcReport', { type: 'string', pattern: REPORT_FEATURE_ID }, 'One report (its id: pkey@created_at)'),
    '/ogc/collections/cities/items/{featureId}': item('cities', 'OgcCity', { type: 'string' }, 'One city, by code'),
    '/ogc/collections/local-areas/items/{featureId}': item('local-areas', 'OgcLocalArea', { type: 'string', pattern: '^\\d{10}$' }, 'One barangay, by PSGC code'),
  };
}

/** OpenAPI 3.1 schemas as OpenAPI 3.0 writes them: nullable instead of null types, enum instead of const. */
export function to30(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(to30);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (k === 'type' && Array.isArray(v)) {
      const types = v.filter((t) => t !== 'null');
      if (types.length === 1) out.type = types[0];
      if (v.includes('null')) out.nullable = true;
    } else if (k === 'const') out.enum = [v];
    else if (k === 'examples' && Array.isArray(v)) out.example = v[0];
    else if (k === 'contentMediaType' || k === '$id' || (k === 'identifier' && typeof v === 'string')) continue;
    else out[k] = to30(v);
  }
  return out;
}

/** The OGC part of the service's document, as OpenAPI 3.0. */
export function ogcOpenApi30From(document: { info: Record<string, unknown>; components: { schemas: Record<string, unknown> }; paths: Record<string, unknown> }): Record<string, unknown> {
  const paths = Object.fromEntries(Object.entries(document.paths).filter(([p]) => p === '/ogc' || p.startsWith('/ogc/')));
  const { license: _license, ...info } = document.info;
  return {
    openapi: '3.0.3',
    info: { ...info, title: 'Flood report archive – OGC API – Features', license: { name: 'MIT' } },
    paths: to30(paths),
    components: { schemas: to30(document.components.schemas) },
  };
}
