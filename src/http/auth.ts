// X-Api-Key check: 401 when missing, 403 when unknown. Keys are compared as
// SHA-256 digests in constant time, against every key, so timing reveals nothing.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { RequestHandler } from 'express';
import { HttpError } from '../errors.js';

export function requireApiKey(keys: readonly string[]): RequestHandler {
  const digests = keys.map((k) => createHash('sha256').update(k).digest());
  return (req, _res, next) => {
    const presented = req.get('x-api-key');
    if (presented === undefined || presented === '') {
      throw new HttpError(401, 'An API key is required in the X-Api-Key header.', [
        { in: 'header', field: 'X-Api-Key', message: 'is required' },
      ]);
    }
    const digest = createHash('sha256').update(presented).digest();
    let ok = false;
    for (const d of digests) ok = timingSafeEqual(d, digest) || ok;
    if (!ok) {
      throw new HttpError(403, 'The API key is not recognised.', [{ in: 'header', field: 'X-Api-Key', message: 'is not a valid key' }]);
    }
    next();
  };
}
