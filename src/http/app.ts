// createApp: what every entry point serves: the feed's posts (feedPost.ts) and the Express app
// for everything else, with one access log, one set of metrics and one error handler.
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';
import express, { type Request, type RequestHandler, type Response } from 'express';
import { ipKeyGenerator, rateLimit } from 'express-rate-limit';
import type { ApiKey } from '../apiKeys.js';
import { HttpError } from '../errors.js';
import type { Archive } from '../archive/window.js';
import type { BoundaryRepository } from '../boundaries/repository.js';
import type { Config } from '../config.js';
import type { EventFeed } from '../events/events.js';
import type { Intake } from '../ingest/intake.js';
import type { KeyLedger, LedgerLifecycle, ReportLookup, RetractionLedger } from '../ledger/ledger.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import type { ObjectStore } from '../store/objectStore.js';
import { accessLog, useAccessLog } from './accessLog.js';
import { Admission } from './admission.js';
import { archiveRouter } from './archive.js';
import { cursorSecret } from '../cursorSecret.js';
import { citiesRouter } from './cities.js';
import { CursorCodec } from './cursor.js';
import { errorHandler } from './errorHandler.js';
import { explorerRouter } from './explorer.js';
import { partnerOf, type AuthFailureGuard } from './auth.js';
import { AuthFailureLimiter } from './authFailures.js';
import { clientKey } from './clientAddress.js';
import { feedsRouter } from './feeds.js';
import { feedPost, isFeedPost } from './feedPost.js';
import { openApiDocument } from './openapi.js';
import { ogcRouter } from './ogc/router.js';
import { operationsRouter, type OperationsDeps } from './operations.js';
import { reportsRouter } from './reports.js';
import { parseQuery, queryGuard } from './queryGuards.js';
import { streamRouter } from './stream.js';
import { capRouter } from './cap.js';
import type { WarmUp } from './warmUp.js';

/** What the API serves from: its configuration and the ports and readers its routes use. */
export interface AppDeps extends OperationsDeps {
  config: Config;
  log: Logger;
  metrics: Metrics;
  store: ObjectStore;
  /** Kept keys (authentication), reports by identity, a partner's retraction, the write probe of /ready. */
  ledger: Pick<KeyLedger, 'keyByDigest'> & Pick<ReportLookup, 'get' | 'lookup'> & Pick<RetractionLedger, 'retract'> & Pick<LedgerLifecycle, 'ping'>;
  boundaries: BoundaryRepository;
  intake: Intake;
  archive: Archive;
  /** The event log: the live stream and CAP. */
  feed: EventFeed;
}

export interface AppOptions {
  apiKeys: readonly ApiKey[];
  /** The process's own start-up requests: left out of the access log, the metrics and the rate limits. */
  warmUp?: WarmUp;
  /** The address the API listens on, once it does: the public base when PUBLIC_BASE_URL is unset. */
  listeningUrl?: () => string | undefined;
}

/** Paths the service answers, with the methods each allows (for 405 + Allow). */
const ROUTES: Record<string, string> = {
  '/': 'GET, HEAD',
  '/feeds/partner': 'POST',
  '/feeds/partner/:postId': 'DELETE',
  '/cities': 'GET, HEAD, OPTIONS',
  '/reports/archive': 'GET, HEAD, OPTIONS',
  '/reports/stream': 'GET, OPTIONS',
  '/reports/cap.atom': 'GET, HEAD, OPTIONS',
  '/reports/archive/count': 'GET, HEAD, OPTIONS',
  '/reports/archive/stats': 'GET, HEAD, OPTIONS',
  '/reports/archive/extent': 'GET, HEAD, OPTIONS',
  '/reports/:pkey': 'GET, HEAD, OPTIONS',
  '/cities/:code/local-areas': 'GET, HEAD, OPTIONS',
  '/openapi.json': 'GET, HEAD, OPTIONS',
  '/health': 'GET, HEAD',
  '/ready': 'GET, HEAD',
  '/ogc': 'GET, HEAD, OPTIONS',
  '/ogc/conformance': 'GET, HEAD, OPTIONS',
  '/ogc/api': 'GET, HEAD, OPTIONS',
  '/ogc/collections': 'GET, HEAD, OPTIONS',
  '/ogc/collections/:collectionId': 'GET, HEAD, OPTIONS',
  '/ogc/collections/:collectionId/items': 'GET, HEAD, OPTIONS',
  '/ogc/collections/:collectionId/items/:featureId': 'GET, HEAD, OPTIONS',
};

