// What Node's parsed headers hide: it keeps the first of some repeated headers (Host) and joins
// others with ", " (X-Api-Key, Last-Event-ID), so a repetition is seen in the raw list alone.
import type { IncomingMessage } from 'node:http';

/** Whether the request carries the header `name` (lower case) more than once. */
export function givenTwice(req: IncomingMessage, name: string): boolean {
  let seen = 0;
  for (let i = 0; i < req.rawHeaders.length; i += 2) if (req.rawHeaders[i]!.toLowerCase() === name && ++seen > 1) return true;
  return false;
}
