// createApp: what every entry point serves. The request layer (layer.ts) gives every request its
// id, access log line, metrics and query guard, serves the feed's posts itself and hands the rest
// to Express; the routes, their 404s and 405s are mounted from the route table (routes.ts).
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import path from 'node:path';
import express, { type Request, type RequestHandler, type Response } from 'express';
import { ipKeyGenerator, rateLimit } from 'express-rate-limit';
import type { ApiKey } from '../partners/apiKeys.js';
import { HttpError } from '../shared/errors.js';
import type { Archive } from '../archive/window.js';
import type { BoundaryRepository } from '../boundaries/repository.js';
import type { Config } from '../shared/config.js';
import type { EventFeed } from '../events/events.js';
import type { Intake } from '../ingest/intake.js';
import type { KeyLedger, LedgerLifecycle, ReportLookup, RetractionLedger } from '../ledger/ledger.js';
import type { Logger } from '../shared/log.js';
import type { Metrics } from '../shared/metrics.js';
import type { ObjectStore } from '../store/objectStore.js';
import { accessLog, useAccessLog } from './accessLog.js';
import { Admission } from './admission.js';
import { refusalOf } from './clientErrors.js';
import { apiDocsHandlers } from './apiDocs.js';
import { archiveHandlers } from './archive.js';
import { tagBodies } from './bodyTags.js';
import { servedBoundaries } from './boundaryVersion.js';
import { cursorSecret } from './cursorSecret.js';
import { citiesHandlers } from './cities.js';
import { CursorCodec } from './cursor.js';
import { errorHandler } from './errorHandler.js';
import { explorerHandlers } from './explorer.js';
import { partnerOf, type AuthFailureGuard } from './auth.js';
import { AuthFailureLimiter } from './authFailures.js';
import { clientKey } from './clientAddress.js';
import { feedsHandlers } from './feeds.js';
import { feedPost } from './feedPost.js';
import { isOwnRequest, requestLayer } from './layer.js';
import { ogcHandlers } from './ogc/router.js';
import { operationsRouter, type OperationsDeps } from './operations.js';
import { releasesHandlers } from './releases.js';
import { reportsHandlers } from './reports.js';
import { parseQuery } from './queryGuards.js';
import { allowOf, type Handlers } from './route.js';
import { MOUNTS, ROUTES } from './routes.js';
import { streamHandlers } from './stream.js';
import { capHandlers } from './cap.js';
import type { WarmUp } from './warmUp.js';
import { cors, preflightOf } from './cors.js';

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
  /** The process's own start-up requests: the request layer leaves them out of the access log, the metrics and the rate limits. */
  warmUp?: WarmUp;
  /** The address the API listens on, once it does: the public base when PUBLIC_BASE_URL is unset. */
  listeningUrl?: () => string | undefined;
}

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
  useAccessLog(app, rt.log);
  app.use(cors);
  app.use(tagBodies);

  // A CORS preflight is not counted: a page sends one before each cross-origin read of a new URL,
  // and it costs a few headers.
  const readLimit = limiter(rt.config.rateLimits.readPerMinute, (req) => ipKeyGenerator(req.ip ?? 'unknown'), 'client', (req) => req.method === 'OPTIONS' || isOwnRequest(req));
  // Runs after authentication: limits are per key, counted under its name (no second hash of the key).
  const feedLimit = limiter(rt.config.rateLimits.feedPerMinute, (_req, res) => `key:${partnerOf(res)}`, 'API key');
  // One count of failed authentications per client address, for every authenticated route.
  const authFailures: AuthFailureGuard = {
    limiter: new AuthFailureLimiter(rt.config.rateLimits.authFailuresPerMinute),
    clientOf: (req) => clientKey(req, rt.config.trustProxy),
  };
  const operations = operationsRouter(rt);
  // Heavy answers' turns, shared: whole archive windows, and OGC pages that may read more than one.
  const heavy = rt.config.heavyAnswers;
  const slowReads = { minBytesPerSecond: heavy.minReadBytesPerSecond, windowMs: rt.config.http.sendStallMs };
  const admission = new Admission(heavy.maxConcurrent, heavy.perAddress, heavy.queueMs, slowReads);
  // Pages' turns, apart: a page is light to make, but held in memory until its client has taken it.
  const pageAdmission = new Admission(heavy.maxPages, heavy.pagesPerAddress, heavy.queueMs, slowReads, { plural: 'pages', advice: 'wait for one to end' });
  const clientOf = (req: IncomingMessage) => clientKey(req, rt.config.trustProxy);
  const handlers: Handlers = {
    ...feedsHandlers({ metrics: rt.metrics, apiKeys: options.apiKeys, ledger: rt.ledger, rateLimit: feedLimit, authFailures }),
    ...citiesHandlers({ boundaries: rt.boundaries }),
    ...streamHandlers({ events: rt.feed, config: rt.config.events, adminAreas: async () => (await rt.boundaries.current()).adminAreas, clientOf: (req) => clientKey(req, rt.config.trustProxy) }),
    ...capHandlers({ events: rt.feed, boundaries: rt.boundaries, publicBase }),
    ...archiveHandlers({
      archive: rt.archive,
      maxWindowMs: rt.config.archiveMaxWindowMs,
      closedAfterMs: (rt.config.flushIntervalSeconds * 2 + 60) * 1000,
      tmpDir: path.join(rt.config.tmpDir, 'exports'),
      cursors,
      admission,
      pageAdmission,
      clientOf,
      publicBase,
      adminAreas: async (version, details) => {
        const served = await servedBoundaries(rt.boundaries, version, details);
        return served && { areas: served.adminAreas, version: served.version };
      },
    }),
    ...reportsHandlers({ archive: rt.archive, ledger: rt.ledger }),
    ...releasesHandlers({ store: rt.store, cacheDir: rt.config.cacheDir, cacheMaxBytes: rt.config.releaseCacheMaxBytes, publicBase, releases: rt.config.releases }),
    ...ogcHandlers({ archive: rt.archive, boundaries: rt.boundaries, store: rt.store, cursors, publicBase, admission, pageAdmission, clientOf, maxWindowMs: rt.config.archiveMaxWindowMs }),
    ...apiDocsHandlers(),
    ...explorerHandlers({ maxPoints: rt.config.explorerMaxPoints }),
    // The operations router answers both of its paths itself.
    health: operations,
    ready: operations,
  };
  const handler = (name: string) => {
    const found = handlers[name];
    if (!found) throw new Error(`The route table names a handler ${name} that no module supplies.`);
    return found;
  };

  app.use([...new Set(ROUTES.filter((r) => r.readLimit).map((r) => `/${r.path.split('/')[1]}`))], readLimit);
  for (const route of ROUTES) {
    if (route.direct) continue;
    // A preflight is answered where the table says so: elsewhere OPTIONS is a 404 or a 405, as any other method.
    if (route.preflight) app.options(route.path, preflightOf(allowOf(route)));
    for (const [verb, name] of Object.entries(route.serve)) app[verb as 'get' | 'post' | 'delete'](route.path, handler(name));
  }
  for (const mount of MOUNTS) {
    // Static files: read, never written.
    app.use(mount.prefix, (req, _res, next) => {
      if (req.method === 'GET' || req.method === 'HEAD') return next();
      throw new HttpError(405, `${mount.prefix} allows GET, HEAD only.`, [], { Allow: 'GET, HEAD' });
    });
    app.use(mount.prefix, handler(mount.serve));
  }
  for (const route of ROUTES) {
    if (route.unlisted) continue;
    const allow = allowOf(route);
    app.all(route.path, () => {
      throw new HttpError(405, `${route.path} allows ${allow} only.`, [], { Allow: allow });
    });
  }
  const known = [...ROUTES.filter((r) => !r.unlisted).map((r) => r.path), ...MOUNTS.filter((m) => m.listed).map((m) => m.prefix)].join(', ');
  app.use((req) => {
    throw new HttpError(404, `No resource at ${req.path.slice(0, 200)}. Known paths: ${known}.`);
  });
  const errorAnswer = errorHandler(rt.log, knownKeys);
  app.use(errorAnswer);

  const postReport = feedPost({
    intake: rt.intake,
    metrics: rt.metrics,
    apiKeys: options.apiKeys,
    ledger: rt.ledger,
    rateLimit: feedLimit,
    authFailures,
    placeNames: async () => (await rt.boundaries.current()).placeNames,
    acceptDeadlineMs: rt.config.acceptDeadlineMs,
    acceptMaxInFlight: rt.config.acceptMaxInFlight,
    log: rt.log,
  });
  return requestLayer({
    routes: ROUTES,
    direct: { postPartnerReport: postReport },
    app,
    // A request id on every log line and in the X-Request-Id answer header.
    startLog: accessLog(rt.log, { knownKeys, quietPaths: new Set(['/health']) }),
    observe: requestMetrics(rt),
    errorAnswer,
    isOwn: options.warmUp && ((req) => options.warmUp!.is(req)),
  });
}

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

/**
 * Counts a request and times it to its last byte or its client's hang-up (a stream ends only by
 * one), under its route (`routeOf`, asked then). One the parser refused part-way (its body) is
 * counted with the refusal's status; a client gone before any answer began with 499, as nginx
 * logs it: no status was sent.
 */
function requestMetrics(rt: Pick<AppDeps, 'metrics'>): (req: IncomingMessage, res: ServerResponse, routeOf: () => string) => void {
  return (req, res, routeOf) => {
    const end = rt.metrics.httpDuration.startTimer();
    res.once('close', () => {
      const route = routeOf();
      const method = req.method ?? 'unknown';
      const status = res.writableFinished || res.headersSent ? String(res.statusCode) : String(refusalOf(res) ?? CLIENT_CLOSED);
      rt.metrics.httpRequests.inc({ route, method, status });
      end({ route, method });
    });
  };
}

const CLIENT_CLOSED = '499';
