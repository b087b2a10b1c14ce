// What a load balancer sees: /ready asked twice a second while a benchmark's load runs.
import http from 'node:http';

/** A GET read to its end: its status (or error code) and time. */
export function timedGet(base: string, path: string): Promise<{ status: number | string; ms: number }> {
  const started = performance.now();
  return new Promise((resolve) => {
    const req = http.get(new URL(path, base), { headers: { 'User-Agent': 'flood-bench/1.0' } }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode!, ms: performance.now() - started }));
      res.on('error', () => resolve({ status: 'cut short', ms: performance.now() - started }));
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ status: err.code ?? 'error', ms: performance.now() - started }));
  });
}

/** Asks `/ready` every half second until `untilMs`: its answers by status, and the slowest (ms). */
export async function probeReady(base: string, untilMs: number): Promise<{ ready: Record<string, number>; slowestMs: number }> {
  const ready: Record<string, number> = {};
  let slowestMs = 0;
  while (Date.now() < untilMs) {
    const got = await timedGet(base, '/ready');
    ready[String(got.status)] = (ready[String(got.status)] ?? 0) + 1;
    slowestMs = Math.max(slowestMs, got.ms);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  return { ready, slowestMs };
}
