// The signature check docs/http.md gives receivers, run as written there, against the headers
// the service signs with: it accepts a delivery and refuses every forgery without throwing (a
// receiver that copies it must not answer 500 to a crafted header).
import { describe, expect, it } from 'vitest';
import { signedHeaders } from '../../src/events/webhook.js';
import { documentedVerifier } from '../support/webhookReceiver.js';

const SECRET = 'a-webhook-secret-of-thirty-two-chars';
const BODY = '{"specversion":"1.0","id":"evt_1","data":{"type":"FeatureCollection","features":[]}}';

/** The headers as a receiver's Node sees them: lower-case names. */
function received(headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
}

describe("the receiver's signature check of docs/http.md", () => {
  it('accepts what the service signed, and refuses another body, secret or an old timestamp', () => {
    const headers = received(signedHeaders('evt_1', SECRET, BODY));
    expect(documentedVerifier(BODY, headers, SECRET)).toBe(true);
    expect(documentedVerifier(BODY.replace('evt_1', 'evt_2'), headers, SECRET)).toBe(false);
    expect(documentedVerifier(BODY, headers, 'another-secret-of-thirty-two-chars!')).toBe(false);
    const old = received(signedHeaders('evt_1', SECRET, BODY, Date.now() - 3_600_000));
    expect(documentedVerifier(BODY, old, SECRET)).toBe(false);
  });

  it('refuses, without throwing, a signature as long in characters but not in bytes, and a missing or odd timestamp', () => {
    const headers = received(signedHeaders('evt_1', SECRET, BODY));
    const sig = headers['webhook-signature']!;
    // Node reads header bytes as latin1: "é" is one character, two bytes in UTF-8.
    expect(documentedVerifier(BODY, { ...headers, 'webhook-signature': `${sig.slice(0, -1)}é` }, SECRET)).toBe(false);
    const { 'webhook-timestamp': _ts, ...noTimestamp } = headers;
    expect(documentedVerifier(BODY, noTimestamp, SECRET)).toBe(false);
    expect(documentedVerifier(BODY, { ...headers, 'webhook-timestamp': `${headers['webhook-timestamp']}.0` }, SECRET)).toBe(false);
    expect(documentedVerifier(BODY, { ...headers, 'webhook-signature': '' }, SECRET)).toBe(false);
  });
});
