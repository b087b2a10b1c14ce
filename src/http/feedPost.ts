// POST /feeds/partner: authenticate, rate-limit, validate, accept durably, answer. The busiest
// route by far, a direct route of the request layer (layer.ts): served on Node's own request and
// response rather than through Express, whose router, request/response prototypes and answer
// helpers cost more CPU per post than all of this (about 250 µs of 390 on the benchmark). The
// layer gives it the access log, metrics, query guard and error answers every route gets; the
// middleware it needs are Express-independent libraries (body-parser, express-rate-limit).
import type { IncomingMessage, ServerResponse } from 'node:http';
import express, { type RequestHandler } from 'express';
import { format as formatType, parse as parseType } from 'content-type';
import typeIs from 'type-is';
import type { ApiKey } from '../partners/apiKeys.js';
import { withDeadline } from '../shared/deadline.js';
import { BadRequestError, HttpError, UnavailableError } from '../shared/errors.js';
import type { Intake } from '../ingest/intake.js';
import type { KeyLedger, ReportLookup } from '../ledger/ledger.js';
import type { Logger } from '../shared/log.js';
import type { Metrics } from '../shared/metrics.js';
import type { PlaceNames } from '../boundaries/placeNames.js';
import { InvalidReportError, parsePartnerReport } from '../partners/partnerReport.js';
import { apiKeyCheck, partnerOf, type AuthFailureGuard, type KeyLookup } from './auth.js';
import { REQUEST_CODINGS, RETRY_AFTER_SECONDS, UNSUPPORTED_ENCODING } from './errorHandler.js';
import type { DirectHandler } from './route.js';
import { nameGivenTwice } from '../shared/jsonText.js';
import { invalidUtf8 } from './utf8.js';
import { refuseQuery } from './query.js';

export const MAX_BODY_BYTES = 64 * 1024;

export interface FeedPostDeps {
  intake: Intake;
  metrics: Metrics;
  apiKeys: readonly ApiKey[];
  /** Kept keys (looked up per request) and report states. */
  ledger: Pick<KeyLedger, 'keyByDigest'> & Pick<ReportLookup, 'lookup'>;
  /** Runs after authentication, so limits are per API key. */
  rateLimit: RequestHandler;
  /** Failed authentications per client address, checked before the key is. */
  authFailures: AuthFailureGuard;
  /** The current boundary version's place names, which partner_city must name. */
  placeNames: () => Promise<Pick<PlaceNames, 'resolve'>>;
  /** Longest an acceptance may take before the answer is 503 (a stalled store or queue). */
  acceptDeadlineMs: number;
  /** Acceptances under way, late ones included, beyond which a post is refused at once (a stalled store must not pile them up). */
  acceptMaxInFlight: number;
  log: Logger;
}

/** A post whose body arrived later than this after its key was checked has its key checked again. */
const RECHECK_AFTER_MS = 1_000;

/** The place names, or a 503 while no boundary version can be read (a first start on AWS waits for one). */
async function placeNamesOf(deps: FeedPostDeps): Promise<Pick<PlaceNames, 'resolve'>> {
  try {
    return await deps.placeNames();
  } catch (err) {
    // The store itself unreachable: answered as every outage is (errorHandler.ts).
    if (err instanceof UnavailableError) throw err;
    deps.log.warn({ err: String(err) }, 'no boundary version to check partner_city against');
    throw new HttpError(503, `The boundaries are not available yet; retry after ${RETRY_AFTER_SECONDS} seconds.`, [], { 'Retry-After': String(RETRY_AFTER_SECONDS) });
  }
}

