// CORS for the public reads: every answer but the feed's (for servers, not browsers) lets a page
// of any origin read it, its errors included, wherever they are answered (Express's routes, or
// the request layer's refusals before them); preflights where the route table asks for them.
import type { ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';

const EXPOSED = 'Link, ETag, Content-Disposition, Content-Range, Accept-Ranges, Retry-After, X-Request-Id, X-Archive-Watermark, RateLimit, RateLimit-Policy';

/** The CORS headers of a public read's answer. */
export const READ_CORS_HEADERS: Readonly<Record<string, string>> = { 'Access-Control-Allow-Origin': '*', 'Access-Control-Expose-Headers': EXPOSED };

/** Sets the CORS headers of an answer to a request for `path`, unless it is the feed's. */
export function allowReads(path: string, res: ServerResponse): void {
  if (/^\/feeds\//i.test(path)) return;
  for (const [name, value] of Object.entries(READ_CORS_HEADERS)) res.setHeader(name, value);
}

/** The headers of allowReads on every answer Express gives. */
export const cors: RequestHandler = (req, res, next) => {
  allowReads(req.path, res);
  next();
};

/** A CORS preflight of a public read (a route with `preflight` in the table) allowing `allow`, its Allow header's methods. */
export const preflightOf = (allow: string): RequestHandler => (_req, res) => {
  res.set({
    'Access-Control-Allow-Methods': allow,
    'Access-Control-Allow-Headers': 'If-None-Match, If-Range, Range, Accept, Accept-Encoding, Content-Type, X-Request-Id, Last-Event-ID',
    'Access-Control-Max-Age': '86400',
  });
  res.status(204).end();
};
