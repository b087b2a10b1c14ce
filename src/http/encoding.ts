// Response compression, negotiated here rather than by a middleware so the
// strong ETag of each representation can name its encoding.
import type { Request, Response } from 'express';
import type { Transform } from 'node:stream';
import { promisify } from 'node:util';
import zlib from 'node:zlib';

export type Encoding = 'br' | 'gzip' | 'identity';

export function negotiateEncoding(req: Request, compressible: boolean): Encoding {
  if (!compressible) return 'identity';
  const chosen = req.acceptsEncodings(['br', 'gzip', 'identity']);
  return chosen === 'br' || chosen === 'gzip' ? chosen : 'identity';
}

/** A streaming encoder; brotli at a quality that keeps up with a year-long pull. */
export function encoder(encoding: Encoding): Transform | undefined {
  if (encoding === 'br') {
    return zlib.createBrotliCompress({
      params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 4, [zlib.constants.BROTLI_PARAM_MODE]: zlib.constants.BROTLI_MODE_TEXT },
    });
  }
  if (encoding === 'gzip') return zlib.createGzip({ level: 5 });
  return undefined;
}

/**
 * A body encoded once and served many times (at the encodings' best compression), on the thread
 * pool: brotli's best takes seconds on the national boundaries, which on the event loop would
 * stall every request meanwhile.
 */
export async function encodeOnce(body: string, encoding: Encoding): Promise<Buffer> {
  if (encoding === 'br') return brotliCompress(body, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 11 } });
  if (encoding === 'gzip') return gzip(body, { level: 9 });
  return Buffer.from(body);
}

/** A body built whole for one answer, encoded on the thread pool at the streaming encoder's levels. */
export async function encodeAnswer(body: string | Buffer, encoding: Exclude<Encoding, 'identity'>): Promise<Buffer> {
  if (encoding === 'br') return brotliCompress(body, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 4, [zlib.constants.BROTLI_PARAM_MODE]: zlib.constants.BROTLI_MODE_TEXT } });
  return gzip(body, { level: 5 });
}

/**
 * A static file, encoded once for the process's life, on the thread pool: near each encoding's
 * best, in the tens of milliseconds for a megabyte (brotli's best takes seconds, for a few percent).
 */
export async function encodeFile(bytes: Buffer, encoding: Exclude<Encoding, 'identity'>): Promise<Buffer> {
  if (encoding === 'br') return brotliCompress(bytes, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 9, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: bytes.length } });
  return gzip(bytes, { level: 9 });
}

const brotliCompress = promisify(zlib.brotliCompress);
const gzip = promisify(zlib.gzip);

/** The suffix an encoding gives a representation's ETag. */
export function encodingTag(encoding: Encoding): string {
  return encoding === 'identity' ? '' : `-${encoding === 'gzip' ? 'gz' : 'br'}`;
}

/** Sets Content-Encoding and Vary; returns the ETag suffix of the encoding. */
export function applyEncoding(res: Response, encoding: Encoding): string {
  res.vary('Accept-Encoding');
  if (encoding !== 'identity') res.set('Content-Encoding', encoding);
  return encodingTag(encoding);
}

/**
 * A 304 for a tag If-None-Match named: no body, and no Content-Encoding, which describes a body
 * (RFC 9110 15.4.5: a 304 carries no representation metadata but what guides caches).
 */
export function answerNotModified(res: Response): void {
  res.removeHeader('Content-Encoding');
  res.status(304).end();
}

export function ifNoneMatch(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  if (header.trim() === '*') return true;
  // Weak comparison (RFC 9110 13.1.2), as If-None-Match asks: W/ is no part of the tag.
  const opaque = etag.replace(/^W\//, '');
  return header.split(',').some((tag) => tag.trim().replace(/^W\//, '') === opaque);
}
