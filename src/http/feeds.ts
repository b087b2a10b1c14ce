// DELETE /feeds/partner/{post_id}: the partner that posted a report retracts it, durably.
// (POST /feeds/partner is served apart from Express: feedPost.ts.)
import type { RequestHandler } from 'express';
import { HttpError } from '../shared/errors.js';
import type { Metrics } from '../shared/metrics.js';
import type { ApiKey } from '../partners/apiKeys.js';
import { postIdOf } from '../partners/partnerReport.js';
import type { KeyLedger, ReportLookup, RetractionLedger } from '../ledger/ledger.js';
import { SOURCE } from '../store/layout.js';
import { partnerOf, requireApiKey, type AuthFailureGuard } from './auth.js';
import { handlerSet, type Handlers } from './route.js';
import { readQuery, throwIfAny } from './query.js';

export interface FeedsDeps {
  metrics: Metrics;
  apiKeys: readonly ApiKey[];
  /** Kept keys (looked up per request), the partner's reports, and their retraction. */
  ledger: Pick<KeyLedger, 'keyByDigest'> & Pick<ReportLookup, 'get'> & Pick<RetractionLedger, 'retract'>;
  /** Runs after authentication, so limits are per API key. */
  rateLimit: RequestHandler;
  /** Failed authentications per client address, shared with the feed's posts. */
  authFailures: AuthFailureGuard;
}

export function feedsHandlers(deps: FeedsDeps): Handlers {
  const { handlers, serve } = handlerSet<'retractPartnerReport'>();
  const auth = requireApiKey(deps.apiKeys, deps.ledger, deps.authFailures);
  serve('retractPartnerReport', auth, deps.rateLimit, async (req, res) => {
    throwIfAny(readQuery(req, []).details);
    const postId = postIdOf(String(req.params.postId));
    if (postId === undefined) {
      throw new HttpError(400, 'The post_id in the path must be a non-negative integer.', [{ in: 'path', field: 'post_id', message: `must be an integer from 0 to ${Number.MAX_SAFE_INTEGER}` }]);
    }
    const partner = partnerOf(res);
    // The post_id is this partner's own: another partner's report of the same post_id is not
    // found here (404, as for an unknown one: nothing says another partner used it).
    const record = await deps.ledger.get({ source: SOURCE, partner, post_id: postId });
    if (!record) throw new HttpError(404, `This partner posted no report with post_id ${postId}.`, [{ in: 'path', field: 'post_id', message: 'is unknown' }]);
    const { pkey } = record;
    const result = await deps.ledger.retract(pkey, partner, 'withdrawn by the partner');
    if (!result.found) throw new HttpError(404, `This partner posted no report with post_id ${postId}.`);
    if (result.first) {
      deps.metrics.partnerReports.inc({ partner, outcome: 'retracted' });
      req.log.info({ pkey, partner }, 'report retracted');
    }
    res.status(200).json({ post_id: postId, pkey, retracted: true, retracted_at: result.retraction.retracted_at });
  });
  return handlers;
}
