// /metrics (Prometheus) on a port of its own (METRICS_PORT), apart from the public API: it names
// partners and their volumes, and each scrape asks the queue its depth. A load balancer in front
// of the API port never reaches it; Prometheus scrapes it where it is bound (METRICS_HOST).
import type { RequestListener } from 'node:http';
import type { Logger } from '../shared/log.js';
import type { Metrics } from '../shared/metrics.js';
import type { Queue } from '../queue/queue.js';
import { errorHandler, sendError } from './errorHandler.js';

export const METRICS_PATH = '/metrics';

/** What a scrape reads: the process's metrics, and the queue's depth at that moment. */
export interface MetricsListenerDeps {
  metrics: Pick<Metrics, 'queueMessages' | 'text' | 'registry'>;
  queue: Pick<Queue, 'depth'>;
  log: Logger;
}

export function metricsListener(rt: MetricsListenerDeps): RequestListener {
  const errorAnswer = errorHandler(rt.log);
  const scrape = async (): Promise<string> => {
    try {
      const depth = await rt.queue.depth();
      rt.metrics.queueMessages.set({ state: 'visible' }, depth.visible);
      rt.metrics.queueMessages.set({ state: 'in_flight' }, depth.inFlight);
    } catch {
      // The queue being down is what /ready reports; metrics still answer.
    }
    return rt.metrics.text();
  };
  return (req, res) => {
    const url = req.url ?? '/';
    const path = url.split('?')[0];
    if (path !== METRICS_PATH) {
      sendError(res, 404, `Only ${METRICS_PATH} is served on this port.`);
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      sendError(res, 405, `${METRICS_PATH} allows GET, HEAD only.`, [], { Allow: 'GET, HEAD' });
      return;
    }
    scrape().then(
      (text) => {
        res.setHeader('Content-Type', rt.metrics.registry.contentType);
        res.setHeader('Cache-Control', 'no-store');
        res.setHeader('Content-Length', Buffer.byteLength(text));
        res.end(req.method === 'HEAD' ? undefined : text);
      },
      (err: unknown) => errorAnswer(err, req, res),
    );
  };
}
