// POST /feeds/partner: authenticate, rate-limit, validate, accept durably, enqueue.
import express, { Router, type RequestHandler } from 'express';
import { HttpError } from '../errors.js';
import type { Intake } from '../ingest/intake.js';
import type { Metrics } from '../metrics.js';
import { InvalidReportError, parsePartnerReport } from '../reports/partnerReport.js';
import { requireApiKey } from './auth.js';

export const MAX_BODY_BYTES = 64 * 1024;

export interface FeedsDeps {
  intake: Intake;
  metrics: Metrics;
  apiKeys: readonly string[];
  /** Runs after authentication, so limits are per API key. */
  rateLimit: RequestHandler;
}

export function feedsRouter(deps: FeedsDeps): Router {
  const router = Router();
  const parseJson = express.json({ limit: MAX_BODY_BYTES, strict: false, type: () => true });
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
      const result = await deps.intake.accept(report);
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
