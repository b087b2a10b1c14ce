// /health (liveness), /ready (reports can be accepted now: readiness.ts). /metrics is served on
// a port of its own (metricsEndpoint.ts).
import { Router } from 'express';
import type { Config } from '../shared/config.js';
import { Readiness, type ReadinessDeps } from './readiness.js';
import { RETRY_AFTER_SECONDS, sendError } from './errorHandler.js';
import { readQuery, throwIfAny } from './query.js';

/** What /ready checks: the store, the queue, the ledger's writes, the boundaries; within the acceptance deadline. */
export interface OperationsDeps extends Pick<ReadinessDeps, 'store' | 'queue' | 'ledger' | 'boundaries' | 'log'> {
  config: Pick<Config, 'acceptDeadlineMs'>;
}

export function operationsRouter(rt: OperationsDeps): Router {
  const router = Router();
  router.get('/health', (req, res) => {
    throwIfAny(readQuery(req, []).details);
    res.set('Cache-Control', 'no-store').json({ status: 'ok' });
  });

  const readiness = new Readiness({ store: rt.store, queue: rt.queue, ledger: rt.ledger, boundaries: rt.boundaries, log: rt.log, deadlineMs: rt.config.acceptDeadlineMs });
  router.get('/ready', async (req, res) => {
    throwIfAny(readQuery(req, []).details);
    const { ready, checks } = await readiness.check();
    res.set('Cache-Control', 'no-store');
    if (ready) {
      res.json({ status: 'ready', checks: { storage: 'ok', queue: 'ok', boundaries: checks.boundaries.ok ? checks.boundaries.detail : undefined, writes: 'ok' } });
      return;
    }
    const failing = Object.values(checks).flatMap((c) => (c.ok ? [] : [c.problem]));
    sendError(res, 503, `Not ready: ${failing.join(', ')}.`, [], { 'Retry-After': String(RETRY_AFTER_SECONDS) });
  });

  return router;
}
