// What one client can cost the service on AWS, where each key lookup is an S3 GET and each
// readiness check S3 and SQS calls: failed authentications are limited per client address
// before any lookup (keys known good still get in), and a flood of /ready probes makes a bounded
// number of backend checks.
// The calls are counted on the SDK clients, as they leave for the (fauxqs) endpoint.
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_KEY, report, startTestService, testConfig, testRuntime, type TestService } from '../support/env.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { expectErrorShape } from '../faults/support.js';
import { keyDigest } from '../../src/partners/apiKeys.js';

const FAILURES_PER_MINUTE = 3;
let emulator: Emulator;
let svc: TestService;
/** S3 and SQS commands sent, by name ("GetObject ingest/api-keys/" for key lookups). */
const sent: string[] = [];

beforeAll(async () => {
  emulator = await startEmulator();
  for (const client of [emulator.s3, emulator.sqs] as { middlewareStack: { add: (...a: unknown[]) => void } }[]) {
    client.middlewareStack.add(
      (next: (args: unknown) => Promise<unknown>, context: { commandName: string }) => async (args: { input: { Key?: string } }) => {
        const name = context.commandName.replace(/Command$/, '');
        sent.push(args.input.Key?.includes('ingest/api-keys/') ? `${name} ingest/api-keys/` : name);
        return next(args);
      },
      { step: 'initialize', name: 'countCalls' },
    );
  }
  const config = await testConfig('aws', emulator, { TRUST_PROXY: '1', RATE_LIMIT_AUTH_FAILURES_PER_MINUTE: String(FAILURES_PER_MINUTE) });
  svc = await startTestService(await testRuntime(config, emulator), { worker: false, reconcile: false });
  await svc.rt.ledger.addKey('kept_partner', keyDigest(KEPT_KEY));
  await svc.rt.ledger.addKey('fresh_partner', keyDigest(FRESH_KEY));
});
afterAll(async () => {
  await svc?.stop();
  await emulator?.stop();
});

const count = (name: string) => sent.filter((s) => s === name).length;
const WRONG_KEY = 'wrong-key-0123456789abcdef';
/** Kept keys (`keys add`): one that authenticates before its address is limited, one that never does before. */
const KEPT_KEY = 'kept-key-0123456789abcdefghij';
const FRESH_KEY = 'fresh-key-0123456789abcdefghi';

async function retract(address: string, key: string): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(`${svc.url}/feeds/partner/1`, { method: 'DELETE', headers: { 'X-Api-Key': key, 'X-Forwarded-For': address } });
  return { status: res.status, body: await res.json(), headers: res.headers };
}

async function post(address: string, key: string | null, postId: number): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(`${svc.url}/feeds/partner`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-Forwarded-For': address, ...(key !== null && { 'X-Api-Key': key }) },
    body: JSON.stringify(report(postId)),
  });
  return { status: res.status, body: await res.json(), headers: res.headers };
}

