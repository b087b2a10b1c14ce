// A client that stops reading its answer: once the answer has waited `ms` for the client to take
// any of its bytes (its buffers full, and none of its writes completed meanwhile), the connection
// is closed, so a stalled client cannot keep what its answer holds (a turn of the archive's
// admission, a query, a descriptor) for ever. A client that reads, however slowly, and an answer
// that is slow to make are left alone: the clock runs only while the answer waits on the client,
// and each write the client takes in starts it again.
import type http from 'node:http';

type WriteCallback = (err?: Error | null) => void;

export function closeStalledSends(res: http.ServerResponse, ms: number): void {
  let timer: NodeJS.Timeout | undefined;
  const disarm = () => {
    clearTimeout(timer);
    timer = undefined;
  };
  /** Runs the clock while the answer's buffers are full; from the start again after any progress. */
  const watch = () => {
    disarm();
    if (res.destroyed || !res.writableNeedDrain) return;
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
