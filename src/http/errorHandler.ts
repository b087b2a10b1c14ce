// The one place where errors become HTTP answers, in the contract's shape:
// {statusCode, error, message, details}. Nothing internal reaches a body. On Node's own request
// and response, so the feed's intake (which does not go through Express) answers the same way.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { AnswerFailedError, dependencyName, HttpError, isDiskFull, isOutOfFiles, BoundaryPointerError, NotPublishedError, OverloadedError, reasonPhrase, UnavailableError, type ErrorDetail } from '../shared/errors.js';
import type { Logger } from '../shared/log.js';
import { InvalidReportError } from '../partners/partnerReport.js';
import { ChangesDamagedError, ChangesPrunedError } from '../archive/changes.js';
import { isCutShort } from './answerStart.js';
import { redactUrl } from './queryGuards.js';


/** The request body codings the service reads (the feed's): what a Node release's parser adds besides (zstd in Node 24) is refused too. */
export const REQUEST_CODINGS: ReadonlySet<string> = new Set(['identity', 'gzip', 'deflate', 'br']);

/** A body in another coding: 415. */
export const UNSUPPORTED_ENCODING = {
  message: "The request body's Content-Encoding is not supported: send it as it is, or in one of gzip, deflate and br.",
  details: [{ in: 'header', field: 'Content-Encoding', message: 'must be one of identity, gzip, deflate, br' }] as ErrorDetail[],
};

export const RETRY_AFTER_SECONDS = 5;

const REPRESENTATION_HEADERS = ['Content-Encoding', 'Content-Disposition', 'ETag', 'Link', 'Cache-Control', 'X-Archive-Watermark'];

export function sendError(
  res: ServerResponse,
  status: number,
  message: string,
  details: ErrorDetail[] = [],
  headers: Record<string, string> = {},
): void {
  // A route may have described its answer before failing (stats sets its encoding first): the
  // error body is plain JSON, neither compressed nor cacheable as that answer. Nor kept at all: a
  // shared cache may keep a 404 without Cache-Control for minutes, where one of a report about to
  // be archived (Retry-After) or a release about to be stored turns into the answer in seconds.
  for (const name of REPRESENTATION_HEADERS) res.removeHeader(name);
  const body = JSON.stringify({ statusCode: status, error: reasonPhrase(status), message, details });
  res.statusCode = status;
  res.setHeader('Cache-Control', 'no-store');
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
}

interface BodyParserError {
  type?: string;
  status?: number;
}

/** Express's error middleware (four parameters, as Express tells them apart), also called directly. */
export type ErrorAnswer = (err: unknown, req: IncomingMessage, res: ServerResponse, next?: unknown) => void;

