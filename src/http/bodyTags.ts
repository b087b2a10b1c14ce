// ETags and compression for answers built whole in memory and sent with res.send (counts,
// extents, one report, the CAP documents, the release listing, the OGC API definition): a strong
// tag from the bytes sent and the encoding, so a client that revalidates gets 304 for the same
// bytes and the new body otherwise (a count's watermark or the CAP feed's time moves on: a new
// body). Answers that stream (archive windows) and those that name their own ETag (cities, closed
// windows, release files, the OGC documents and items) encode themselves; `no-store` answers
// (syncs, health) carry none.
import { createHash } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { applyEncoding, encodeAnswer, ifNoneMatch, negotiateEncoding } from './encoding.js';

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

/** Bodies worth compressing: text of some size (below it, the encoding's own bytes outweigh what it saves). */
const COMPRESS_FROM_BYTES = 1024;
const TEXT_TYPES = /json|xml|text\/|javascript|css/i;

/**
 * Gives each 200 answer of a GET or HEAD sent with `res.send` (and so `res.json`) its body's
 * ETag, unless it has one or may not be stored, compressed when the client accepts it (the tag
 * naming the encoding, as every representation's does); a 304 (no body) when If-None-Match names
 * the tag.
 */
export function tagBodies(req: Request, res: Response, next: NextFunction): void {
  if (req.method !== 'GET' && req.method !== 'HEAD') return next();
  const send = res.send.bind(res);
  res.send = (body?: unknown) => {
    const cacheable = !/no-store/i.test(String(res.get('Cache-Control') ?? ''));
    if (res.statusCode !== 200 || !cacheable || res.get('ETag') !== undefined || (typeof body !== 'string' && !Buffer.isBuffer(body))) return send(body);
    const size = typeof body === 'string' ? Buffer.byteLength(body) : body.length;
    // An answer its handler encoded already (the OpenAPI document, encoded once) is sent as it
    // is, its tag from the bytes, which differ by encoding.
    const encoding = res.get('Content-Encoding') !== undefined ? undefined : negotiateEncoding(req, size >= COMPRESS_FROM_BYTES && TEXT_TYPES.test(String(res.get('Content-Type') ?? '')));
    const etag = `"${digestOf(body)}${encoding === undefined ? '' : applyEncoding(res, encoding)}"`;
    res.set('ETag', etag);
    // Judged here, not by Express's freshness check, which a request's `Cache-Control: no-cache`
    // (as fetch() sends with If-None-Match) turns into a full answer.
    if (ifNoneMatch(req.get('if-none-match'), etag)) {
      if (encoding !== undefined) res.removeHeader('Content-Encoding');
      res.status(304);
      return send(body);
    }
    if (encoding === undefined || encoding === 'identity') return send(body);
    void encodeAnswer(body, encoding)
      .then((encoded) => {
        // A client gone meanwhile is sent nothing.
        if (!res.destroyed && !res.writableEnded) send(encoded);
      })
      .catch((err: unknown) => res.destroy(err as Error));
    return res;
  };
  next();
}
