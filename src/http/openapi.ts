// The OpenAPI 3.1 description of the service, served at /openapi.json: its schemas, built from
// the same schemas that validate requests, and its paths, generated from the route table
// (routes.ts), whose operations name their parameters and answers.
import { partnerReportSchema } from '../partners/partnerReport.js';
import { reportPropertiesSchema } from '../archive/schema.js';
import { STATS_ANSWER_BY, STATS_INTERVALS } from '../archive/stats.js';
import { ogcSchemas } from './ogc/openapi.js';
import { badQuery, badQueryOf, COMMON_ANSWERS, envelope, retryAfter } from './openapiParts.js';
import { documentPaths, type PathItem } from './route.js';
import { ROUTES } from './routes.js';

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

/** The archive's points as a FeatureCollection. */
const pointFeatures = featureCollection(
  { type: 'object', additionalProperties: false, required: ['type', 'coordinates'], properties: { type: { const: 'Point' }, coordinates: position } },
  { $ref: '#/components/schemas/ReportProperties' },
);

/** The unquantized topology of the points (no arcs), as topojson-server makes it. */
const pointTopology = topology(
  {
    type: 'object',
    additionalProperties: false,
    required: ['type', 'coordinates', 'properties'],
    properties: { type: { const: 'Point' }, coordinates: position, properties: { $ref: '#/components/schemas/ReportProperties' } },
  },
  { arcs: { type: 'array', maxItems: 0 } },
  ['arcs'],
);

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
  ArchiveGeoJson: envelope(pointFeatures),
  ArchiveTopoJson: envelope(pointTopology),
  ArchivePlainGeoJson: pointFeatures,
  ArchivePlainTopoJson: pointTopology,
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
      by: { enum: [...STATS_ANSWER_BY] },
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
    // boundary version (Manila's in the national set): then there is nothing to quantize.
    anyOf: [{ required: ['transform', 'bbox'] }, { properties: { objects: { properties: { output: { properties: { geometries: { maxItems: 0 } } } } } } }],
  }),
  Releases: envelope({
    type: 'object',
    additionalProperties: false,
    required: ['catalog', 'releases'],
    properties: {
      catalog: { type: 'string', format: 'uri' },
      releases: {
        type: 'array',
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['release', 'period', 'revision', 'created', 'reports', 'item', 'citation', 'files'],
          properties: {
            release: { type: 'string', examples: ['2025-r1'] },
            period: { type: 'string', examples: ['2025', '2025-06'] },
            revision: { type: 'integer', minimum: 1 },
            created: { type: 'string', format: 'date-time' },
            reports: { type: 'integer', minimum: 0 },
            item: { type: 'string', format: 'uri' },
            citation: { type: 'string', format: 'uri' },
            files: {
              type: 'array',
              items: {
                type: 'object',
                additionalProperties: false,
                required: ['url', 'format', 'month', 'reports', 'bytes', 'sha256'],
                properties: {
                  url: { type: 'string', format: 'uri' },
                  format: { enum: ['GeoParquet 1.1', 'CSV (gzip)'] },
                  month: { type: 'string', pattern: '^\\d{4}-\\d{2}$' },
                  reports: { type: 'integer', minimum: 0 },
                  bytes: { type: 'integer', minimum: 0 },
                  sha256: { type: 'string', pattern: '^[0-9a-f]{64}$' },
                },
              },
            },
          },
        },
      },
    },
  }),
  BoundaryLevels: envelope({
    type: 'object',
    additionalProperties: false,
    required: ['version', 'label', 'attribution', 'levels'],
    properties: {
      version: { type: 'string' },
      label: { type: 'string' },
      attribution: { type: ['string', 'null'], description: "Who made the version's boundaries, to acknowledge wherever they are shown (the default's: PSA and NAMRIA); null when its publisher gave none." },
      levels: {
        type: 'array',
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['level', 'count'],
          properties: { level: { enum: ['region', 'province', 'city'] }, count: { type: 'integer', minimum: 0 } },
        },
      },
    },
  }),
  OutlinesTopoJson: envelope(
    topology(
      {
        type: 'object',
        required: ['type', 'arcs', 'properties'],
        properties: { type: { enum: ['Polygon', 'MultiPolygon'] }, arcs: { type: 'array' }, properties: { $ref: '#/components/schemas/CityProperties' } },
      },
      { arcs: { type: 'array' }, transform: { type: 'object', required: ['scale', 'translate'] } },
      ['arcs', 'transform', 'bbox'],
    ),
  ),
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
    properties: {
      code: { type: 'string', examples: ['PH-QC'] },
      name: { type: 'string', examples: ['Quezon City'] },
      province: { type: 'string', description: "In /cities/outlines?level=city: the code of the city's province (as admin= takes it), where the version has provinces and one holds the city.", examples: ['PH-0305400000'] },
    },
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
    paths: withCommonAnswers(documentPaths(ROUTES)),
  };
}

/**
 * COMMON_ANSWERS (any request may get them before its route reads it: http.md, "Every request")
 * on every operation, and `Retry-After` on every 429 and 503, which always carry it.
 */
function withCommonAnswers(paths: Record<string, PathItem>): Record<string, PathItem> {
  for (const item of Object.values(paths)) {
    for (const [method, operation] of Object.entries(item as Record<string, { responses?: Record<string, Record<string, unknown>> }>)) {
      if (!['get', 'head', 'post', 'put', 'delete', 'patch'].includes(method) || !operation.responses) continue;
      const responses = operation.responses;
      for (const [status, answer] of Object.entries(COMMON_ANSWERS)) responses[status] ??= answer;
      // The example of an unknown parameter lists this operation's own, as its refusal does.
      if (responses['400'] === badQuery) {
        const params = (operation as { parameters?: { in: string; name: string }[] }).parameters ?? [];
        responses['400'] = badQueryOf(params.filter((p) => p.in === 'query').map((p) => p.name));
      }
      for (const status of ['429', '503']) {
        const answer = responses[status];
        if (answer) responses[status] = { ...answer, headers: { ...retryAfter, ...(answer.headers as object | undefined) } };
      }
    }
  }
  return paths;
}
