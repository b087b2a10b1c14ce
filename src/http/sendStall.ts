// A client that stops reading its answer: once the answer has waited `ms` for the client to take
// any of its bytes (its buffers full, and none of its writes completed meanwhile), the connection
// is closed, so a stalled client cannot keep what its answer holds (a turn of the archive's
// admission, a query, a descriptor) for ever. A client that reads, however slowly, and an answer
// that is slow to make are left alone: the clock runs only while the answer waits on the client,
// and each write the client takes in starts it again.
// The same clock tells how long an answer has waited on its client in all (clientWaitMs): the
// archive's admission cuts a reader slow while others wait only if its answer was waiting on it.
import type http from 'node:http';

type WriteCallback = (err?: Error | null) => void;

/** Each watched answer's time spent waiting on its client: finished waits, and the one under way. */
const waits = new WeakMap<http.ServerResponse, { doneMs: number; sinceMs: number | undefined }>();

/** How long, in all, `res` has waited for its client to take its bytes (0 for an answer not watched). */
export function clientWaitMs(res: http.ServerResponse): number {
  const wait = waits.get(res);
  if (!wait) return 0;
  return wait.doneMs + (wait.sinceMs === undefined ? 0 : performance.now() - wait.sinceMs);
}

export function closeStalledSends(res: http.ServerResponse, ms: number): void {
  let timer: NodeJS.Timeout | undefined;
  const wait = { doneMs: 0, sinceMs: undefined as number | undefined };
  waits.set(res, wait);
  const disarm = () => {
    clearTimeout(timer);
    timer = undefined;
    if (wait.sinceMs !== undefined) wait.doneMs += performance.now() - wait.sinceMs;
    wait.sinceMs = undefined;
  };
  /** Runs the clock while the answer's buffers are full; from the start again after any progress. */
  const watch = () => {
    disarm();
    if (res.destroyed || !res.writableNeedDrain) return;
    wait.sinceMs = performance.now();
    timer = setTimeout(() => res.destroy(), ms);
    timer.unref();
  };
  const write = res.write;
  res.write = function (this: http.ServerResponse, chunk: unknown, ...rest: unknown[]) {
    // The chunk's own callback (the last argument, when it is one) is called as before, once
    // the socket has taken the chunk: that is progress.
    const last = rest[rest.length - 1];
    const given = typeof last === 'function' ? (last as WriteCallback) : undefined;
    const args = given ? rest.slice(0, -1) : rest;
    const taken = (write as (...a: unknown[]) => boolean).call(this, chunk, ...args, (err?: Error | null) => {
      watch();
      given?.(err);
    });
    if (!taken && !timer) watch();
    return taken;
  } as typeof write;
  const end = res.end;
  res.end = function (this: http.ServerResponse, ...args: Parameters<typeof end>) {
    const out = end.apply(this, args);
    // The last bytes may still wait on the client: 'finish' once they are handed over.
    if (!timer) watch();
    return out;
  } as typeof end;
  res.on('drain', watch);
  res.once('finish', disarm);
  res.once('close', disarm);
}
