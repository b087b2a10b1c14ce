// The request layer: every request, whichever handler serves it, first gets its request id and
// access log line, its request metrics under its route's path, and the query string's guard;
// then the route table's direct routes (the feed's posts, the busiest route) are served on Node's
// own request and response, and everything else by Express. Errors of both are answered by the
// one error handler. The process's own warm-up requests are told apart here, once: they get no
// access line and no metrics, and the rate limits skip them (isOwnRequest).
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { Request } from 'express';
import type { StartAccessLog } from './accessLog.js';
import type { ErrorAnswer } from './errorHandler.js';
import { BadRequestError, HttpError } from '../shared/errors.js';
import { VERSION_REFUSED } from './clientErrors.js';
import { checkQueryString, checkUserinfo } from './queryGuards.js';
import type { DirectHandler, Route } from './route.js';
import { givenTwice } from './headers.js';
import { allowReads } from './cors.js';

export interface LayerOptions {
  routes: readonly Route[];
  /** The handlers of the direct routes, by name. */
  direct: Record<string, DirectHandler>;
  /** Everything that is not a direct route. */
  app: RequestListener;
  startLog: StartAccessLog;
  /** Counts and times a request under the label `routeOf` gives once it is answered. */
  observe: (req: IncomingMessage, res: ServerResponse, routeOf: () => string) => void;
  errorAnswer: ErrorAnswer;
  /** Whether a request is the process's own (its warm-up). */
  isOwn?: (req: IncomingMessage) => boolean;
}

const own = new WeakSet<IncomingMessage>();

/** Whether the request layer found `req` to be the process's own. */
export function isOwnRequest(req: IncomingMessage): boolean {
  return own.has(req);
}

export function requestLayer(options: LayerOptions): RequestListener {
  const known = new Set(options.routes.filter((r) => !r.unlisted).map((r) => r.path));
  const direct = options.routes
    .filter((r) => r.direct)
    .flatMap((r) =>
      Object.entries(r.serve).map(([verb, name]) => {
        const handler = options.direct[name];
        if (!handler || r.path.includes(':')) throw new Error(`The direct route ${verb.toUpperCase()} ${r.path} needs a handler named ${name} and no path parameters.`);
        // As Express matches a path: in any case, with an optional trailing slash.
        const pattern = new RegExp(`^${r.path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/?$`, 'i');
        return { method: verb.toUpperCase(), path: r.path, pattern, handler, label: () => r.path };
      }),
    );
  /** The matched route's path, never the raw path: labels stay few whatever clients send. */
  const labelOf = (req: IncomingMessage) => () => {
    const { route, baseUrl, originalUrl } = req as Partial<Request>;
    // The mount as our routes name it: the router matches any case, and the label must not vary by the client's.
    if (route?.path) return `${(baseUrl ?? '').toLowerCase()}${String(route.path)}`;
    const path = (originalUrl ?? req.url ?? '').split('?', 1)[0]!;
    return known.has(path) ? path : 'unmatched';
  };

  return (req, res) => {
    // The access log, the metrics, the admission, the stall guard and the hang-up signal each
    // listen for 'close', and Node's stream pipeline adds seven of its own to a response: past
    // the default ten, a warning that is no leak (and no JSON line) went to stderr.
    res.setMaxListeners(32);
    // A request line in absolute form (`POST http://host/feeds/partner`, which HTTP/1.1 servers
    // must take) names its path after the origin, as Express reads it.
    const url = (req.url ?? '').replace(/^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i, '');
    const query = url.indexOf('?');
    const path = query < 0 ? url : url.slice(0, query);
    let served: (typeof direct)[number] | undefined;
    for (const d of direct) if (d.method === req.method && (d.path === path || d.pattern.test(path))) served = d;
    if (options.isOwn?.(req)) own.add(req);
    else {
      options.startLog(req, res);
      options.observe(req, res, served ? served.label : labelOf(req));
    }
    try {
      // Node's parser lets HTTP/2.0 and 0.9 request lines through, and would answer them as 1.1.
      if (req.httpVersionMajor !== 1) {
        throw new HttpError(400, VERSION_REFUSED, [], { Connection: 'close' });
      }
      // HTTP/1.1 requires Host (RFC 9112 3.2); Node's own refusal of one without it has no body.
      if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor >= 1) {
        throw new BadRequestError('An HTTP/1.1 request must carry a Host header.', [{ in: 'header', field: 'Host', message: 'is required in HTTP/1.1' }]);
      }
      // Two Host headers name no one host (RFC 9112 3.2); Node keeps the first without a word.
      if (givenTwice(req, 'host')) {
        throw new HttpError(400, 'The request carries more than one Host header; send one.', [{ in: 'header', field: 'Host', message: 'must be given once' }], { Connection: 'close' });
      }
      // Node frames a body whose last transfer coding is chunked and passes the others (gzip,
      // chunked) on undecoded: refused here rather than read as a body of other bytes (RFC 9112
      // 6.1 would answer 501; the connection closes, its framing being one we do not take).
      const coded = req.headers['transfer-encoding'];
      if (coded !== undefined && !/^\s*chunked\s*$/i.test(coded)) {
        throw new HttpError(400, 'Transfer-Encoding other than chunked is not supported: send the body plain or chunked, compressed with Content-Encoding if you like.', [{ in: 'header', field: 'Transfer-Encoding', message: 'must be chunked (or absent)' }], { Connection: 'close' });
      }
      checkUserinfo(req.url ?? '');
      if (query >= 0) checkQueryString(url);
    } catch (err) {
      // Refused before Express's own CORS: a page reading the API still gets to read why.
      allowReads(path, res);
      options.errorAnswer(err, req, res);
      return;
    }
    if (served) served.handler(req, res).catch((err: unknown) => options.errorAnswer(err, req, res));
    else options.app(req, res);
  };
}
