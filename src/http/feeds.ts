// POST /feeds/partner: authenticate, rate-limit, validate, accept durably, enqueue.
// DELETE /feeds/partner/{post_id}: the partner that posted a report retracts it, durably.
import express, { Router, type RequestHandler } from 'express';
import { HttpError } from '../errors.js';
import type { Intake } from '../ingest/intake.js';
import type { Metrics } from '../metrics.js';
import { InvalidReportError, parsePartnerReport } from '../reports/partnerReport.js';
import { withDeadline } from '../deadline.js';
import type { Logger } from '../log.js';
import type { ApiKey } from '../apiKeys.js';
import type { IngestLedger } from '../ledger/ledger.js';
import { pkeyOf, SOURCE } from '../reports/layout.js';
import { partnerOf, requireApiKey } from './auth.js';
import { invalidUtf8 } from './utf8.js';
import { RETRY_AFTER_SECONDS } from './errorHandler.js';

export const MAX_BODY_BYTES = 64 * 1024;

export interface FeedsDeps {
  intake: Intake;
  metrics: Metrics;
  apiKeys: readonly ApiKey[];
  /** Kept keys (looked up per request) and report states. */
  ledger: IngestLedger;
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
  const auth = requireApiKey(deps.apiKeys, deps.ledger);
  router.post(
    '/feeds/partner',
    auth,
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
      const acceptance = deps.intake.accept(report, partnerOf(res));
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
      deps.metrics.partnerReports.inc({ partner: partnerOf(res), outcome: result.created ? 'accepted' : 'duplicate' });
      if (result.created) {
        res.status(201).json({ post_id: report.post_id, created: true, pkey: result.pkey });
        return;
      }
      // A retracted report never comes back: say so, or the partner would think it is live.
      const retraction = (await deps.ledger.lookup(result.pkey))?.retraction;
      res.status(200).json({
        post_id: report.post_id,
        created: false,
        ...(retraction
          ? { retracted: true, message: `post_id ${report.post_id} already exists and was retracted at ${retraction.retracted_at}; it is not archived again` }
          : { message: `post_id ${report.post_id} already exists` }),
      });
    },
  );

  router.delete('/feeds/partner/:postId', auth, deps.rateLimit, async (req, res) => {
    const raw = String(req.params.postId);
    if (!/^(0|[1-9]\d{0,15})$/.test(raw) || !Number.isSafeInteger(Number(raw))) {
      throw new HttpError(400, 'The post_id in the path must be a non-negative integer.', [{ in: 'path', field: 'post_id', message: `must be an integer from 0 to ${Number.MAX_SAFE_INTEGER}` }]);
    }
    const postId = Number(raw);
    const pkey = pkeyOf(SOURCE, postId);
    const entry = await deps.ledger.lookup(pkey);
    if (!entry) throw new HttpError(404, `No report with post_id ${postId} was accepted.`, [{ in: 'path', field: 'post_id', message: 'is unknown' }]);
    const partner = partnerOf(res);
    if (entry.record.partner !== partner) {
      throw new HttpError(
        403,
        entry.record.partner === undefined
          ? `post_id ${postId} was accepted before keys had names; only the operators can retract it.`
          : `post_id ${postId} was posted with another partner's key; only that partner may retract it.`,
        [{ in: 'header', field: 'X-Api-Key', message: 'is not the key of the partner that posted this report' }],
      );
    }
    const result = await deps.ledger.retract(pkey, partner, 'withdrawn by the partner');
    if (!result.found) throw new HttpError(404, `No report with post_id ${postId} was accepted.`);
    if (result.first) {
      deps.metrics.partnerReports.inc({ partner, outcome: 'retracted' });
      req.log.info({ pkey, partner }, 'report retracted');
    }
    res.status(200).json({ post_id: postId, pkey, retracted: true, retracted_at: result.retraction.retracted_at });
  });
  return router;
}
