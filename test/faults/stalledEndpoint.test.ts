// An S3/SQS endpoint that accepts connections and never answers: posts get a 503 with
// Retry-After and /ready a 503, promptly, instead of hanging for the whole outage; the SDK
// calls themselves fail instead of waiting forever; all is well again when it answers.
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootstrap } from '../../src/main/bootstrap.js';
import { createLogger } from '../../src/shared/log.js';
import { createRuntime } from '../../src/main/runtime.js';
import { UnavailableError } from '../../src/shared/errors.js';
import { keyDigest } from '../../src/partners/apiKeys.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { API_KEY, eventually, report, startTestService, testConfig, testRuntime, type TestService } from '../support/env.js';
import { expectErrorShape, fetchWithin, stallableEndpoint, type StallableEndpoint } from './support.js';

/** Well beyond the acceptance deadline (2 s) and well short of an outage: an answer, not a hang. */
const ANSWER_WITHIN_MS = 8_000;
/** A key kept in the ledger (`keys add`), read from the store on every post, unlike API_KEYS. */
const KEPT_KEY = 'kept-key-0123456789abcdef';

describe('a stalled S3/SQS endpoint', () => {
  let emulator: Emulator;
  let endpoint: StallableEndpoint;
  let svc: TestService;
  const saved = { id: process.env.AWS_ACCESS_KEY_ID, secret: process.env.AWS_SECRET_ACCESS_KEY };
  const logged: { msg: string; post_id?: number }[] = [];
  const logSink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logged.push(JSON.parse(chunk.toString()) as { msg: string; post_id?: number });
      done();
    },
  });

  beforeAll(async () => {
    // The service's own SDK clients (awsClients) find credentials in the SDK's usual chain.
    process.env.AWS_ACCESS_KEY_ID = 'test';
    process.env.AWS_SECRET_ACCESS_KEY = 'test';
    emulator = await startEmulator();
    endpoint = await stallableEndpoint(emulator.endpoint);
    // Shorter SDK bounds than the defaults keep the suite quick; the acceptance deadline is the default (2 s).
    // Few failed authentications allowed: a refusal for the store's sake must not count as one.
    const config = await testConfig('aws', emulator, {
      AWS_ENDPOINT_URL: endpoint.url,
      AWS_REQUEST_TIMEOUT_SECONDS: '2',
      AWS_MAX_ATTEMPTS: '2',
      ACCEPT_MAX_IN_FLIGHT: '4',
      ACCEPT_DEADLINE_SECONDS: '2',
      RATE_LIMIT_AUTH_FAILURES_PER_MINUTE: '3',
    });
    await bootstrap(config, { s3: emulator.s3, sqs: emulator.sqs });
    svc = await startTestService(await createRuntime(config, { log: createLogger('warn', logSink) }), { worker: false, reconcile: false });
    await svc.rt.ledger.addKey('kept', keyDigest(KEPT_KEY));
  });
  afterAll(async () => {
    await svc?.stop();
    await endpoint?.close();
    await emulator?.stop();
    process.env.AWS_ACCESS_KEY_ID = saved.id;
    process.env.AWS_SECRET_ACCESS_KEY = saved.secret;
  });

  const post = (postId: number, key = API_KEY) =>
    fetchWithin(ANSWER_WITHIN_MS, `${svc.url}/feeds/partner`, {
      method: 'POST',
      headers: { 'X-Api-Key': key, 'Content-Type': 'application/json' },
      body: JSON.stringify(report(postId)),
    });

  it('answers posts and /ready normally while the endpoint answers', async () => {
    expect((await post(1)).status).toBe(201);
    expect((await fetchWithin(ANSWER_WITHIN_MS, `${svc.url}/ready`)).status).toBe(200);
  });

  it('answers a post with 503 and Retry-After, and /ready with 503, while it is silent', async () => {
    endpoint.stall();
    const [a, b] = await Promise.all([post(2), post(3)]);
    for (const res of [a, b]) {
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('5');
      expectErrorShape(res.body, 503);
      // It may yet be accepted: the partner is told to send it again, not to give it up.
      expect(res.body.message).toMatch(/may still be accepted: send it again after 5 seconds/);
    }
    // Ops see each one in the log too.
    expect(logged.filter((l) => l.msg === 'an acceptance passed its deadline: answered 503').map((l) => l.post_id).sort()).toEqual([2, 3]);
    const ready = await fetchWithin(ANSWER_WITHIN_MS, `${svc.url}/ready`);
    expect(ready.status).toBe(503);
    expectErrorShape(ready.body, 503);
    expect(ready.body.message).toMatch(/object store unreachable/);
    expect(ready.body.message).toMatch(/queue unreachable/);
  });

  it('refuses at once what would pile up beyond the acceptances already under way', async () => {
    const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => post(10 + i)));
    expect(answers.map((a) => a.status)).toEqual(Array(6).fill(503));
    // At most 4 may be under way (ACCEPT_MAX_IN_FLIGHT): the others were refused without waiting.
    expect(answers.filter((a) => /under way/.test(a.body.message)).length).toBeGreaterThanOrEqual(2);
  });

  it("counts a kept key's lookups with the acceptances under way, and not as failed authentications", async () => {
    const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => post(20 + i, KEPT_KEY)));
    expect(answers.map((a) => a.status)).toEqual(Array(6).fill(503));
    for (const res of answers) expectErrorShape(res.body, 503);
    // The lookups wait on the silent store: those beyond the cap were refused without waiting.
    expect(answers.filter((a) => /under way/.test(a.body.message)).length).toBeGreaterThanOrEqual(2);
  });

  it('fails the SDK calls themselves rather than leaving them waiting', async () => {
    // connect (1 s) and silence (2 s) bounds, 2 attempts: well within the test's own timeout.
    await expect(svc.rt.store.head('ingest/keys/partner/9.json')).rejects.toBeInstanceOf(UnavailableError);
    await expect(svc.rt.queue.send(['{}'])).rejects.toBeInstanceOf(UnavailableError);
  }, 45_000);

  it('accepts again once the endpoint answers', async () => {
    endpoint.resume();
    await eventually(async () => ((await post(4)).status === 201 ? true : undefined), 20_000, 'a post accepted again');
    await eventually(async () => ((await fetchWithin(ANSWER_WITHIN_MS, `${svc.url}/ready`)).status === 200 ? true : undefined), 20_000, '/ready 200 again');
    // A post cut off by the deadline either completed later or left nothing: its retry is definite.
    expect([200, 201]).toContain((await post(2)).status);
    // Six refusals of the kept key, past the limit of 3 failed authentications: none counted.
    expect((await post(20, KEPT_KEY)).status).toBe(201);
  });
});