/** `knownKeys`: the configured partner keys, redacted from the paths logged as the access log redacts them. */
export function errorHandler(baseLog: Logger, knownKeys: ReadonlySet<string> = new Set()): ErrorAnswer {
  return (err, req, res, _next) => {
    const path = redactUrl(((req as { originalUrl?: string }).originalUrl ?? req.url ?? '').split('?', 1)[0]!, knownKeys).slice(0, 200);
    // The request's own logger (with its request id) when the access log gave it one.
    const log = (req as { log?: Logger }).log ?? baseLog;
    if (err instanceof AnswerFailedError || isCutShort(res)) {
      // The server's own failure after the first byte: the answer is cut short, the client not to blame.
      const cause = err instanceof AnswerFailedError ? err.cause : err;
      log.error({ err: cause, path, request: err instanceof AnswerFailedError ? err.request : undefined }, 'answer cut short: the server failed after its first byte');
      res.destroy();
      return;
    }
    if (req.socket.destroyed) {
      if (res.writableEnded) {
        // Every byte was handed over; the connection closed as the last ones were flushed
        // (a client that sent Connection: close and hung up once it had them all).
        log.debug({ path }, 'connection closed as a complete answer was being flushed');
      } else {
        // The client hung up and its work was stopped (or failed writing to it): nobody to answer.
        // The access log's line for the request says so at info; this one only adds the reason.
        log.debug({ path, reason: String((err as Error)?.message ?? err) }, 'client closed the connection before its answer was complete');
      }
      res.destroy();
      return;
    }
    if (res.headersSent) {
      // Mid-stream failure: cut the connection so the client sees a truncated answer, never a silently short one.
      log.error({ err, path }, 'failed while streaming a response');
      res.destroy();
      return;
    }
    if (err instanceof HttpError) return sendError(res, err.statusCode, err.message, err.details, err.headers);
    if (err instanceof InvalidReportError) {
      return sendError(res, 400, 'The report is invalid; see details for each problem.', err.details);
    }
    if (err instanceof ChangesDamagedError) {
      log.error({ err: err.message }, 'a change log cannot be read: syncs from before it are answered 410');
      const at = new Date(err.horizonMs).toISOString();
      return sendError(res, 410, `The change history before ${at} cannot be read: pull the window in full, then sync with updated_after set to that answer's X-Archive-Watermark.`, [
        { in: 'query', field: 'updated_after', message: `must not be before ${at}: the change history before it cannot be read` },
      ]);
    }
    if (err instanceof ChangesPrunedError) {
      const days = Math.round(err.retentionMs / 86_400_000);
      const horizon = new Date(err.horizonMs).toISOString();
      return sendError(res, 410, `Changes before ${horizon} are no longer kept (${days} days): pull the window in full, then sync with updated_after set to that answer's X-Archive-Watermark.`, [
        { in: 'query', field: 'updated_after', message: `must not be before ${horizon}: change logs are kept ${days} days` },
      ]);
    }
    if (err instanceof OverloadedError) {
      log.warn({ err: err.message, cause: err.cause === undefined ? undefined : String(err.cause) }, 'overloaded: answered 503');
      return sendError(res, 503, `${err.message}; retry after ${RETRY_AFTER_SECONDS} seconds.`, [], { 'Retry-After': String(RETRY_AFTER_SECONDS) });
    }
    if (err instanceof BoundaryPointerError) {
      log.error({ err: err.message }, 'boundaries unreadable: answered 503');
      return sendError(res, 503, `The boundaries cannot be read now; retry after ${RETRY_AFTER_SECONDS} seconds.`, [], { 'Retry-After': String(RETRY_AFTER_SECONDS) });
    }
    if (err instanceof NotPublishedError) {
      log.warn({ err: err.message }, 'not published yet: answered 503');
      return sendError(res, 503, `The boundaries are not published yet; retry after ${RETRY_AFTER_SECONDS} seconds.`, [], { 'Retry-After': String(RETRY_AFTER_SECONDS) });
    }
    if (err instanceof UnavailableError) {
      log.warn({ dependency: err.dependency, err: err.message, cause: String(err.cause) }, 'dependency unavailable');
      return sendError(
        res,
        503,
        `The ${dependencyName(err.dependency)} is unavailable; retry after ${RETRY_AFTER_SECONDS} seconds.`,
        [],
        { 'Retry-After': String(RETRY_AFTER_SECONDS) },
      );
    }
    // The host out of room for a moment (a full disk, no file descriptor left): its answer, not
    // a fault of this request; it recovers once space or descriptors are freed.
    if (isDiskFull(err) || isOutOfFiles(err)) {
      log.error({ err: err instanceof Error ? err.message : String(err) }, 'out of disk space or file descriptors: answered 503');
      return sendError(res, 503, `The server is out of disk space or open files for the moment; retry after ${RETRY_AFTER_SECONDS} seconds.`, [], { 'Retry-After': String(RETRY_AFTER_SECONDS) });
    }
    const parserError = err as BodyParserError;
    switch (parserError.type) {
      case 'entity.too.large':
        return sendError(res, 413, 'The request body is larger than 64 KiB once decoded (gzip is undone first; JSON escapes such as \\ud83c\\udf0a count as their 12 bytes).', [
          { in: 'body', field: '(body)', message: 'must be at most 65536 bytes once decoded' },
        ]);
      case 'entity.parse.failed':
        return sendError(res, 400, 'The request body is not valid JSON.', [{ in: 'body', field: '(body)', message: 'is not valid JSON' }]);
      case 'encoding.unsupported':
        return sendError(res, 415, UNSUPPORTED_ENCODING.message, UNSUPPORTED_ENCODING.details);
      case 'charset.unsupported':
        return sendError(res, 415, 'The request body must be UTF-8 JSON.', [{ in: 'header', field: 'Content-Type', message: 'must have no charset, or charset=utf-8' }]);
      case 'request.aborted':
        return sendError(res, 400, 'The request was aborted by the client.');
    }
    // A file's answer (releases, static pages) refused by its own headers.
    if (parserError.status === 416) {
      return sendError(res, 416, 'The Range asks for no byte of the file: each range must start within its size, and end no earlier than it starts.', [{ in: 'header', field: 'Range', message: 'is not satisfiable' }]);
    }
    if (parserError.status === 412) {
      const field = req.headers['if-match'] !== undefined ? 'If-Match' : 'If-Unmodified-Since';
      return sendError(res, 412, `The file does not meet the request's ${field}.`, [{ in: 'header', field, message: 'does not hold: the file has another version or time' }]);
    }
    // The router's own: a path segment that does not decode (`/cities/%ZZ/local-areas`).
    if (err instanceof URIError) {
      return sendError(res, 400, 'A path segment is not valid percent-encoding: a % must be followed by two hex digits (send % itself as %25).', [{ in: 'path', field: '(path)', message: 'is not valid percent-encoding' }]);
    }
    // zlib's own, raised while the body was decoded as its Content-Encoding said.
    const code = (err as { code?: unknown }).code;
    if (parserError.status === 400 && typeof code === 'string' && (code.startsWith('Z_') || code.startsWith('ERR__ERROR_'))) {
      return sendError(res, 400, `The request body is not what its Content-Encoding says (${String(req.headers['content-encoding']).slice(0, 40)}): it could not be decoded.`, [
        { in: 'header', field: 'Content-Encoding', message: 'does not match the body' },
      ]);
    }
    if (typeof parserError.status === 'number' && parserError.status >= 400 && parserError.status < 500) {
      return sendError(res, parserError.status, 'The request could not be read.');
    }
    log.error({ err, path }, 'unhandled error');
    sendError(res, 500, 'Internal error; it has been logged.');
  };
}
