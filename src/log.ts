import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger };

/** Request headers that carry credentials: never written to a log. */
const SECRET_HEADERS = ['req.headers["x-api-key"]', 'req.headers.authorization', 'req.headers.cookie'];

export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = { level, base: undefined, timestamp: pino.stdTimeFunctions.isoTime, redact: { paths: SECRET_HEADERS, censor: '[redacted]' } };
  return destination ? pino(options, destination) : pino(options);
}