describe('failed authentications, per client address', () => {
  it('past the limit an address gets 429 with Retry-After and its key is not even looked up; another address still gets in', async () => {
    const lookups = () => count('GetObject ingest/api-keys/');
    const before = lookups();
    // Unknown keys are looked up in the ledger (an S3 GET each) and refused.
    for (let i = 0; i < FAILURES_PER_MINUTE; i++) expect((await post('203.0.113.7', `${WRONG_KEY}${i}`, 1)).status).toBe(403);
    expect(lookups() - before).toBe(FAILURES_PER_MINUTE);

    const refused = [
      await post('203.0.113.7', WRONG_KEY, 1),
      await post('203.0.113.7', null, 1),
      // A kept key this process has not seen authenticate is not even read from that address this minute.
      await post('203.0.113.7', FRESH_KEY, 1),
      await retract('203.0.113.7', WRONG_KEY),
    ];
    for (const answer of refused) {
      expect(answer.status).toBe(429);
      expectErrorShape(answer.body, 429);
      expect(answer.body.message).toMatch(/failed authentications/);
      expect(Number(answer.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(Number(answer.headers.get('retry-after'))).toBeLessThanOrEqual(60);
    }
    expect(lookups() - before).toBe(FAILURES_PER_MINUTE);

    // Another client, behind the same load balancer, is unaffected.
    expect((await post('198.51.100.20', API_KEY, 2)).status).toBe(201);
    expect((await retract('198.51.100.20', WRONG_KEY)).status).toBe(403);
    expect(lookups() - before).toBe(FAILURES_PER_MINUTE + 1);
  });

  it('partners sharing the address of a client that fails still get in with keys known good: API_KEYS, and kept keys that authenticated before', async () => {
    const lookups = () => count('GetObject ingest/api-keys/');
    // A kept key authenticates once (from anywhere), then its partner's address fills with failures.
    expect((await post('192.0.2.50', KEPT_KEY, 20)).status).toBe(201);
    for (let i = 0; i < FAILURES_PER_MINUTE; i++) expect((await post('203.0.113.44', `${WRONG_KEY}${i}`, 1)).status).toBe(403);
    expect((await post('203.0.113.44', WRONG_KEY, 1)).status).toBe(429);
    const before = lookups();
    expect((await post('203.0.113.44', API_KEY, 21)).status).toBe(201);
    expect((await post('203.0.113.44', KEPT_KEY, 22)).status).toBe(201);
    // The kept key was still looked up: a revocation counts at once, and then the address's limit.
    expect(lookups() - before).toBe(1);
    await svc.rt.ledger.revokeKeys('kept_partner');
    const revoked = lookups();
    expect((await post('203.0.113.44', KEPT_KEY, 23)).status).toBe(403);
    expect((await post('203.0.113.44', KEPT_KEY, 24)).status).toBe(429);
    expect(lookups() - revoked).toBe(1);
  });

  it('refuses a post whose key was revoked while its body was still arriving; a slow body with a good key is accepted', async () => {
    const SLOW_KEY = 'slow-key-0123456789abcdefghijk';
    await svc.rt.ledger.addKey('slow_partner', keyDigest(SLOW_KEY));
    /** Posts a report's body in two halves, `between` run after the first half, the second a second and a half after it. */
    const slowPost = (postId: number, between: () => Promise<unknown>) =>
      new Promise<{ status: number; body: any }>((resolve, reject) => {
        const body = Buffer.from(JSON.stringify(report(postId)));
        const req = http.request(`${svc.url}/feeds/partner`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', 'Content-Length': body.length, 'X-Api-Key': SLOW_KEY, 'X-Forwarded-For': '192.0.2.77' },
        });
        req.on('response', (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c)).on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) }));
        });
        req.on('error', reject);
        req.write(body.subarray(0, 20));
        setTimeout(() => void between().then(() => setTimeout(() => req.end(body.subarray(20)), 1_500), reject), 200);
      });
    expect((await slowPost(30, async () => undefined)).status).toBe(201);
    const refused = await slowPost(31, () => svc.rt.ledger.revokeKeys('slow_partner'));
    expect(refused.status).toBe(403);
    expect(refused.body.details).toEqual([{ in: 'header', field: 'X-Api-Key', message: 'was revoked' }]);
    expect(await svc.rt.ledger.lookup('partner-slow_partner-31')).toBeUndefined();
  });

  it('counts failures on the retraction route too', async () => {
    for (let i = 0; i < FAILURES_PER_MINUTE; i++) expect((await retract('203.0.113.99', `${WRONG_KEY}${i}`)).status).toBe(403);
    expect((await retract('203.0.113.99', FRESH_KEY)).status).toBe(429);
    expect((await post('203.0.113.99', FRESH_KEY, 3)).status).toBe(429);
  });
});

describe('/ready under a flood of probes', () => {
  it('checks the store and the queue at most once a second, whatever the number of probes', async () => {
    const started = Date.now();
    const queueChecks = count('GetQueueAttributes');
    const storeChecks = count('HeadBucket');
    const burst = await Promise.all(Array.from({ length: 100 }, () => fetch(`${svc.url}/ready`).then(async (r) => (await r.text(), r.status))));
    expect(burst).toEqual(Array(100).fill(200));
    for (let i = 0; i < 100; i++) {
      const res = await fetch(`${svc.url}/ready`);
      await res.text();
      expect(res.status).toBe(200);
    }
    const seconds = Math.floor((Date.now() - started) / 1000);
    const checks = count('GetQueueAttributes') - queueChecks;
    expect(checks).toBeGreaterThanOrEqual(1);
    // One check a second at most: the one under way when a second ends, and the next.
    expect(checks).toBeLessThanOrEqual(seconds + 2);
    // The store answers for itself and for the ledger: two pings a check.
    expect(count('HeadBucket') - storeChecks).toBeLessThanOrEqual(2 * (seconds + 2));
  });
});
