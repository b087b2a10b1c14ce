// The HTTP server around the app: Node's limits set for a service whose largest request is
// a 64 KiB feed body, and what Node refuses itself answered in the error shape.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { Duplex } from 'node:stream';
import type { Config } from '../shared/config.js';
import type { Logger } from '../shared/log.js';
import { onClientError, rawAnswer } from './clientErrors.js';
import { allowReads } from './cors.js';
import { sendError } from './errorHandler.js';
import { closeStalledSends } from './sendStall.js';

/** How often Node looks for connections past their header or request timeout (its default, 30 s, would let a slow client outlive both by as much). */
const CHECK_TIMEOUTS_EVERY_MS = 1_000;

export function createHttpServer(app: http.RequestListener, limits: Config['http'], log: Logger): http.Server {
  const server = http.createServer(
    {
      // Headers (and the request line) must arrive within this; then the body too within requestTimeout.
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      connectionsCheckingInterval: CHECK_TIMEOUTS_EVERY_MS,
      // A request without Host is refused by the request layer (layer.ts), in the error shape.
      requireHostHeader: false,
    },
    app,
  );
  // Node ≥ 20 reads these from the options; setting them again keeps every supported version the same.
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = limits.requestTimeoutMs;
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  server.on('request', (_req: http.IncomingMessage, res: http.ServerResponse) => closeStalledSends(res, limits.sendStallMs));
  server.on('clientError', onClientError(log));
  // CONNECT (a proxy's tunnel): Node would close the connection without a word.
  server.on('connect', (_req: http.IncomingMessage, socket: Duplex) => {
    // Node hands the socket over without its own error listener: a client's reset would
    // otherwise be an uncaught exception that stops the process.
    socket.on('error', () => socket.destroy());
    socket.end(rawAnswer(400, 'CONNECT is not served: this service is not a proxy.', randomUUID()));
    setTimeout(() => socket.destroy(), 1000).unref();
  });
  // An Expect other than 100-continue: Node would answer 417 with an empty body.
  server.on('checkExpectation', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const details = [{ in: 'header' as const, field: 'Expect', message: `"${String(req.headers.expect).slice(0, 100)}" is not supported` }];
    // The request layer never sees this request: its id is given here, as for Node's own refusals.
    res.setHeader('X-Request-Id', randomUUID());
    allowReads((req.url ?? '').split('?', 1)[0]!, res);
    sendError(res, 417, 'Only "Expect: 100-continue" is supported.', details, { Connection: 'close' });
  });
  return server;
}
