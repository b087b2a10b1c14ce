// A request's answer no longer wanted: the client closed the connection before it was complete.
import type { ServerResponse } from 'node:http';

/**
 * Aborts when the client closes the connection before its answer is complete: the window's
 * queries are interrupted and nothing more is read ahead, so a hung-up year pull frees its
 * memory and temporary files at once.
 */
export function hangUpSignal(res: ServerResponse): AbortSignal {
  const controller = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) controller.abort(new Error('the client closed the connection'));
  });
  return controller.signal;
}
