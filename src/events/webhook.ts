// One webhook POST: a CloudEvents 1.0 structured-mode JSON body, signed with HMAC-SHA256 over
// "<timestamp>.<body>" (README "Webhooks" shows how to verify). Redirects are never followed
// (node:http does not), and every address the host resolves to passes the host policy first.
import { createHmac } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { SERVICE_VERSION } from '../shared/version.js';
import type { HostPolicy } from './hostPolicy.js';

export const SIGNATURE_HEADER = 'Webhook-Signature';
export const TIMESTAMP_HEADER = 'Webhook-Timestamp';
export const ID_HEADER = 'Webhook-Id';
export const CONTENT_TYPE = 'application/cloudevents+json; charset=utf-8';
export const EVENT_SOURCE = '/reports';

/** The structured-mode CloudEvent; `featuresJson` is a JSON array of GeoJSON Features, spliced in as is. */
export function cloudEventBody(event: { id: string; type: string; timeMs: number }, featuresJson: string): string {
  const head = JSON.stringify({
    specversion: '1.0',
    id: event.id,
    source: EVENT_SOURCE,
    type: event.type,
    time: new Date(event.timeMs).toISOString(),
    datacontenttype: 'application/geo+json',
  });
  return `${head.slice(0, -1)},"data":{"type":"FeatureCollection","features":${featuresJson}}}`;
}

/** `v1=<hex>`: HMAC-SHA256 of `${timestamp}.${body}` keyed with the subscription's secret. */
export function signature(secret: string, timestamp: string, body: string): string {
  return `v1=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

export interface Attempt {
  ok: boolean;
  status?: number;
  error?: string;
  ms: number;
}

/** Sends one body; resolves (never rejects) with what happened. */
export function post(url: string, body: string, headers: Record<string, string>, policy: HostPolicy, timeoutMs: number): Promise<Attempt> {
  const started = Date.now();
  return new Promise((resolve) => {
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      resolve({ ok: false, error: 'invalid URL', ms: 0 });
      return;
    }
    const why = policy.refuseUrl(url);
    if (why) {
      resolve({ ok: false, error: `refused: the URL ${why}`, ms: 0 });
      return;
    }
    const client = target.protocol === 'https:' ? https : http;
    const done = (a: Omit<Attempt, 'ms'>) => resolve({ ...a, ms: Date.now() - started });
    const req = client.request(
      target,
      {
        method: 'POST',
        agent: false,
        lookup: policy.lookupGuard(target.hostname),
        signal: AbortSignal.timeout(timeoutMs),
        headers: { ...headers, 'Content-Length': String(Buffer.byteLength(body)), 'User-Agent': `flood-archive-webhooks/${SERVICE_VERSION}` },
      },
      (res) => {
        const status = res.statusCode ?? 0;
        // The answer's body is not ours to keep: read a little, then let it go.
        let seen = 0;
        res.on('data', (chunk: Buffer) => {
          seen += chunk.length;
          if (seen > 65_536) res.destroy();
        });
        res.on('close', () => {
          if (status >= 200 && status < 300) done({ ok: true, status });
          else if (status >= 300 && status < 400) done({ ok: false, status, error: `answered ${status} (redirects are not followed)` });
          else done({ ok: false, status, error: `answered ${status}` });
        });
        res.on('error', () => undefined);
      },
    );
    req.on('error', (err: Error & { code?: string }) => {
      done({ ok: false, error: err.name === 'AbortError' || err.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : err.message });
    });
    req.end(body);
  });
}

/** Signed headers for a body sent now. */
export function signedHeaders(id: string, secret: string, body: string, nowMs = Date.now()): Record<string, string> {
  const timestamp = String(Math.floor(nowMs / 1000));
  return {
    'Content-Type': CONTENT_TYPE,
    [ID_HEADER]: id,
    [TIMESTAMP_HEADER]: timestamp,
    [SIGNATURE_HEADER]: signature(secret, timestamp, body),
  };
}