describe('a repeat post whose state cannot be read', () => {
  it('is answered 503 within the acceptance deadline and counted with the acceptances under way', async () => {
    const rt = await testRuntime(await testConfig('embedded', undefined, { ACCEPT_MAX_IN_FLIGHT: '2', ACCEPT_DEADLINE_SECONDS: '2' }));
    // Whether a repeat was retracted is read after its acceptance: here that read never answers.
    let silent = false;
    const ledger = rt.ledger;
    rt.ledger = new Proxy(ledger, {
      get(target, name) {
        const value = Reflect.get(target, name, target) as unknown;
        if (name !== 'lookup') return typeof value === 'function' ? value.bind(target) : value;
        return (pkey: string) => (silent ? new Promise(() => undefined) : target.lookup(pkey));
      },
    });
    const svc = await startTestService(rt, { worker: false, reconcile: false });
    const post = (postId: number) =>
      fetchWithin(ANSWER_WITHIN_MS, `${svc.url}/feeds/partner`, { method: 'POST', headers: { 'X-Api-Key': API_KEY, 'Content-Type': 'application/json' }, body: JSON.stringify(report(postId)) });
    try {
      for (const id of [1, 2]) expect((await post(id)).status).toBe(201);
      silent = true;
      const repeats = await Promise.all([post(1), post(2)]);
      for (const res of repeats) {
        expect(res.status).toBe(503);
        expect(res.headers.get('retry-after')).toBe('5');
        expectErrorShape(res.body, 503);
      }
      // Both reads still wait: a third post finds the acceptances under way at their bound.
      const third = await post(3);
      expect(third.status).toBe(503);
      expect(third.body.message).toMatch(/under way/);
    } finally {
      await svc.stop();
    }
  });
});
