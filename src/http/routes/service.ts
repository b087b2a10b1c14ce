// The service's own routes: the OpenAPI document, liveness and readiness.
import { badQuery, unavailable } from '../openapiParts.js';
import type { Route } from '../route.js';

export const SERVICE_ROUTES: readonly Route[] = [
  { path: '/openapi.json', serve: { get: 'openApiJson' }, preflight: true },
  {
    path: '/health',
    serve: { get: 'health' },
    doc: () => ({
      '/health': {
        get: {
          operationId: 'health',
          summary: 'Liveness',
          responses: {
            '200': { description: 'The process answers.', content: { 'application/json': { schema: { $ref: '#/components/schemas/Health' } } } },
            '400': badQuery,
          },
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
            '400': badQuery,
            '503': unavailable,
          },
        },
      },
    }),
  },
];