type Middleware = (req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => void;
const noBody = () => new BadRequestError('The request has no body: send the report as JSON.', [{ in: 'body', field: '(body)', message: 'is required' }]);

const run = (middleware: Middleware, req: IncomingMessage, res: ServerResponse) =>
  new Promise<void>((resolve, reject) => middleware(req, res, (err?: unknown) => (err ? reject(err) : resolve())));

/** The handler of POST /feeds/partner on Node's request and response. */
export function feedPost(deps: FeedPostDeps): DirectHandler {
  let inFlight = 0;
  const admit = () => {
    if (inFlight >= deps.acceptMaxInFlight) {
      throw new HttpError(503, `Too many acceptances are under way (the object store or queue is slow); retry after ${RETRY_AFTER_SECONDS} seconds.`, [], {
        'Retry-After': String(RETRY_AFTER_SECONDS),
      });
    }
  };
  // A kept key is read from the ledger on every post (on AWS, from the store): those reads count
  // with the acceptances under way, so a stalled store cannot pile up posts behind them either.
  const keys: KeyLookup = {
    keyByDigest: async (digest) => {
      admit();
      inFlight += 1;
      try {
        return await deps.ledger.keyByDigest(digest);
      } finally {
        inFlight -= 1;
      }
    },
  };
  const authenticate = apiKeyCheck(deps.apiKeys, keys, deps.authFailures);
  const rateLimit = deps.rateLimit as unknown as Middleware;
  const parseJson = express.json({
    limit: MAX_BODY_BYTES,
    strict: false,
    type: () => true,
    // Before decoding: a decoder would turn invalid bytes into U+FFFD and store another report;
    // and a name given twice is read one way by JSON.parse and another by other readers.
    verify: (_req, _res, bytes) => {
      // A chunked body of no bytes: no body, as one of Content-Length 0 (not a list of the fields it lacks).
      if (bytes.length === 0) throw noBody();
      const problem = invalidUtf8(bytes) ?? nameGivenTwice(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'));
      if (problem) {
        deps.metrics.reports.inc({ outcome: 'rejected' });
        throw new InvalidReportError([problem]);
      }
    },
  }) as unknown as Middleware;

  const answer = (res: ServerResponse, status: number, body: object) => {
    const text = JSON.stringify(body);
    res.statusCode = status;
    res.setHeader('Content-Type', 'application/json; charset=utf-8');
    res.setHeader('Content-Length', Buffer.byteLength(text));
    res.end(text);
  };

  return async (req, res) => {
    await authenticate(req, res);
    const authenticatedAt = performance.now();
    await run(rateLimit, req, res);
    // A parameter here is a mistake (admin=, post_id=): the report is in the body alone.
    refuseQuery(req);
    // type-is finds no type in a request without a body, whatever its Content-Type says; an
    // empty one (Content-Length: 0, as `curl -d ''` sends) is none either.
    if (!typeIs.hasBody(req) || req.headers['content-length'] === '0') {
      throw noBody();
    }
    if (!typeIs(req, ['application/json', 'application/*+json'])) {
      throw new HttpError(415, 'The request body must be JSON (Content-Type: application/json).', [
        { in: 'header', field: 'Content-Type', message: 'must be application/json' },
      ]);
    }
    // UTF-8 only (RFC 8259 8.1): a body the parser would decode as UTF-16 is not what the
    // service checks and stores. The charset as the parser reads it (content-type's parse, quoted
    // parameters and all), not as a pattern would find it.
    const declared = parseType(req.headers['content-type'] ?? '');
    const charset = declared.parameters.charset?.toLowerCase();
    if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
      throw new HttpError(415, 'The request body must be JSON in UTF-8.', [{ in: 'header', field: 'Content-Type', message: `charset=${charset.slice(0, 40)} is not accepted: send UTF-8 (or no charset)` }]);
    }
    // A body declared larger than the limit is refused before any of it is read, and the
    // connection closed: one sent slowly would otherwise be read to its end first.
    if (Number(req.headers['content-length']) > MAX_BODY_BYTES) {
      throw new HttpError(413, 'The request body is larger than 64 KiB.', [{ in: 'header', field: 'Content-Length', message: `must be at most ${MAX_BODY_BYTES}` }], { Connection: 'close' });
    }
    // Only the codings the docs name, whatever the parser of this Node release would decode.
    const coding = (req.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
    if (!REQUEST_CODINGS.has(coding)) throw new HttpError(415, UNSUPPORTED_ENCODING.message, UNSUPPORTED_ENCODING.details);
    // `utf8` is UTF-8's other name, which the JSON parser would refuse (it takes `utf-*` only).
    // Its other parameters mean nothing to JSON (and some could not be written again).
    if (charset === 'utf8') req.headers['content-type'] = formatType({ type: declared.type, parameters: { charset: 'utf-8' } });
    await run(parseJson, req, res);
    // A body that took a while to arrive (sent slowly on purpose, say): its key is checked again,
    // as `keys revoke` may have returned meanwhile. A quick body is let through on the first check.
    if (performance.now() - authenticatedAt > RECHECK_AFTER_MS) await authenticate(req, res);
    let report;
    try {
      report = parsePartnerReport((req as IncomingMessage & { body?: unknown }).body, Date.now(), await placeNamesOf(deps));
    } catch (err) {
      if (err instanceof InvalidReportError) deps.metrics.reports.inc({ outcome: 'rejected' });
      throw err;
    }
    // The store and queue calls cannot be cancelled; past the deadline the partner gets a 503
    // and retries (an acceptance that completes meanwhile answers "already exists" then).
    admit();
    inFlight += 1;
    const partner = partnerOf(res);
    // A repeat's state (retracted or not) read within the same deadline and bound: on S3 it is
    // more round trips, and repeats are what partners send while the store is slow.
    const acceptance = deps.intake.accept(report, partner).then(async (accepted) => ({
      ...accepted,
      retraction: accepted.created ? undefined : (await deps.ledger.lookup(accepted.pkey))?.retraction,
    }));
    acceptance.then(
      () => (inFlight -= 1),
      () => (inFlight -= 1),
    );
    const result = await withDeadline(
      acceptance,
      deps.acceptDeadlineMs,
      () => {
        // The partner's 503 says why; ops see it too (the acceptance may still complete, and its retry then answers "already exists").
        deps.log.warn({ post_id: report.post_id, deadlineMs: deps.acceptDeadlineMs }, 'an acceptance passed its deadline: answered 503');
        return new HttpError(
          503,
          `The report could not be accepted within ${deps.acceptDeadlineMs / 1000} s (storage answered too slowly); it may still be accepted: send it again after ${RETRY_AFTER_SECONDS} seconds, and the repeat answers "already exists" if it was.`,
          [],
          { 'Retry-After': String(RETRY_AFTER_SECONDS) },
        );
      },
      (err) => deps.log.warn({ err: String(err), post_id: report.post_id }, 'an acceptance failed after its deadline'),
    );
    deps.metrics.reports.inc({ outcome: result.created ? 'accepted' : 'duplicate' });
    deps.metrics.partnerReports.inc({ partner, outcome: result.created ? 'accepted' : 'duplicate' });
    if (result.created) {
      answer(res, 201, { post_id: report.post_id, created: true, pkey: result.pkey });
      return;
    }
    // A retracted report never comes back: say so, or the partner would think it is live.
    const retraction = result.retraction;
    answer(res, 200, {
      post_id: report.post_id,
      created: false,
      pkey: result.pkey,
      ...(retraction
        ? { retracted: true, message: `post_id ${report.post_id} already exists and was retracted at ${retraction.retracted_at}; it is not archived again` }
        : { message: `post_id ${report.post_id} already exists` }),
    });
  };
}
