// The OGC schemas of the OpenAPI document (its paths are declared with the OGC routes,
// ogc/routes.ts), and the conversion of the document's OGC part to OpenAPI 3.0 for /ogc/api,
// the definition the OGC "oas30" conformance class asks for (GDAL and QGIS read it).
import { PKEY_PATTERN_BODY } from '../../store/layout.js';
import { CONFORMS_TO } from './conformance.js';

/** The collections, in the order /ogc/collections lists them. */
export const COLLECTION_IDS = ['reports', 'regions', 'provinces', 'cities', 'local-areas'] as const;

const link = {
  type: 'object',
  required: ['href', 'rel'],
  properties: { href: { type: 'string', format: 'uri' }, rel: { type: 'string' }, type: { type: 'string' }, title: { type: 'string' } },
};
const links = { type: 'array', items: { $ref: '#/components/schemas/OgcLink' } };
const bbox = { type: 'array', minItems: 4, maxItems: 4, items: { type: 'number' } };

const collection = {
  type: 'object',
  required: ['id', 'links', 'itemType', 'crs'],
  properties: {
    id: { type: 'string', enum: [...COLLECTION_IDS] },
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
  OgcRegion: feature(
    area,
    { type: 'object', required: ['psgc', 'name'], properties: { psgc: { type: 'string', pattern: '^\\d{10}$' }, name: { type: 'string' } } },
    { type: 'string', pattern: '^\\d{10}$' },
  ),
  OgcProvince: feature(
    area,
    {
      type: 'object',
      required: ['psgc', 'name', 'region_psgc'],
      properties: { psgc: { type: 'string', pattern: '^\\d{10}$' }, name: { type: 'string' }, region_psgc: { type: 'string', pattern: '^\\d{10}$' } },
    },
    { type: 'string', pattern: '^\\d{10}$' },
  ),
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
  OgcRegions: featureCollection({ $ref: '#/components/schemas/OgcRegion' }),
  OgcProvinces: featureCollection({ $ref: '#/components/schemas/OgcProvince' }),
  OgcCities: featureCollection({ $ref: '#/components/schemas/OgcCity' }),
  OgcLocalAreas: featureCollection({ $ref: '#/components/schemas/OgcLocalArea' }),
};


/** OpenAPI 3.1 schemas as OpenAPI 3.0 writes them: nullable instead of null types, enum instead of const. */
function to30(value: unknown): unknown {
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
