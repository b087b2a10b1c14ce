// The service's routes, declared once: the path Express matches, the handler of each method
// (by name: createApp supplies the handlers), what its 405 allows, whether it is a public read
// under the read rate limit, its part of the OpenAPI document, and what warms it up. Each family
// is declared in routes/; this order is the order of matching (a literal path before a parameter
// that would take it) and of the paths a 404 names and the OpenAPI document lists.
import { OGC_ROUTES } from './ogc/routes.js';
import type { Mount, Route } from './route.js';
import { FEEDS_ROUTES } from './routes/feeds.js';
import { PLACES_ROUTES } from './routes/places.js';
import { RELEASES_ROUTES } from './routes/releases.js';
import { REPORTS_ROUTES } from './routes/reports.js';
import { SERVICE_ROUTES } from './routes/service.js';

export const ROUTES: readonly Route[] = [
  { path: '/', serve: { get: 'explorer' } },
  ...FEEDS_ROUTES,
  ...PLACES_ROUTES,
  ...REPORTS_ROUTES,
  ...RELEASES_ROUTES,
  ...SERVICE_ROUTES,
  ...OGC_ROUTES,
];

/** Prefixes served as a whole: Swagger UI, the explorer's files. */
export const MOUNTS: readonly Mount[] = [
  { prefix: '/docs', serve: 'docs', listed: true },
  { prefix: '/explorer', serve: 'explorerAssets' },
];
