// POST /feeds/partner: authenticate, validate, accept durably, enqueue.
import express, { Router } from 'express';
import { HttpError } from '../errors.js';
import type { Intake } from '../ingest/intake.js';
import { parsePartnerReport } from '../reports/partnerReport.js';
import { requireApiKey } from './auth.js';

export const MAX_BODY_BYTES = 64 * 1024;

export function feedsRouter(deps: { intake: Intake; apiKeys: readonly string[] }): Router {
  const router = Router();
  const parseJson = express.json({ limit: MAX_BODY_BYTES, strict: false, type: () => true });
  router.post(
    '/feeds/partner',
    requireApiKey(deps.apiKeys),
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
      const report = parsePartnerReport(req.body);
      const result = await deps.intake.accept(report);
      if (result.created) {
        res.status(201).json({ post_id: report.post_id, created: true, pkey: result.pkey });
      } else {
        res.status(200).json({ post_id: report.post_id, created: false, message: `post_id ${report.post_id} already exists` });
      }
    },
  );
  return router;
}
