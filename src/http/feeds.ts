// POST /feeds/partner: authenticate, rate-limit, validate, accept durably, enqueue.
import express, { Router, type RequestHandler } from 'express';
import { HttpError } from '../errors.js';
import type { Intake } from '../ingest/intake.js';
import type { Metrics } from '../metrics.js';
import { InvalidReportError, parsePartnerReport } from '../reports/partnerReport.js';
import { withDeadline } from '../deadline.js';
import type { Logger } from '../log.js';
import { requireApiKey } from './auth.js';
import { invalidUtf8 } from './utf8.js';
import { RETRY_AFTER_SECONDS } from './errorHandler.js';

export const MAX_BODY_BYTES = 64 * 1024;

export interface FeedsDeps {
  intake: Intake;
  metrics: Metrics;
  apiKeys: readonly string[];
  /** Runs after authentication, so limits are per API key. */
  rateLimit: RequestHandler;
  /** Longest an acceptance may take before the answer is 503 (a stalled store or queue). */
  acceptDeadlineMs: number;
  /** Acceptances under way, late ones included, beyond which a post is refused at once (a stalled store must not pile them up). */
  acceptMaxInFlight: number;
  log: Logger;
}

export function feedsRouter(deps: FeedsDeps): Router {
  const router = Router();
  let inFlight = 0;
  const parseJson = express.json({
    limit: MAX_BODY_BYTES,
    strict: false,
    type: () => true,
    // Before decoding: a decoder would turn invalid bytes into U+FFFD and store another report.
    verify: (_req, _res, bytes) => {
      const problem = invalidUtf8(bytes);
      if (problem) {
        deps.metrics.reports.inc({ outcome: 'rejected' });
        throw new InvalidReportError([problem]);
      }
    },
  });
  router.post(
    '/feeds/partner',
    requireApiKey(deps.apiKeys),
    deps.rateLimit,
    (req, _res, next) => {
      if (!req.is(['application/json', 'application/*+json'])) {
        throw new HttpError(415, 'The request body must be JSON (Content-Type: application/json).', [
          { in: 'header', field: 'Content-Type', message: 'must be application/json' },
        ]);
      }
      next();
    },
    parseJson,
    async (req, res) => {
      let report;
      try {
        report = parsePartnerReport(req.body);
      } catch (err) {
        if (err instanceof InvalidReportError) deps.metrics.reports.inc({ outcome: 'rejected' });
        throw err;
      }
      // The store and queue calls cannot be cancelled; past the deadline the partner gets a 503
      // and retries (an acceptance that completes meanwhile answers "already exists" then).
      if (inFlight >= deps.acceptMaxInFlight) {
        throw new HttpError(503, `Too many acceptances are under way (the object store or queue is slow); retry after ${RETRY_AFTER_SECONDS} seconds.`, [], {
          'Retry-After': String(RETRY_AFTER_SECONDS),
        });
      }
      inFlight += 1;
      const acceptance = deps.intake.accept(report);
      acceptance.then(
        () => (inFlight -= 1),
        () => (inFlight -= 1),
      );
      const result = await withDeadline(
        acceptance,
        deps.acceptDeadlineMs,
        () => new HttpError(503, `The report could not be accepted within ${deps.acceptDeadlineMs / 1000} s (object store or queue not answering); retry after ${RETRY_AFTER_SECONDS} seconds.`, [], { 'Retry-After': String(RETRY_AFTER_SECONDS) }),
        (err) => deps.log.warn({ err: String(err), post_id: report.post_id }, 'an acceptance failed after its deadline'),
      );
      deps.metrics.reports.inc({ outcome: result.created ? 'accepted' : 'duplicate' });
      if (result.created) {
        res.status(201).json({ post_id: report.post_id, created: true, pkey: result.pkey });
      } else {
        res.status(200).json({ post_id: report.post_id, created: false, message: `post_id ${report.post_id} already exists` });
      }
    },
  );
  return router;
}
