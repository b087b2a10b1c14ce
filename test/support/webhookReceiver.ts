// A webhook receiver on loopback for the tests: records every POST, answers as told.
import { createHmac, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import type { AddressInfo } from 'node:net';
import { addSubscription } from '../../src/events/manage.js';
import { eventually, pkeyOf, postReport, report, type TestService } from './env.js';

export interface Received {
  headers: http.IncomingHttpHeaders;
  body: string;
  at: number;
}

export interface Receiver {
  url: string;
  received: Received[];
  /** How the next request is answered (status, and an optional delay or promise to wait for before answering); `body` is what it sent. */
  answer: (req: http.IncomingMessage, n: number, body: string) => { status: number; delayMs?: number; until?: Promise<unknown>; headers?: Record<string, string> };
  close(): Promise<void>;
}

/** A receiver closed by the test's cleanups (run after each test). */
export async function receiverClosedBy(cleanups: (() => Promise<unknown>)[]): Promise<Receiver> {
  const r = await startReceiver();
  cleanups.push(() => r.close());
  return r;
}

export async function startReceiver(path = '/hook'): Promise<Receiver> {
  const received: Received[] = [];
  const sockets = new Set<import('node:net').Socket>();
  const receiver: Receiver = {
    url: '',
    received,
    answer: () => ({ status: 204 }),
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
  let n = 0;
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      const a = receiver.answer(req, n++, body);
      received.push({ headers: req.headers, body, at: Date.now() });
      const reply = () => {
        if (res.destroyed) return;
        res.writeHead(a.status, a.headers ?? {});
        res.end();
      };
      if (a.until) void a.until.then(reply, reply);
      else if (a.delayMs) setTimeout(reply, a.delayMs).unref();
      else reply();
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`;
  return receiver;
}

type Verifier = (rawBody: string, headers: http.IncomingHttpHeaders, secret: string, toleranceSeconds?: number) => boolean;

/** The verification docs/http.md gives receivers (HMAC-SHA256 of "<timestamp>.<body>"), run as written there. */
export const documentedVerifier: Verifier = (() => {
  const doc = fs.readFileSync(fileURLToPath(new URL('../../docs/http.md', import.meta.url)), 'utf8');
  const block = [...doc.matchAll(/```js\n([\s\S]*?)\n\s*```/g)].map((m) => m[1]!).find((code) => code.includes('function verified('));
  if (!block) throw new Error('docs/http.md has no verified() example');
  const code = block.replace(/^\s*import .*$/m, '');
  return new Function('createHmac', 'timingSafeEqual', `${code}\nreturn verified;`)(createHmac, timingSafeEqual) as Verifier;
})();

/** A delivery signed with `secret`, checked as docs/http.md shows (within an hour of its sending). */
export function verifies(r: Pick<Received, 'headers' | 'body'>, secret: string): boolean {
  return documentedVerifier(r.body, r.headers, secret, 3600);
}

/** The pkeys of a CloudEvent body's features. */
export function pkeysOf(body: string): string[] {
  const event = JSON.parse(body) as { data: { features: { properties: { pkey: string } }[] } };
  return event.data.features.map((f) => f.properties.pkey);
}

/** Every pkey delivered to `r`, by the distinct event ids (webhook-id) that carried it. */
export function deliveredByPkey(r: Pick<Receiver, 'received'>): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const got of r.received) {
    if (got.headers['webhook-id'] === undefined || !got.body) continue;
    const id = String(got.headers['webhook-id']);
    for (const pkey of pkeysOf(got.body)) {
      const ids = out.get(pkey) ?? new Set<string>();
      ids.add(id);
      out.set(pkey, ids);
    }
  }
  return out;
}

/**
 * Twenty subscriptions to `dead`, an endpoint that never answers, are sent a Pampanga report
 * first, and hang; then a Quezon City one is posted for a subscription to `live`. Resolves once
 * `live` has it, within `ms` (well inside the webhook timeout), or fails.
 */
export async function sentBesideHanging(svc: TestService, dead: Receiver, live: Receiver, secret: string, ms: number): Promise<void> {
  dead.answer = () => ({ status: 204, until: new Promise(() => undefined) });
  for (let i = 0; i < 20; i++) await addSubscription(svc.rt, { url: `${dead.url}?n=${i}`, secret, admins: ['PH-PG'], localAreas: [], events: ['archived'] });
  await addSubscription(svc.rt, { url: live.url, secret, admins: ['PH-QC'], localAreas: [], events: ['archived'] });
  await postReport(svc.url, report(30, { partner_city: 'Pampanga', location: { lat: 15.0286, lng: 120.6898 } }));
  await eventually(async () => (dead.received.length >= 16 ? true : undefined), ms, 'the hanging sends');
  // Sent while they hang, not after the webhook timeout (the dead ones' sends still waiting came first).
  await postReport(svc.url, report(31));
  await eventually(async () => (deliveredByPkey(live).has(pkeyOf(31)) ? true : undefined), ms, "the live subscription's report");
}
