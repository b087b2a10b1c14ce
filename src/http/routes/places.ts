// The places' routes: the cities with their boundaries, a city's barangays, the levels and
// their outlines.
import { badQuery, error, notModified, tooMany, unavailable, versionGone, versionParam } from '../openapiParts.js';
import { PUBLIC_READ, type Route } from '../route.js';

export const PLACES_ROUTES: readonly Route[] = [
  {
    path: '/cities',
    serve: { get: 'getCities' },
    ...PUBLIC_READ,
    doc: () => ({
      '/cities': {
        get: {
          operationId: 'getCities',
          summary: 'The supported cities and their boundaries',
          parameters: [
            { name: 'format', in: 'query', schema: { type: 'string', enum: ['json'], default: 'json' } },
            { name: 'geoformat', in: 'query', schema: { type: 'string', enum: ['topojson', 'geojson'], default: 'topojson' } },
            versionParam,
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
            '304': notModified,
            '400': error('A query parameter is unknown, repeated or not an allowed value; every problem is listed.', {
              statusCode: 400,
              error: 'Bad Request',
              message: 'The query is invalid; see details for each problem.',
              details: [{ in: 'query', field: 'geoformat', message: 'must be one of: topojson, geojson' }],
            }),
            '410': versionGone,
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
    ...PUBLIC_READ,
    doc: () => ({
      '/cities/{code}/local-areas': {
        get: {
          operationId: 'getLocalAreas',
          summary: 'The barangays of one city in the current boundary version',
          parameters: [
            { name: 'code', in: 'path', required: true, schema: { type: 'string' }, example: 'PH-QC', description: 'A city code from /cities.' },
            { name: 'geoformat', in: 'query', schema: { type: 'string', enum: ['topojson', 'geojson'], default: 'topojson' } },
            versionParam,
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
            '304': notModified,
            '400': badQuery,
            '404': error('No city with this code in the current boundary version.'),
            '410': versionGone,
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
    ...PUBLIC_READ,
    doc: () => ({
      '/cities/levels': {
        get: {
          operationId: 'getLevels',
          summary: 'The levels of the current boundary version (region, province, city), with their number of areas',
          parameters: [versionParam],
          responses: {
            '200': {
              description: 'The version, its label, and the levels /cities/outlines draws. The two-city default has cities alone.',
              headers: { ETag: { schema: { type: 'string' } } },
              content: { 'application/json': { schema: { $ref: '#/components/schemas/BoundaryLevels' } } },
            },
            '304': notModified,
            '400': badQuery,
            '410': versionGone,
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
    ...PUBLIC_READ,
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
            versionParam,
          ],
          responses: {
            '200': {
              description: 'The level as quantized TopoJSON; the strong ETag names the boundary version.',
              headers: { ETag: { schema: { type: 'string' } } },
              content: { 'application/json': { schema: { $ref: '#/components/schemas/OutlinesTopoJson' } } },
            },
            '304': notModified,
            '400': badQuery,
            '410': versionGone,
            '429': tooMany,
            '503': unavailable,
          },
        },
      },
    }),
  },
];
