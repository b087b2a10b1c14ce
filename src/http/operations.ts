// /health (liveness), /ready (dependencies reachable, boundaries loaded), /metrics (Prometheus).
import { Router } from 'express';
import type { Runtime } from '../runtime.js';
import { sendError } from './errorHandler.js';

export function operationsRouter(rt: Runtime): Router {
  const router = Router();
  router.get('/health', (_req, res) => {
    res.set('Cache-Control', 'no-store').json({ status: 'ok' });
  });

  router.get('/ready', async (_req, res) => {
    const checks = await Promise.allSettled([rt.store.ping(), rt.queue.ping(), rt.boundaries.current()]);
    const [storage, queue, boundaries] = checks;
    res.set('Cache-Control', 'no-store');
    if (checks.every((c) => c.status === 'fulfilled')) {
      const version = (boundaries as PromiseFulfilledResult<Awaited<ReturnType<Runtime['boundaries']['current']>>>).value.version;
      res.json({ status: 'ready', checks: { storage: 'ok', queue: 'ok', boundaries: version } });
      return;
    }
    const failing = [
      storage.status === 'rejected' ? 'object store unreachable' : undefined,
      queue.status === 'rejected' ? 'queue unreachable' : undefined,
      boundaries.status === 'rejected' ? 'boundaries not loaded' : undefined,
    ].filter((m): m is string => m !== undefined);
    sendError(res, 503, `Not ready: ${failing.join(', ')}.`, [], { 'Retry-After': '5' });
  });

  router.get('/metrics', async (_req, res) => {
    try {
      const depth = await rt.queue.depth();
      rt.metrics.queueMessages.set({ state: 'visible' }, depth.visible);
      rt.metrics.queueMessages.set({ state: 'in_flight' }, depth.inFlight);
    } catch {
      // The queue being down is what /ready reports; metrics still answer.
    }
    res.set('Content-Type', rt.metrics.registry.contentType).send(await rt.metrics.registry.metrics());
  });
  return router;
}
