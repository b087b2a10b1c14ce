// ETags for answers built whole in memory and sent with res.send (counts, extents, one report,
// the CAP documents, the release listing): a strong tag from the bytes sent, so a client that
// revalidates gets 304 for the same bytes and the new body otherwise (a count's watermark or the
// CAP feed's time moves on: a new body). Answers that stream (archive windows) and those that
// name their own ETag (cities, closed windows, release files, the OGC documents and items) are
// left as they are; `no-store` answers (syncs, health) carry none.
import { createHash } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { ifNoneMatch } from './encoding.js';

/**
 * Cache-Control of an answer that may hold a report's personal fields and carries an ETag: stored
 * by caches, and revalidated before each use (a 304 while it stands), so a retraction leaves it at
 * once, as the ETag changes with it. A max-age would let a shared cache serve the report after.
 */
export const REVALIDATE = 'public, no-cache';

/** The opaque part of an ETag for these pieces (bytes, or what a representation is made of). */
export function digestOf(...pieces: readonly (string | Buffer)[]): string {
  const hash = createHash('sha1');
  for (const piece of pieces) hash.update(piece);
  return hash.digest('base64url');
}

/** A strong ETag of these bytes. */
export function tagOf(body: string | Buffer): string {
  return `"${digestOf(body)}"`;
}

/**
 * Gives each 200 answer of a GET or HEAD sent with `res.send` (and so `res.json`) its body's
 * ETag, unless it has one or may not be stored; a 304 (no body) when If-None-Match names it.
 */
export function tagBodies(req: Request, res: Response, next: NextFunction): void {
  if (req.method !== 'GET' && req.method !== 'HEAD') return next();
  const send = res.send.bind(res);
  res.send = (body?: unknown) => {
    const cacheable = !/no-store/i.test(String(res.get('Cache-Control') ?? ''));
    if (res.statusCode === 200 && cacheable && res.get('ETag') === undefined && (typeof body === 'string' || Buffer.isBuffer(body))) {
      const etag = tagOf(body);
      res.set('ETag', etag);
      // Judged here, not by Express's freshness check, which a request's `Cache-Control: no-cache`
      // (as fetch() sends with If-None-Match) turns into a full answer.
      if (ifNoneMatch(req.get('if-none-match'), etag)) res.status(304);
    }
    return send(body);
  };
  next();
}
