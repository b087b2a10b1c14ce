// X-Api-Key check: 401 when missing, 403 when unknown or revoked. Keys from API_KEYS are
// compared as SHA-256 digests in constant time, against every key, so timing reveals nothing;
// any other key is looked up by its digest in the ledger on every request, so a revocation
// counts at once on every API process. The accepted key's name goes to res.locals.partner
// (and from there to the request's log line); the key itself never leaves this function.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { RequestHandler, Response } from 'express';
import type { ApiKey } from '../apiKeys.js';
import { HttpError } from '../errors.js';
import type { IngestLedger } from '../ledger/ledger.js';

export type KeyLookup = Pick<IngestLedger, 'keyByDigest'>;

/** The name of the key that authenticated the request. */
export function partnerOf(res: Response): string {
  return (res.locals as { partner: string }).partner;
}

export function requireApiKey(keys: readonly ApiKey[], ledger: KeyLookup): RequestHandler {
  const configured = keys.map((k) => ({ name: k.name, digest: createHash('sha256').update(k.key).digest() }));
  return async (req, res, next) => {
    const presented = req.get('x-api-key');
    if (presented === undefined || presented === '') {
      throw new HttpError(401, 'An API key is required in the X-Api-Key header.', [
        { in: 'header', field: 'X-Api-Key', message: 'is required' },
      ]);
    }
    const digest = createHash('sha256').update(presented).digest();
    let name: string | undefined;
    for (const k of configured) if (timingSafeEqual(k.digest, digest)) name ??= k.name;
    if (name === undefined) {
      const kept = await ledger.keyByDigest(digest.toString('hex'));
      if (kept?.revoked_at) {
        throw new HttpError(403, 'The API key was revoked.', [{ in: 'header', field: 'X-Api-Key', message: 'was revoked' }]);
      }
      name = kept?.name;
    }
    if (name === undefined) {
      throw new HttpError(403, 'The API key is not recognised.', [{ in: 'header', field: 'X-Api-Key', message: 'is not a valid key' }]);
    }
    // The access log line takes it from here (app.ts).
    res.locals.partner = name;
    next();
  };
}
