// POST /feeds/partner: every bad input gets a clear 4xx in the error shape and stores nothing.
import net from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  API_KEY,
  OTHER_KEY,
  OTHER_KEY_NAME,
  acceptedPkeys,
  postReport,
  report,
  startTestService,
  testConfig,
  testRuntime,
  type TestService,
  pkeyOf,
} from '../support/env.js';

let svc: TestService;
beforeAll(async () => {
  // No worker: what is stored is exactly what acceptance wrote.
  svc = await startTestService(await testRuntime(await testConfig('embedded')), { worker: false, reconcile: false });
});
afterAll(async () => {
  await svc?.stop();
});

async function expectNothingStored(): Promise<void> {
  expect(await acceptedPkeys(svc.rt)).toEqual([]);
  expect(await svc.rt.queue.depth()).toEqual({ visible: 0, inFlight: 0 });
}

function expectErrorShape(body: any, status: number): void {
  expect(body).toMatchObject({ statusCode: status, error: expect.any(String), message: expect.any(String), details: expect.any(Array) });
  expect(Object.keys(body).sort()).toEqual(['details', 'error', 'message', 'statusCode']);
  expect(JSON.stringify(body)).not.toMatch(/at .*\.(ts|js):\d+/);
}

describe('POST /feeds/partner rejects', () => {
  it('a missing API key with 401', async () => {
    const res = await postReport(svc.url, report(1), { key: null });
    expect(res.status).toBe(401);
    expectErrorShape(res.body, 401);
    expect(res.body.details).toEqual([{ in: 'header', field: 'X-Api-Key', message: 'is required' }]);
    await expectNothingStored();
  });

  it('an unknown API key with 403', async () => {
    const res = await postReport(svc.url, report(1), { key: 'not-a-real-key-000000' });
    expect(res.status).toBe(403);
    expectErrorShape(res.body, 403);
    await expectNothingStored();
  });

  it('a body that is not JSON by Content-Type with 415', async () => {
    const res = await postReport(svc.url, undefined, { contentType: 'text/plain', raw: JSON.stringify(report(1)) });
    expect(res.status).toBe(415);
    expectErrorShape(res.body, 415);
    const none = await postReport(svc.url, undefined, { contentType: null, raw: JSON.stringify(report(1)) });
    expect(none.status).toBe(415);
    await expectNothingStored();
  });

  it('malformed JSON with 400', async () => {
    const res = await postReport(svc.url, undefined, { raw: '{"post_id": 1,' });
    expect(res.status).toBe(400);
    expectErrorShape(res.body, 400);
    expect(res.body.message).toMatch(/not valid JSON/);
    await expectNothingStored();
  });

  it('a body over 64 KiB with 413', async () => {
    const res = await postReport(svc.url, report(1, { text: 'x'.repeat(70 * 1024) }));
    expect(res.status).toBe(413);
    expectErrorShape(res.body, 413);
    // Small as sent, over the limit once decoded: the body is named, and what counts.
    const zipped = await fetch(`${svc.url}/feeds/partner`, {
      method: 'POST',
      headers: { 'X-Api-Key': API_KEY, 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' },
      body: gzipSync(JSON.stringify(report(1, { text: 'x'.repeat(70 * 1024) }))),
    });
    const refused = (await zipped.json()) as any;
    expect([zipped.status, refused.details]).toEqual([413, [{ in: 'body', field: '(body)', message: 'must be at most 65536 bytes once decoded' }]]);
    expect(refused.message).toMatch(/once decoded/);
    await expectNothingStored();
  });

  it.each([
    ['post_id missing', { post_id: undefined }, 'post_id'],
    ['post_id negative', { post_id: -5 }, 'post_id'],
    ['post_id fractional', { post_id: 2.5 }, 'post_id'],
    ['post_id not digits', { post_id: 'abc' }, 'post_id'],
    ['post_id beyond 2^53', { post_id: '9007199254740993' }, 'post_id'],
    ['created_at missing', { created_at: undefined }, 'created_at'],
    ['created_at without offset', { created_at: '2026-11-21T13:05:00' }, 'created_at'],
    ['created_at impossible', { created_at: '2026-02-30T13:05:00Z' }, 'created_at'],
    ['created_at far in the future', { created_at: '2999-01-01T00:00:00Z' }, 'created_at'],
    ['title not a string', { title: 5 }, 'title'],
    ['text too long', { text: 'y'.repeat(10_001) }, 'text'],
    ['image_url not http(s)', { image_url: 'javascript:alert(1)' }, 'image_url'],
    ['image_url with an empty host (read as x by a browser alone)', { image_url: 'http:///x' }, 'image_url'],
    ['image_url with a backslash for a slash', { image_url: 'https://\\example.org/a.jpg' }, 'image_url'],
    ['image_url on port 0 (no client can connect to it)', { image_url: 'https://example.org:0/a.jpg' }, 'image_url'],
    ['image_url on a port past 65535', { image_url: 'https://example.org:65536/a.jpg' }, 'image_url'],
    ['partner_city unknown', { partner_city: 'Manila' }, 'partner_city'],
    ['partner_city missing', { partner_city: undefined }, 'partner_city'],
    ['disaster_type not flood', { disaster_type: 'earthquake' }, 'disaster_type'],
    ['location missing', { location: undefined }, 'location'],
    ['location.lat out of range', { location: { lat: 91, lng: 121 } }, 'location.lat'],
    ['location.lng out of range', { location: { lat: 14, lng: 181 } }, 'location.lng'],
    ['location.lat a string', { location: { lat: '14.6', lng: 121 } }, 'location.lat'],
    ['location with an extra field', { location: { lat: 14.6, lng: 121, alt: 3 } }, 'location.alt'],
    ['an unknown top-level field', { city: 'QC' }, 'city'],
  ])('%s with 400 naming the field', async (_name, change, field) => {
    const res = await postReport(svc.url, report(77, change));
    expect(res.status).toBe(400);
    expectErrorShape(res.body, 400);
    expect(res.body.details.map((d: { field: string }) => d.field)).toContain(field);
    await expectNothingStored();
  });

  it('a body that is JSON but not an object with 400', async () => {
    for (const raw of ['[]', '"text"', '42', 'null']) {
      const res = await postReport(svc.url, undefined, { raw });
      expect(res.status, raw).toBe(400);
      expectErrorShape(res.body, 400);
    }
    await expectNothingStored();
  });

  it('lists every problem of a body, not only the first', async () => {
    const res = await postReport(svc.url, { post_id: -1, created_at: 'yesterday', partner_city: 'Cebu', disaster_type: 'fire', location: { lat: 100 } });
    expect(res.status).toBe(400);
    expect(res.body.details.map((d: { field: string }) => d.field).sort()).toEqual(
      ['created_at', 'disaster_type', 'location.lat', 'location.lng', 'partner_city', 'post_id'].sort(),
    );
  });
});

describe('routing', () => {
  it('answers unknown paths with 404 and wrong methods with 405 and Allow', async () => {
    const missing = await fetch(`${svc.url}/nope`);
    expect(missing.status).toBe(404);
    // No error answer is kept by a cache.
    expect(missing.headers.get('cache-control')).toBe('no-store');
    expectErrorShape(await missing.json(), 404);
    const wrong = await fetch(`${svc.url}/feeds/partner`);
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('POST');
    expectErrorShape(await wrong.json(), 405);
    const wrongGet = await fetch(`${svc.url}/cities`, { method: 'DELETE' });
    expect(wrongGet.status).toBe(405);
    expect(wrongGet.headers.get('allow')).toBe('GET, HEAD, OPTIONS');
  });
});

describe('POST /feeds/partner accepts', () => {
  it("with either configured key, 201 then 200 for the same partner's post_id; the other key's same post_id is its own report", async () => {
    const first = await postReport(svc.url, report(500), { key: API_KEY });
    expect(first.status).toBe(201);
    expect(first.body).toEqual({ post_id: 500, created: true, pkey: pkeyOf(500) });
    const second = await postReport(svc.url, report(500, { title: 'changed' }), { key: API_KEY });
    expect(second.status).toBe(200);
    expect(second.body).toEqual({ post_id: 500, created: false, pkey: pkeyOf(500), message: 'post_id 500 already exists' });
    const other = await postReport(svc.url, report(500, { title: 'the other partner' }), { key: OTHER_KEY });
    expect(other.body).toEqual({ post_id: 500, created: true, pkey: pkeyOf(500, OTHER_KEY_NAME) });
    // Exactly one idempotency key and one message per partner's report.
    expect(await acceptedPkeys(svc.rt)).toEqual([pkeyOf(500), pkeyOf(500, OTHER_KEY_NAME)].sort());
    expect(await svc.rt.queue.depth()).toEqual({ visible: 2, inFlight: 0 });
    // Read back before it is archived: a 404 to retry shortly, which no cache may keep (a shared
    // cache keeps a 404 without Cache-Control for minutes).
    const early = await fetch(`${svc.url}/reports/${pkeyOf(500)}`);
    expect([early.status, early.headers.get('retry-after'), early.headers.get('cache-control')]).toEqual([404, '60', 'no-store']);
    expectErrorShape(await early.json(), 404);
  });

  it('at any case of its path, with a trailing slash, gzip-encoded; a query string is refused, a credential in it too', async () => {
    const post = (path: string, body: string | Buffer, headers: Record<string, string> = {}) =>
      fetch(`${svc.url}${path}`, { method: 'POST', headers: { 'X-Api-Key': API_KEY, 'Content-Type': 'application/json', ...headers }, body });
    expect((await post('/FEEDS/Partner/', JSON.stringify(report(700)))).status).toBe(201);
    // The feed takes no parameter (DESIGN.md: unknown ones are a 400): the report is not stored.
    const tagged = await post('/feeds/partner?source=app', JSON.stringify(report(701)));
    expect(tagged.status).toBe(400);
    expect(((await tagged.json()) as { details: { field: string }[] }).details.map((d) => d.field)).toEqual(['source']);
    const zipped = await post('/feeds/partner', gzipSync(JSON.stringify(report(702))), { 'Content-Encoding': 'gzip' });
    expect(zipped.status).toBe(201);
    expect(await zipped.json()).toEqual({ post_id: 702, created: true, pkey: pkeyOf(702) });
    const leaked = await post(`/feeds/partner?api_key=${API_KEY}`, JSON.stringify(report(703)));
    expect(leaked.status).toBe(400);
    expectErrorShape(await leaked.json(), 400);
    for (const id of [701, 703]) expect(await acceptedPkeys(svc.rt)).not.toContain(pkeyOf(id));
    for (const id of [700, 702]) expect(await acceptedPkeys(svc.rt)).toContain(pkeyOf(id));
  });

  it('header and framing mistakes: each a 4xx naming its header, nothing stored; utf8, the charset\'s other name, is UTF-8', async () => {
    const post = (body: string | Buffer, headers: Record<string, string>) => fetch(`${svc.url}/feeds/partner`, { method: 'POST', headers: { 'X-Api-Key': API_KEY, 'Content-Type': 'application/json', ...headers }, body });
    /** A request as written, byte for byte (fetch would merge repeated headers and frame the body itself); its status and JSON body. */
    const raw = (head: string, body: Buffer) =>
      new Promise<{ status: number; body: any }>((resolve, reject) => {
        const { port } = new URL(svc.url);
        const socket = net.connect(Number(port), '127.0.0.1', () => socket.end(Buffer.concat([Buffer.from(head.replace(/\n/g, '\r\n')), body])));
        let got = '';
        socket.on('data', (d) => (got += d));
        socket.on('error', reject);
        socket.on('close', () => resolve({ status: Number(/^HTTP\/1\.1 (\d+)/.exec(got)?.[1]), body: JSON.parse(got.slice(got.indexOf('\r\n\r\n') + 4)) }));
      });
    const fieldsOf = async (res: Response) => ((await res.json()) as { details: { field: string }[] }).details.map((d) => d.field);

    const zstd = await post(JSON.stringify(report(710)), { 'Content-Encoding': 'zstd' });
    expect(zstd.status).toBe(415);
    expect(await fieldsOf(zstd)).toEqual(['Content-Encoding']);
    const notGzip = await post(JSON.stringify(report(711)), { 'Content-Encoding': 'gzip' });
    expect(notGzip.status).toBe(400);
    expect(await fieldsOf(notGzip)).toEqual(['Content-Encoding']);
    for (const url of ['https://', 'http://x:99999/photo.jpg']) {
      const res = await post(JSON.stringify(report(712, { image_url: url })), {});
      expect(res.status, url).toBe(400);
      expect(await fieldsOf(res)).toEqual(['image_url']);
    }
    const gzipChunked = gzipSync(JSON.stringify(report(713)));
    const coded = await raw(`POST /feeds/partner HTTP/1.1\nHost: x\nX-Api-Key: ${API_KEY}\nContent-Type: application/json\nTransfer-Encoding: gzip, chunked\nConnection: close\n\n`, Buffer.concat([Buffer.from(`${gzipChunked.length.toString(16)}\r\n`), gzipChunked, Buffer.from('\r\n0\r\n\r\n')]));
    expect(coded.status).toBe(400);
    expect(coded.body.details.map((d: { field: string }) => d.field)).toEqual(['Transfer-Encoding']);
    const body = Buffer.from(JSON.stringify(report(714)));
    const twice = await raw(`POST /feeds/partner HTTP/1.1\nHost: x\nX-Api-Key: ${API_KEY}\nX-Api-Key: ${API_KEY}\nContent-Type: application/json\nContent-Length: ${body.length}\nConnection: close\n\n`, body);
    expect(twice.status).toBe(400);
    expectErrorShape(twice.body, 400);
    expect(twice.body.details.map((d: { field: string }) => d.field)).toEqual(['X-Api-Key']);
    // A charset hidden from a pattern in another parameter's quotes is still the one the JSON parser would decode with.
    const utf16 = Buffer.from(JSON.stringify(report(717)), 'utf16le');
    const hidden = await post(utf16, { 'Content-Type': 'application/json; x="; charset=utf-8"; charset=utf-16le' });
    expect(hidden.status).toBe(415);
    expect(await fieldsOf(hidden)).toEqual(['Content-Type']);
    const stored = await acceptedPkeys(svc.rt);
    for (const id of [710, 711, 712, 713, 714, 717]) expect(stored).not.toContain(pkeyOf(id));

    for (const [id, type] of [[715, 'application/json; charset=utf8'], [716, 'application/json;charset="UTF8"'], [718, 'application/json; =x; charset=utf8']] as const) {
      expect((await post(JSON.stringify(report(id)), { 'Content-Type': type })).status, type).toBe(201);
    }
  });

  it('a post_id sent as a string of digits is the same report as the number', async () => {
    const first = await postReport(svc.url, report(600));
    expect(first.status).toBe(201);
    const asString = await postReport(svc.url, report(600, { post_id: '600' }));
    expect(asString.status).toBe(200);
    expect(asString.body.post_id).toBe(600);
    // Leading zeros normalised: the same integer, the same report.
    const padded = await postReport(svc.url, report(600, { post_id: '000600' }));
    expect(padded.status).toBe(200);
    expect(padded.body).toMatchObject({ post_id: 600, created: false });
    const fresh = await postReport(svc.url, report(601, { post_id: '0601' }));
    expect(fresh.status).toBe(201);
    expect(fresh.body).toMatchObject({ post_id: 601, created: true, pkey: first.body.pkey.replace(/600$/, '601') });
  });
});
