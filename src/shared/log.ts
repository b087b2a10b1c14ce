import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger };

/** Request headers that carry credentials: never written to a log. */
const SECRET_HEADERS = ['req.headers["x-api-key"]', 'req.headers.authorization', 'req.headers.cookie'];

export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = { level, base: undefined, timestamp: pino.stdTimeFunctions.isoTime, redact: { paths: SECRET_HEADERS, censor: '[redacted]' } };
  return destination ? pino(options, destination) : pino(options);
}

/**
 * The long-running roles' logger: lines go to stdout through an asynchronous buffer, so under
 * load many lines leave in one write instead of one blocking write each (the biggest cost of a
 * post after the JSON itself). pino flushes what is buffered when the process exits; a kill -9
 * loses at most the lines of the last write in flight.
 */
export function createServiceLogger(level: string): Logger {
  return createLogger(level, serviceOutput());
}

/**
 * A one-shot command's logger: lines go to stderr, so what the command prints on stdout (its
 * `--json` result above all) is its answer alone.
 */
export function createCommandLogger(level: string): Logger {
  return createLogger(level, pino.destination({ dest: 2, sync: true }));
}

let output: DestinationStream | undefined;
/** The process's one buffer to stdout, shared by its service loggers. */
function serviceOutput(): DestinationStream {
  return (output ??= pino.destination({ dest: 1, sync: false }));
}

/**
 * Writes log lines made on another thread (the worker thread of `all`) through this thread's
 * buffer: two threads writing to one pipe could split each other's lines (a write to a pipe
 * is whole only up to 4 KiB, and a buffer under load is larger).
 */
export function writeLogLines(lines: string): void {
  serviceOutput().write(lines);
}
