// The client's address on Node's own request, as Express's `req.ip` gives it with a numeric
// "trust proxy" (config.trustProxy): the address `hops` proxies back along X-Forwarded-For.
// For POST /feeds/partner, which is served without Express (feedPost.ts), and for the limits
// that must agree with the Express routes' on who the client is.
import type { IncomingMessage } from 'node:http';
import { ipKeyGenerator } from 'express-rate-limit';

/** The client's address: the socket's, or the one `hops` trusted proxies report. */
export function clientAddress(req: IncomingMessage, hops: number): string {
  const socket = req.socket.remoteAddress ?? 'unknown';
  if (hops <= 0) return socket;
  const header = req.headers['x-forwarded-for'];
  const forwarded = (Array.isArray(header) ? header.join(',') : (header ?? ''))
    .split(',')
    .map((a) => a.trim())
    .filter((a) => a !== '');
  // Nearest first: the socket, then the header from its end.
  const chain = [socket, ...forwarded.reverse()];
  return chain[Math.min(hops, chain.length - 1)]!;
}

/** The key a per-client limit counts under: the address, an IPv6 one by its /56 (one subscriber's). */
export function clientKey(req: IncomingMessage, hops: number): string {
  return ipKeyGenerator(clientAddress(req, hops));
}
