// Requests Node's HTTP parser refuses before the app sees them (headers over its size limit,
// a malformed request line, Content-Length with Transfer-Encoding, a request too slow to
// arrive): Node would answer them with an empty body. The server's 'clientError' event lets
// us answer in the error shape instead, as raw bytes on the socket, then close it.
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { reasonPhrase } from '../shared/errors.js';
import { READ_CORS_HEADERS } from './cors.js';
import type { Logger } from '../shared/log.js';

interface ParserError extends Error {
  code?: string;
}

/** A request line of another HTTP version than 1.0 and 1.1: bad input (a 4xx, as DESIGN.md has it), though RFC 9110 would allow a 505. */
export const VERSION_REFUSED = 'This service speaks HTTP/1.1 (and 1.0): send the request line as HTTP/1.1.';

/** Status and message for each refusal we can name; anything else from the parser is a 400. */
const REFUSALS: Record<string, [number, string]> = {
  HPE_HEADER_OVERFLOW: [431, 'The request line and headers exceed 16 KiB (a very long URL or query string counts too).'],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'The request did not arrive in time (headers or body too slow); the connection is closed.'],
  HPE_UNEXPECTED_CONTENT_LENGTH: [400, 'The request has both Content-Length and Transfer-Encoding; send one of Content-Length and Transfer-Encoding.'],
  // Node's parser reports Content-Length with Transfer-Encoding under this code (or the one above).
  HPE_INVALID_TRANSFER_ENCODING: [400, 'The Transfer-Encoding header is invalid, or sent with Content-Length (send one of Content-Length and Transfer-Encoding).'],
  HPE_INVALID_CONTENT_LENGTH: [400, 'The Content-Length header is invalid.'],
  HPE_INVALID_METHOD: [400, 'The request method is not valid HTTP.'],
  // A version past 1.1 other than 2.0 (those the parser lets through are refused in layer.ts).
  HPE_INVALID_VERSION: [400, VERSION_REFUSED],
  HPE_CHUNK_EXTENSIONS_OVERFLOW: [413, 'The chunk extensions of the body are too large.'],
};

/** Answers under way that the parser's refusal ended (its status written as raw bytes, never through the answer). */
const refusedAnswers = new WeakMap<ServerResponse, number>();

/** The status the parser's refusal gave a request whose answer it ended (a body too slow or malformed): undefined for any other. */
export function refusalOf(res: ServerResponse): number | undefined {
  return refusedAnswers.get(res);
}

export function onClientError(log: Logger) {
  /** Connections whose refusal is decided: the parser meets its error again with each chunk the client sends after it, and only the first is answered. */
  const refused = new WeakSet<Duplex>();
  return (err: ParserError, socket: Duplex): void => {
    const code = err.code ?? '';
    // A reset or a broken pipe: nobody to answer.
    if (code === 'ECONNRESET' || code === 'EPIPE') {
      socket.destroy();
      return;
    }
    // Answered already (or to be): the socket is closed a second after its refusal, not at the
    // client's next chunk, whose unread bytes would make the close a reset that can lose the refusal.
    if (refused.has(socket)) return;
    if (!socket.writable) {
      socket.destroy();
      return;
    }
    refused.add(socket);
    const reason = (err as ParserError & { reason?: string }).reason ?? err.message;
    const [status, message] =
      code === 'HPE_UNEXPECTED_CONTENT_LENGTH' && /duplicate/i.test(reason)
        ? [400, 'The request has more than one Content-Length header; send one.']
        : // A valid Content-Length beside a Transfer-Encoding other than chunked: the pair is the fault.
          code === 'HPE_INVALID_CONTENT_LENGTH' && /Transfer-Encoding/i.test(reason)
          ? REFUSALS.HPE_UNEXPECTED_CONTENT_LENGTH!
          : (REFUSALS[code] ?? [400, 'The request is not valid HTTP/1.1.']);
    const requestId = randomUUID();
    log.info({ code, status, requestId }, 'request refused by the HTTP parser');
    // The request whose body is refused has an answer not yet begun: counted with this status,
    // not as a client gone; unless the client's leaving is what ended the body (EOF mid-message).
    const current = (socket as Connection)._httpMessage;
    if (current && !current.headersSent && code !== 'HPE_INVALID_EOF_STATE') refusedAnswers.set(current, status);
    // After the answers to the requests before it on the connection (pipelined, or a slow body
    // after a keep-alive answer): written ahead of them, the refusal would be taken for theirs.
    afterAnswers(socket as Connection, () => {
      if (!socket.writable) return socket.destroy();
      socket.end(rawAnswer(status, message, requestId));
      // Whatever the client still sends is not read; end() alone would wait for it.
      setTimeout(() => socket.destroy(), 1000).unref();
    });
  };
}

/** A server's socket, with the answer Node is writing on it (the next pipelined one is attached when it is done). */
type Connection = Duplex & { _httpMessage?: ServerResponse | null };

/**
 * Runs `then` once the answers under way on the socket are sent. The refusal may be of the
 * request being answered (its body malformed or too slow): then at once, unless its answer has
 * begun and cannot get another (the socket is closed). An answer closed unfinished (its client
 * gone, or its send stalled) closes the socket.
 */
function afterAnswers(socket: Connection, then: () => void): void {
  const answer = socket._httpMessage;
  if (!answer) return then();
  if (!answer.req.complete) return answer.headersSent ? void socket.destroy() : then();
  answer.once('close', () => (answer.writableFinished ? afterAnswers(socket, then) : socket.destroy()));
}

/** An answer in the error shape as the bytes of a whole HTTP/1.1 response that closes the connection. */
export function rawAnswer(status: number, message: string, requestId: string): string {
  const body = JSON.stringify({ statusCode: status, error: reasonPhrase(status), message, details: [] });
  // As every error answer, kept by no cache; with a read's CORS headers, since the request (its
  // path too) could not be read: a page of any origin learns why its read was refused.
  const cors = Object.entries(READ_CORS_HEADERS).map(([name, value]) => `${name}: ${value}\r\n`).join('');
  return `HTTP/1.1 ${status} ${reasonPhrase(status)}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nCache-Control: no-store\r\n${cors}X-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`;
}