const EXPOSED = 'Link, ETag, Content-Disposition, Retry-After, X-Request-Id, X-Archive-Watermark, RateLimit, RateLimit-Policy';
/** The static files of swagger-ui-dist (found, not imported: importing loads its whole bundle). */
const SWAGGER_UI_DIR = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

export function createApp(rt: AppDeps, options: AppOptions): RequestListener {
  const app = express();
  const knownKeys = new Set(options.apiKeys.map((k) => k.key));
  // Absolute URLs in answers start here, whatever Host a request names.
  const publicBase = () => rt.config.publicBaseUrl ?? options.listeningUrl?.() ?? `http://localhost:${rt.config.port}`;
  // One key for every paged route's cursors, loaded on first use.
  const cursors = new CursorCodec(() => cursorSecret(rt.config, rt.store));
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', parseQuery);
  app.set('trust proxy', rt.config.trustProxy);

  // A request id on every log line and in the X-Request-Id answer header.
  const own = (req: IncomingMessage) => options.warmUp?.is(req) === true;
  const startLog = accessLog(rt.log, { knownKeys, quietPaths: new Set(['/health']), quiet: own });
  const observe = requestMetrics(rt, own);
  useAccessLog(app, rt.log, startLog);
  app.use(queryGuard);
  app.use((req, res, next) => {
    observe(req, res, () => (req.route?.path ? `${req.baseUrl}${String(req.route.path)}` : ROUTES[req.path] ? req.path : 'unmatched'));
    next();
  });
  app.use(cors);

  app.use(operationsRouter(rt));
  const readLimit = limiter(rt.config.rateLimits.readPerMinute, (req) => ipKeyGenerator(req.ip ?? 'unknown'), 'client', own);
  // Runs after authentication: limits are per key, counted under its name (no second hash of the key).
  const feedLimit = limiter(rt.config.rateLimits.feedPerMinute, (_req, res) => `key:${partnerOf(res)}`, 'API key');
  // One count of failed authentications per client address, for every authenticated route.
  const authFailures: AuthFailureGuard = {
    limiter: new AuthFailureLimiter(rt.config.rateLimits.authFailuresPerMinute),
    clientOf: (req) => clientKey(req, rt.config.trustProxy),
  };
  app.use(feedsRouter({ metrics: rt.metrics, apiKeys: options.apiKeys, ledger: rt.ledger, rateLimit: feedLimit, authFailures }));
  app.use(['/cities', '/reports', '/ogc'], readLimit);
  app.use(citiesRouter({ boundaries: rt.boundaries }));
  const cityCodes = async () => (await rt.boundaries.current()).set.cities.features.map((f) => f.properties.code);
  app.use(streamRouter({ events: rt.feed, config: rt.config.events, cityCodes, clientOf: (req) => clientKey(req, rt.config.trustProxy) }));
  app.use(capRouter({ events: rt.feed, boundaries: rt.boundaries, publicBase }));
  app.use(
    archiveRouter({
      archive: rt.archive,
      maxWindowMs: rt.config.archiveMaxWindowMs,
      closedAfterMs: (rt.config.flushIntervalSeconds * 2 + 60) * 1000,
      tmpDir: path.join(rt.config.tmpDir, 'exports'),
      cursors,
      admission: new Admission(rt.config.heavyAnswers.maxConcurrent, rt.config.heavyAnswers.queueMs),
      publicBase,
      cityCodes: async () => (await rt.boundaries.current()).set.cities.features.map((f) => f.properties.code),
    }),
  );

  app.use(reportsRouter({ archive: rt.archive, ledger: rt.ledger }));

  app.use(ogcRouter({ archive: rt.archive, boundaries: rt.boundaries, store: rt.store, maxWindowMs: rt.config.archiveMaxWindowMs, cursors, publicBase }));

  const document = JSON.stringify(openApiDocument());
  app.get('/openapi.json', (_req, res) => {
    res.set('Cache-Control', 'public, max-age=300').type('application/json').send(document);
  });
  // Swagger UI from its npm package, served offline; our initializer points it at /openapi.json.
  app.get('/docs', (req, res, next) => (req.path === '/docs' && !req.originalUrl.endsWith('/') ? res.redirect(301, '/docs/') : next()));
  app.get('/docs/swagger-initializer.js', (_req, res) => {
    res.type('application/javascript').send(
      "window.onload = () => { window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#swagger-ui', deepLinking: true, presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset], layout: 'StandaloneLayout' }); };",
    );
  });
  app.use('/docs', express.static(SWAGGER_UI_DIR, { index: 'index.html', maxAge: '1h' }));
  app.use(explorerRouter({ maxPoints: rt.config.explorerMaxPoints }));

  for (const [route, allow] of Object.entries(ROUTES)) {
    app.all(route, () => {
      throw new HttpError(405, `${route} allows ${allow} only.`, [], { Allow: allow });
    });
  }
  app.use((req) => {
    throw new HttpError(404, `No resource at ${req.path.slice(0, 200)}. Known paths: ${Object.keys(ROUTES).join(', ')}, /docs.`);
  });
  const errorAnswer = errorHandler(rt.log);
  app.use(errorAnswer);

  const post = feedPost({
    intake: rt.intake,
    metrics: rt.metrics,
    apiKeys: options.apiKeys,
    ledger: rt.ledger,
    rateLimit: feedLimit,
    authFailures,
    acceptDeadlineMs: rt.config.acceptDeadlineMs,
    acceptMaxInFlight: rt.config.acceptMaxInFlight,
    log: rt.log,
    start: (req, res, route) => {
      startLog(req, res);
      observe(req, res, () => route);
    },
    errorAnswer,
  });
  return (req, res) => (isFeedPost(req) ? post(req, res) : app(req, res));
}

