// X-Api-Key check: 401 when missing, 403 when unknown or revoked. Keys from API_KEYS are
// compared as SHA-256 digests in constant time, against every key, so timing reveals nothing;
// any other key is looked up by its digest in the ledger on every request, so a revocation
// counts at once on every API process. The accepted key's name is kept on the response (for the
// handlers and the request's log line); the key itself never leaves this function. Failures are
// counted per client address, and an address past its limit is refused before its key is looked
// up, unless the key is one this process knows good: one of API_KEYS, or a kept key that has
// authenticated here before (it is still looked up, so a revocation counts). So a client guessing
// keys costs no ledger reads, and partners behind the same address (a NAT, a load balancer
// without TRUST_PROXY) are not shut out by it.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import type { ApiKey } from '../partners/apiKeys.js';
import { HttpError } from '../shared/errors.js';
import type { KeyLedger } from '../ledger/ledger.js';
import type { AuthFailureLimiter } from './authFailures.js';
import { givenTwice } from './headers.js';

/** Who failed to authenticate too often: the limiter, and the key of a request's client. */
export interface AuthFailureGuard {
  limiter: AuthFailureLimiter;
  clientOf: (req: IncomingMessage) => string;
}

export type KeyLookup = Pick<KeyLedger, 'keyByDigest'>;

/** Kept keys remembered as having authenticated, at most (the least recently used go first). */
const VOUCHED_KEYS = 10_000;

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
  /** Digests (hex) of kept keys that authenticated in this process, least recently used first. */
  const vouched = new Set<string>();
  const configuredName = (digest: Buffer): string | undefined => {
    let name: string | undefined;
    for (const k of configured) if (timingSafeEqual(k.digest, digest)) name ??= k.name;
    return name;
  };
  /** The name of the key `digest` is of: one of API_KEYS, or a kept one (401, 403 thrown). */
  const identify = async (digest: Buffer | undefined, client: string): Promise<string> => {
    if (digest === undefined) {
      guard.limiter.check(client);
      throw new HttpError(401, 'An API key is required in the X-Api-Key header.', [
        { in: 'header', field: 'X-Api-Key', message: 'is required' },
      ]);
    }
    let name = configuredName(digest);
    if (name === undefined) {
      const hex = digest.toString('hex');
      if (!vouched.has(hex)) guard.limiter.check(client);
      const kept = await ledger.keyByDigest(hex);
      vouched.delete(hex);
      if (kept?.revoked_at) {
        throw new HttpError(403, 'The API key was revoked.', [{ in: 'header', field: 'X-Api-Key', message: 'was revoked' }]);
      }
      name = kept?.name;
      if (name !== undefined) {
        vouched.add(hex);
        if (vouched.size > VOUCHED_KEYS) vouched.delete(vouched.values().next().value!);
      }
    }
    if (name === undefined) {
      throw new HttpError(403, 'The API key is not recognised.', [{ in: 'header', field: 'X-Api-Key', message: 'is not a valid key' }]);
    }
    return name;
  };
  return async (req, res) => {
    const client = guard.clientOf(req);
    // Node joins repeated headers into one value, which no key matches: a sender's mistake, not a wrong key.
    if (givenTwice(req, 'x-api-key')) {
      guard.limiter.check(client);
      throw new HttpError(400, 'Send one X-Api-Key header: this request has several.', [{ in: 'header', field: 'X-Api-Key', message: 'must be given once' }]);
    }
    const header = req.headers['x-api-key'];
    const presented = Array.isArray(header) ? header.join(', ') : header;
    const digest = presented === undefined || presented === '' ? undefined : createHash('sha256').update(presented).digest();
    try {
      (res as Authenticated)[PARTNER] = await identify(digest, client);
    } catch (err) {
      // A wrong key counts against the client; a lookup refused for the service's own state, or the 429 itself, does not.
      if (err instanceof HttpError && err.statusCode < 500 && err.statusCode !== 429) guard.limiter.fail(client);
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
