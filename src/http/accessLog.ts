// The request id and the access log: one short JSON line per request, written when its answer
// is finished (or the client hung up), with the id the answer carries in X-Request-Id. A
// request's own logger (`req.log`, this request on each of its lines) is made only when a
// handler logs something: most requests never do, and a child logger per request cost more
// than the line.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Express } from 'express';
import type { Logger } from '../shared/log.js';
import { isCutShort } from './answerStart.js';
import { partnerIfAny } from './auth.js';
import { isGeneratedKeyShaped, keysWithin, redactUrl } from './queryGuards.js';

declare module 'http' {
  interface IncomingMessage {
    /** The request id (X-Request-Id). */
    id: string;
    /** A logger whose lines carry this request (its id first). */
    log: Logger;
  }
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;
const SEEN = Symbol('access log');

interface Seen {
  /** What ops read of the request: id, method, path, client; no headers (costly, and may carry secrets). */
  described: () => object;
  own: Logger | undefined;
}

type Tracked = IncomingMessage & { [SEEN]?: Seen };

export interface AccessLogOptions {
  /** API keys: a key sent in a URL (refused by checkQueryString, queryGuards.ts) must not reach the log. */
  knownKeys: ReadonlySet<string>;
  /** Paths polled by probes and scrapers: no access line (their errors are still logged). */
  quietPaths: ReadonlySet<string>;
}

/** Starts a request's access log: its id (X-Request-Id), and its line once the answer is done. */
export type StartAccessLog = (req: IncomingMessage, res: ServerResponse) => void;

export function accessLog(log: Logger, options: AccessLogOptions): StartAccessLog {
  const lines = log.isLevelEnabled('info');
  return (req, res) => {
    const given = req.headers['x-request-id'];
    // A key sent as the id (a client's mistake: a configured one, or one shaped like the ledger's) is neither logged nor echoed.
    const id = typeof given === 'string' && REQUEST_ID.test(given) && !options.knownKeys.has(given) && !isGeneratedKeyShaped(given) && keysWithin(given, options.knownKeys) === given ? given : randomUUID();
    req.id = id;
    res.setHeader('X-Request-Id', id);
    const startedAt = Date.now();
    // Before any router rewrites req.url for a mounted path.
    const url = req.url ?? '';
    const described = () => ({
      id,
      method: req.method,
      url: redactUrl(url, options.knownKeys),
      remoteAddress: req.socket?.remoteAddress,
      userAgent: req.headers['user-agent'] === undefined ? undefined : keysWithin(req.headers['user-agent'], options.knownKeys),
    });
    (req as Tracked)[SEEN] = { described, own: undefined };
    // 'close' comes after 'finish' on every answer, and alone when the client hung up first.
    if (lines && !options.quietPaths.has(url)) res.once('close', () => line(log, res, described(), Date.now() - startedAt));
  };
}

/** Gives the app's requests `req.log`, for the routes (the request layer starts each request's access log). */
export function useAccessLog(app: Express, log: Logger): void {
  // On the requests' prototype, once: a getter defined on each request would give every request
  // object a shape of its own, and slow every later property read on it.
  Object.defineProperty(app.request, 'log', {
    configurable: true,
    get(this: Tracked): Logger {
      const seen = this[SEEN];
      if (!seen) return log;
      return (seen.own ??= log.child({ req: seen.described() }));
    },
  });
}

function line(log: Logger, res: ServerResponse, req: object, responseTime: number): void {
  // The name of the partner key that authenticated the request (never the key).
  const partner = partnerIfAny(res);
  const fields = { req, ...(partner !== undefined && { partner }), res: { statusCode: res.statusCode }, responseTime };
  if (isCutShort(res)) log.error({ ...fields, aborted: true }, 'answer cut short by a server error');
  // Ended but not flushed: every byte was handed over as the connection closed.
  else if (!res.writableFinished && !res.writableEnded) log.info({ ...fields, aborted: true }, 'client closed the connection before the answer was complete');
  else if (res.statusCode >= 500) log.error(fields, 'request errored');
  else log.info(fields, 'request completed');
}
