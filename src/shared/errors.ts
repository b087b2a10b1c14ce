// Errors the service throws on purpose. The HTTP layer turns them into the
// error shape of the contract in one place (http/errorHandler.ts).

export interface ErrorDetail {
  in: 'body' | 'query' | 'header' | 'path';
  field: string;
  message: string;
}

const reasons: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  406: 'Not Acceptable',
  408: 'Request Timeout',
  409: 'Conflict',
  410: 'Gone',
  412: 'Precondition Failed',
  413: 'Payload Too Large',
  415: 'Unsupported Media Type',
  416: 'Range Not Satisfiable',
  417: 'Expectation Failed',
  431: 'Request Header Fields Too Large',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

export function reasonPhrase(status: number): string {
  return reasons[status] ?? 'Error';
}

export class HttpError extends Error {
  override name = 'HttpError';
  constructor(
    readonly statusCode: number,
    message: string,
    readonly details: ErrorDetail[] = [],
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export class BadRequestError extends HttpError {
  constructor(message: string, details: ErrorDetail[] = []) {
    super(400, message, details);
  }
}

/**
 * A dependency (object store or queue) could not be reached or refused the
 * request. Adapters throw this at their boundary so callers never see SDK errors.
 */
/** What failed: the object store, the embedded ledger, the queue, or the embedded event log (webhooks, the stream). */
export type Dependency = 'storage' | 'ledger' | 'queue' | 'events';

export class UnavailableError extends Error {
  override name = 'UnavailableError';
  constructor(
    readonly dependency: Dependency,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** A configured folder the process cannot make or use, and the setting that names it. */
export class FolderUnavailableError extends UnavailableError {
  constructor(
    dependency: Dependency,
    message: string,
    readonly setting: string,
    options?: { cause?: unknown },
  ) {
    super(dependency, message, options);
  }
}

/**
 * A database file written by a later release than this build: its tables may mean what this
 * build cannot know, so it is neither read nor written (a downgrade is not supported).
 */
export class NewerSchemaError extends UnavailableError {
  override name = 'NewerSchemaError';
}

/** What an unavailable dependency is, as a person names it. */
export function dependencyName(dependency: Dependency): 'ledger' | 'object store' | 'queue' | 'event log' {
  return dependency === 'storage' ? 'object store' : dependency === 'events' ? 'event log' : dependency;
}

/**
 * What the service needs has not been published yet: no boundary version, on a first start on
 * AWS before bootstrap (or the scheduler) seeds one. A 503 with Retry-After to a client.
 */
export class NotPublishedError extends Error {
  override name = 'NotPublishedError';
}

/**
 * The pointer to the current boundary version cannot be read, or is gone while versions are
 * stored: no version is served (neither a guess nor the default), and the message says how to
 * point at one again.
 */
export class BoundaryPointerError extends Error {
  override name = 'BoundaryPointerError';
}

/** A failure's short name for a message: the system's code (ECONNREFUSED) where it has one, else its name. */
export function failureName(err: unknown): string {
  const { code, name, $metadata } = (err ?? {}) as { code?: unknown; name?: unknown; $metadata?: { httpStatusCode?: unknown } };
  // The SDK names an error from its answer's body; a HEAD's answer has none ("Unknown"): its status says more.
  if (name === 'Unknown' && typeof $metadata?.httpStatusCode === 'number') return `HTTP ${$metadata.httpStatusCode}`;
  return typeof code === 'string' ? code : typeof name === 'string' ? name : 'Error';
}

/** Whether a failure, or one of the causes under it (five deep at most), passes `test`. */
function anyCause(err: unknown, test: (code: unknown, message: string) => boolean): boolean {
  for (let e = err, depth = 0; typeof e === 'object' && e !== null && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (test((e as { code?: unknown }).code, String((e as { message?: unknown }).message ?? ''))) return true;
  }
  return false;
}

/** Whether a failure, or one that caused it, is the process or the system out of file descriptors. */
export function isOutOfFiles(err: unknown): boolean {
  // DuckDB says so in its message alone ("IO Error: Cannot open file …: Too many open files").
  return anyCause(err, (code, message) => code === 'EMFILE' || code === 'ENFILE' || /Too many open files/.test(message));
}

/** Whether a failure, or one that caused it, is a full disk or a used-up quota (the system's codes, and SQLite's). */
export function isDiskFull(err: unknown): boolean {
  // DuckDB says so in its message alone ("IO Error: … No space left on device").
  return anyCause(err, (code, message) => code === 'ENOSPC' || code === 'EDQUOT' || code === 'SQLITE_FULL' || /No space left on device|Disk quota exceeded/.test(message));
}

/**
 * More work under way than the service can take on now (heavy answers at their cap, the query
 * engine out of memory or temporary space): a 503 with Retry-After; the same request is likely
 * to succeed shortly.
 */
export class OverloadedError extends Error {
  override name = 'OverloadedError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/**
 * An answer that failed on the server after its first byte was sent: it can only be cut short.
 * The server's fault, never the client's; `request` says which answer (path and query).
 */
export class AnswerFailedError extends Error {
  override name = 'AnswerFailedError';
  constructor(
    readonly request: string,
    options: { cause: unknown },
  ) {
    super(`the answer failed after its first byte: ${String((options.cause as Error)?.message ?? options.cause)}`, options);
  }
}
