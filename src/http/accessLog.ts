// The request id and the access log: one short JSON line per request, written when its answer
// is finished (or the client hung up), with the id the answer carries in X-Request-Id. A
// request's own logger (`req.log`, the same id on each of its lines) is made only when a handler
// logs something: most requests never do, and a child logger per request cost more than the line.
import { randomUUID } from 'node:crypto';
import type { RequestHandler, Response } from 'express';
import type { Logger } from '../log.js';
import { redactUrl } from './queryGuards.js';

declare module 'http' {
  interface IncomingMessage {
    /** The request id (X-Request-Id). */
    id: string;
    /** A logger whose lines carry this request (its id first). */
    log: Logger;
  }
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;

export interface AccessLogOptions {
  /** API keys: a key sent in a URL (refused by queryGuard) must not reach the log. */
  knownKeys: ReadonlySet<string>;
  /** Paths polled by probes and scrapers: no access line (their errors are still logged). */
  quietPaths: ReadonlySet<string>;
}

export function accessLog(log: Logger, options: AccessLogOptions): RequestHandler {
  return (req, res, next) => {
    const given = req.headers['x-request-id'];
    const id = typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    req.id = id;
    res.setHeader('X-Request-Id', id);
    const startedAt = Date.now();
    // What ops read (id, method, path, client), and no headers: they cost more to serialise than
    // the rest of a post and may carry secrets.
    const described = () => ({
      id,
      method: req.method,
      url: redactUrl(req.originalUrl, options.knownKeys),
      remoteAddress: req.socket?.remoteAddress,
      userAgent: req.headers['user-agent'],
    });
    let own: Logger | undefined;
    Object.defineProperty(req, 'log', { configurable: true, enumerable: false, get: () => (own ??= log.child({ req: described() })) });
    if (log.isLevelEnabled('info') && !options.quietPaths.has(req.url)) {
      const done = () => {
        res.off('finish', done);
        res.off('close', done);
        line(log, res, described(), Date.now() - startedAt);
      };
      res.on('finish', done);
      res.on('close', done);
    }
    next();
  };
}

function line(log: Logger, res: Response, req: object, responseTime: number): void {
  // The name of the partner key that authenticated the request (never the key).
  const partner = (res.locals as { partner?: string }).partner;
  const fields = { req, ...(partner !== undefined && { partner }), res: { statusCode: res.statusCode }, responseTime };
  if (!res.writableFinished) log.info({ ...fields, aborted: true }, 'client closed the connection before the answer was complete');
  else if (res.statusCode >= 500) log.error(fields, 'request errored');
  else log.info(fields, 'request completed');
}
