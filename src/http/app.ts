// createApp: the one Express app every entry point serves.
import express, { type Express } from 'express';
import type { ArchiveReader } from '../archive/reader.js';
import type { BoundaryRepository } from '../boundaries/repository.js';
import { HttpError } from '../errors.js';
import type { Intake } from '../ingest/intake.js';
import type { Logger } from '../log.js';
import { archiveRouter } from './archive.js';
import { citiesRouter } from './cities.js';
import { errorHandler } from './errorHandler.js';
import { feedsRouter } from './feeds.js';

export interface AppDeps {
  intake: Intake;
  boundaries: BoundaryRepository;
  archive: ArchiveReader;
  apiKeys: readonly string[];
  archiveMaxWindowMs: number;
  log: Logger;
}

/** Paths the service answers, with the methods each allows (for 405 + Allow). */
const ROUTES: Record<string, string> = {
  '/feeds/partner': 'POST',
  '/cities': 'GET, HEAD',
  '/reports/archive': 'GET, HEAD',
};

export function createApp(deps: AppDeps): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');

  app.use((req, res, next) => {
    if (req.method === 'GET' || req.method === 'HEAD') res.set('Access-Control-Allow-Origin', '*');
    next();
  });

  app.use(feedsRouter({ intake: deps.intake, apiKeys: deps.apiKeys }));
  app.use(citiesRouter({ boundaries: deps.boundaries }));
  app.use(
    archiveRouter({
      archive: deps.archive,
      maxWindowMs: deps.archiveMaxWindowMs,
      cityCodes: async () => (await deps.boundaries.current()).set.cities.features.map((f) => f.properties.code),
    }),
  );

  for (const [path, allow] of Object.entries(ROUTES)) {
    app.all(path, () => {
      throw new HttpError(405, `${path} allows ${allow} only.`, [], { Allow: allow });
    });
  }
  app.use((req) => {
    throw new HttpError(404, `No resource at ${req.path}. Known paths: ${Object.keys(ROUTES).join(', ')}.`);
  });
  app.use(errorHandler(deps.log));
  return app;
}
