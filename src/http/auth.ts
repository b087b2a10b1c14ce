// X-Api-Key check: 401 when missing, 403 when unknown or revoked. Keys from API_KEYS are
// compared as SHA-256 digests in constant time, against every key, so timing reveals nothing;
// any other key is looked up by its digest in the ledger on every request, so a revocation
// counts at once on every API process. The accepted key's name is kept on the response (for the
// handlers and the request's log line); the key itself never leaves this function. Failures are
// counted per client address, and an address past its limit is refused before its key is read.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import type { ApiKey } from '../partners/apiKeys.js';
import { HttpError } from '../shared/errors.js';
import type { KeyLedger } from '../ledger/ledger.js';
import type { AuthFailureLimiter } from './authFailures.js';

/** Who failed to authenticate too often: the limiter, and the key of a request's client. */
export interface AuthFailureGuard {
  limiter: AuthFailureLimiter;
  clientOf: (req: IncomingMessage) => string;
}

export type KeyLookup = Pick<KeyLedger, 'keyByDigest'>;

const PARTNER = Symbol('partner');
type Authenticated = ServerResponse & { [PARTNER]?: string };

/** The name of the key that authenticated the request (after authentication). */
export function partnerOf(res: ServerResponse): string {
  return (res as Authenticated)[PARTNER]!;
}

/** The name of the key that authenticated the request, if one did. */
export function partnerIfAny(res: ServerResponse): string | undefined {
  return (res as Authenticated)[PARTNER];
}

/** Checks the request's key: 429, 401 or 403 (thrown), or its name kept for partnerOf(). */
export function apiKeyCheck(
  keys: readonly ApiKey[],
  ledger: KeyLookup,
  guard: AuthFailureGuard,
): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  const configured = keys.map((k) => ({ name: k.name, digest: createHash('sha256').update(k.key).digest() }));
  const identify = async (req: IncomingMessage): Promise<string> => {
    const header = req.headers['x-api-key'];
    const presented = Array.isArray(header) ? header.join(', ') : header;
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
    return name;
  };
  return async (req, res) => {
    const client = guard.clientOf(req);
    guard.limiter.check(client);
    // Node joins repeated headers into one value, which no key matches: a sender's mistake, not a wrong key.
    if (req.rawHeaders.filter((name, i) => i % 2 === 0 && name.toLowerCase() === 'x-api-key').length > 1) {
      throw new HttpError(400, 'Send one X-Api-Key header: this request has several.', [{ in: 'header', field: 'X-Api-Key', message: 'must be given once' }]);
    }
    try {
      (res as Authenticated)[PARTNER] = await identify(req);
    } catch (err) {
      // A wrong key counts against the client; a lookup refused for the service's own state does not.
      if (err instanceof HttpError && err.statusCode < 500) guard.limiter.fail(client);
      throw err;
    }
  };
}

/** apiKeyCheck as Express middleware. */
export function requireApiKey(keys: readonly ApiKey[], ledger: KeyLookup, guard: AuthFailureGuard): RequestHandler {
  const check = apiKeyCheck(keys, ledger, guard);
  return (req, res, next) => {
    check(req, res).then(() => next(), next);
  };
}