/** CORS for the public GET endpoints, with preflight; the feed is for servers, not browsers. */
const cors: RequestHandler = (req, res, next) => {
  if (req.path.startsWith('/feeds/')) return next();
  res.set('Access-Control-Allow-Origin', '*');
  res.set('Access-Control-Expose-Headers', EXPOSED);
  if (req.method === 'OPTIONS') {
    res.set({
      'Access-Control-Allow-Methods': 'GET, HEAD, OPTIONS',
      'Access-Control-Allow-Headers': 'If-None-Match, Accept, Accept-Encoding, Content-Type, X-Request-Id',
      'Access-Control-Max-Age': '86400',
    });
    res.status(204).end();
    return;
  }
  next();
};

function limiter(perMinute: number, key: (req: Request, res: Response) => string, per: string, skip?: (req: Request) => boolean): RequestHandler {
  return rateLimit({
    ...(skip && { skip }),
    windowMs: 60_000,
    limit: perMinute,
    // RateLimit and RateLimit-Policy as draft 7 words them: draft 8's partition key is a hash of
    // the key on every request, which cost more than the count.
    standardHeaders: 'draft-7',
    legacyHeaders: false,
    keyGenerator: key,
    handler: (req, _res, next) => {
      const reset = (req as Request & { rateLimit?: { resetTime?: Date } }).rateLimit?.resetTime;
      const seconds = Math.max(1, Math.ceil(((reset?.getTime() ?? Date.now() + 60_000) - Date.now()) / 1000));
      next(
        new HttpError(429, `More than ${perMinute} requests a minute for this ${per}; retry after ${seconds} seconds.`, [], {
          'Retry-After': String(seconds),
        }),
      );
    },
  });
}

/** Counts a request and times it to its last byte, under its route (`routeOf`, asked when it is answered). */
function requestMetrics(rt: Pick<AppDeps, 'metrics'>, skip: (req: IncomingMessage) => boolean): (req: IncomingMessage, res: ServerResponse, routeOf: () => string) => void {
  return (req, res, routeOf) => {
    if (skip(req)) return;
    const end = rt.metrics.httpDuration.startTimer();
    res.on('finish', () => {
      // The matched route, never the raw path: labels stay few whatever clients send.
      const route = routeOf();
      const method = req.method ?? 'unknown';
      rt.metrics.httpRequests.inc({ route, method, status: String(res.statusCode) });
      end({ route, method });
    });
  };
}
