// Where a streamed answer's failure belongs. Before its first byte, a failure can still be an
// answer of its own (a 503 with Retry-After when the query engine is overloaded); after it, the
// answer can only be cut short, and that is the server's failure, never the client's hang-up:
// the response is marked so the access log and the error handler say so.
import type { ServerResponse } from 'node:http';
import { AnswerFailedError } from '../shared/errors.js';

const cutShort = new WeakSet<ServerResponse>();

/** Whether the server cut this answer short after its first byte (its own failure). */
export function isCutShort(res: ServerResponse): boolean {
  return cutShort.has(res);
}

/** Marks an answer the server cut short while its client was still there (a stored section that cannot be read, say). */
export function markCutShort(res: ServerResponse): void {
  cutShort.add(res);
}

/**
 * Reads the first `ahead` pieces of an answer before anything is sent (for the text formats,
 * the opening and the first reports: the first DuckDB query runs here), so what fails there
 * fails the request before its status line. Returns the answer whole; a later failure while
 * the client is still there (`hungUp` not aborted) marks `res` as cut short and becomes an
 * AnswerFailedError naming `request`.
 */
export async function startAnswer<T>(pieces: AsyncIterable<T>, res: ServerResponse, hungUp: AbortSignal, request: string, ahead = 2): Promise<AsyncIterable<T>> {
  const it = pieces[Symbol.asyncIterator]();
  const first: T[] = [];
  let done = false;
  while (!done && first.length < ahead) {
    const next = await it.next();
    if (next.done) done = true;
    else first.push(next.value);
  }
  return (async function* () {
    try {
      yield* first;
      for (let next = done ? undefined : await it.next(); next && !next.done; next = await it.next()) yield next.value;
    } catch (err) {
      if (hungUp.aborted) throw err;
      cutShort.add(res);
      throw new AnswerFailedError(request, { cause: err });
    } finally {
      // Stopped early (the client left): the answer's source stops too.
      await it.return?.();
    }
  })();
}
