// Hostile requests: what Node's parser refuses is answered in the error shape; too many
// query parameters, invalid UTF-8 in a feed body and credentials in the URL are 400s that
// store nothing; a key sent in a URL never reaches the request log.
import net from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/shared/log.js';
import { acceptedPkeys, API_KEY, API_KEY_NAME, eventually, getJson, postReport, report, startTestService, testConfig, testRuntime, type TestService } from '../support/env.js';
import { expectErrorShape, rawRequest } from './support.js';

const WINDOW = 'start=2026-11-20T00:00:00%2B0000&end=2026-11-21T23:59:59%2B0000';
const UA = { 'User-Agent': 'fault-tests/1.0' };

let svc: TestService;
const lines: string[] = [];
beforeAll(async () => {
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      done();
    },
  });
  const config = await testConfig('embedded', undefined, { LOG_LEVEL: 'info' });
  svc = await startTestService(await testRuntime(config, undefined, { log: createLogger('info', sink) }), { worker: false, reconcile: false });
});
afterAll(async () => {
  await svc?.stop();
});

function expectShaped(res: { status: number; headers: Record<string, string>; body: string }, status: number): any {
  expect(res.status).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  // Kept by no cache, as every error answer.
  expect(res.headers['cache-control']).toBe('no-store');
  const body = JSON.parse(res.body);
  expectErrorShape(body, status);
  return body;
}

describe('requests refused by Node before the app sees them, in the error shape', () => {
  it('80 KB of headers: 431', async () => {
    const res = await rawRequest(svc.url, [`GET /cities HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(80 * 1024)}\r\n\r\n`]);
    expectShaped(res, 431);
    // A page of any origin reads why, as it reads every error of a read.
    expect(res.headers['access-control-allow-origin']).toBe('*');
  });

  it('10,000 query parameters (a request line past the limit): 431', async () => {
    const query = Array.from({ length: 10_000 }, (_, i) => `p${i}=1`).join('&');
    const res = await rawRequest(svc.url, [`GET /reports/archive?${query} HTTP/1.1\r\nHost: x\r\nUser-Agent: t\r\n\r\n`]);
    expectShaped(res, 431);
  });

  it('Content-Length together with Transfer-Encoding: 400', async () => {
    const body = JSON.stringify(report(1));
    const res = await rawRequest(svc.url, [
      `POST /feeds/partner HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${API_KEY}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nTransfer-Encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`,
    ]);
    const shaped = expectShaped(res, 400);
    expect(shaped.message).toMatch(/one of Content-Length and Transfer-Encoding/);
    // The same with a coding other than chunked: the pair is named, not the Content-Length alone.
    for (const coding of ['identity', 'gzip']) {
      const other = await rawRequest(svc.url, [`POST /feeds/partner HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${API_KEY}\r\nContent-Type: application/json\r\nTransfer-Encoding: ${coding}\r\nContent-Length: ${body.length}\r\n\r\n${body}`]);
      expect([coding, expectShaped(other, 400).message]).toEqual([coding, expect.stringMatching(/one of Content-Length and Transfer-Encoding/)]);
    }
    expect(await acceptedPkeys(svc.rt)).toEqual([]);
  });

  it('two Content-Length headers: 400 saying so', async () => {
    const body = JSON.stringify(report(2));
    const res = await rawRequest(svc.url, [
      `POST /feeds/partner HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${API_KEY}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    ]);
    expect(expectShaped(res, 400).message).toMatch(/more than one Content-Length/);
    expect(await acceptedPkeys(svc.rt)).toEqual([]);
  });

  it('a request line of another HTTP version than 1.0 and 1.1: 400 saying which to send, and the connection closed', async () => {
    for (const version of ['HTTP/2.0', 'HTTP/0.9', 'HTTP/1.2', 'HTTP/3.0']) {
      const res = await rawRequest(svc.url, [`GET /cities/levels ${version}\r\nHost: x\r\n\r\n`]);
      const shaped = expectShaped(res, 400);
      expect([version, shaped.message]).toEqual([version, 'This service speaks HTTP/1.1 (and 1.0): send the request line as HTTP/1.1.']);
      expect(res.headers.connection).toBe('close');
    }
    // 1.0 is served.
    expect((await rawRequest(svc.url, ['GET /cities/levels HTTP/1.0\r\nUser-Agent: t\r\n\r\n'])).status).toBe(200);
  });

  it('an HTTP/1.1 request without Host: 400 naming the header, with a request id', async () => {
    const res = await rawRequest(svc.url, ['GET /cities/levels HTTP/1.1\r\n\r\n']);
    expect(expectShaped(res, 400).details).toEqual([{ in: 'header', field: 'Host', message: 'is required in HTTP/1.1' }]);
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    // HTTP/1.0 has no Host header to require.
    expect((await rawRequest(svc.url, ['GET /health HTTP/1.0\r\n\r\n'])).status).toBe(200);
    // Two name no one host.
    const twice = await rawRequest(svc.url, ['GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n']);
    expect(expectShaped(twice, 400).details).toEqual([{ in: 'header', field: 'Host', message: 'must be given once' }]);
  });

  it('Last-Event-ID given twice: 400 saying so (Node joins the two as "5, 6", no bad number of the client\'s)', async () => {
    const res = await rawRequest(svc.url, ['GET /reports/stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\nLast-Event-ID: 5\r\nLast-Event-ID: 6\r\n\r\n']);
    expect(expectShaped(res, 400).details).toEqual([{ in: 'header', field: 'Last-Event-ID', message: 'must be given once' }]);
  });

  it("a folder of the explorer's files is a 404 at once, not a redirect to another 404", async () => {
    for (const folder of ['/explorer', '/explorer/', '/explorer/vendor/leaflet']) {
      const res = await fetch(`${svc.url}${folder}`, { redirect: 'manual' });
      expect([folder, res.status]).toEqual([folder, 404]);
      expectErrorShape(await res.json(), 404);
    }
    expect((await fetch(`${svc.url}/explorer/vendor/leaflet/leaflet.js`)).status).toBe(200);
    // The page's own file is no asset: served at / alone, with its security policy.
    for (const spelt of ['/explorer/index.html', '/explorer/%69ndex.html', '/explorer//index.html', '/explorer/vendor/../index.html']) {
      const page = await rawRequest(svc.url, [`GET ${spelt} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`]);
      expect([spelt, page.status]).toEqual([spelt, 404]);
    }
    expect((await fetch(`${svc.url}/explorer/explorer.js`)).status).toBe(200);
  });

  it('a request line that is not HTTP: 400, with a request id', async () => {
    const res = await rawRequest(svc.url, ['G\x01T / HTTP/1.1\r\nHost: x\r\n\r\n']);
    expectShaped(res, 400);
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('CONNECT, as to a proxy: 400 in the error shape, not a connection closed without a word', async () => {
    const { port } = new URL(svc.url);
    const res = await rawRequest(svc.url, [`CONNECT 127.0.0.1:${port} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`]);
    expect(expectShaped(res, 400).message).toMatch(/not a proxy/);
  });

  it('CONNECT, then a reset as the answer arrives: the service goes on', async () => {
    const { port } = new URL(svc.url);
    await new Promise<void>((resolve) => {
      const socket = net.connect(Number(port), '127.0.0.1', () => socket.write(`CONNECT 127.0.0.1:${port} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`));
      socket.on('data', () => socket.resetAndDestroy());
      socket.on('error', () => undefined);
      socket.on('close', () => resolve());
    });
    await new Promise((r) => setTimeout(r, 100));
    expect((await getJson(`${svc.url}/health`)).status).toBe(200);
  });

  it('an Expect other than 100-continue: 417', async () => {
    const res = await rawRequest(svc.url, ['GET /cities HTTP/1.1\r\nHost: x\r\nExpect: the-unexpected\r\n\r\n']);
    expect(res.headers['access-control-allow-origin']).toBe('*');
    const shaped = expectShaped(res, 417);
    expect(shaped.details[0].field).toBe('Expect');
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe('the feed, as HTTP/1.1 allows it to be asked', () => {
  it('a post without a body, though it says it is JSON: 400 saying the body is required, not 415', async () => {
    const res = await rawRequest(svc.url, [`POST /feeds/partner HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Api-Key: ${API_KEY}\r\nContent-Type: application/json\r\n\r\n`]);
    expect(expectShaped(res, 400).details).toEqual([{ in: 'body', field: '(body)', message: 'is required' }]);
  });

  it('an empty body (Content-Length: 0, as `curl -d \'\'` sends): the same 400, not the fields a report lacks', async () => {
    const res = await rawRequest(svc.url, [`POST /feeds/partner HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Api-Key: ${API_KEY}\r\nContent-Type: application/json\r\nContent-Length: 0\r\n\r\n`]);
    expect(expectShaped(res, 400).details).toEqual([{ in: 'body', field: '(body)', message: 'is required' }]);
    // Chunked, with no chunk but the last: no body either.
    const chunked = await rawRequest(svc.url, [`POST /feeds/partner HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Api-Key: ${API_KEY}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`]);
    expect(expectShaped(chunked, 400).details).toEqual([{ in: 'body', field: '(body)', message: 'is required' }]);
  });

  it('a request line in absolute form naming a user and a key before the host: 400, and the key is never logged', async () => {
    const target = `http://${API_KEY_NAME}:${API_KEY}@${new URL(svc.url).host}/reports/archive/extent`;
    const res = await rawRequest(svc.url, [`GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`]);
    expect(expectShaped(res, 400).details).toEqual([expect.objectContaining({ in: 'path', field: '(userinfo)' })]);
    // Its access line is written as the answer closes.
    await eventually(async () => (lines.some((l) => l.includes('/reports/archive/extent')) ? true : undefined), 5_000, 'the access line');
    for (const line of lines) expect(line).not.toContain(API_KEY);
  });

  it('a request line in absolute form (POST http://host/feeds/partner), which HTTP/1.1 servers take, reaches the feed: its body is read', async () => {
    // A report without its fields: the feed's 400 naming them, not a 405 from a route that missed it.
    const res = await rawRequest(svc.url, [`POST ${svc.url}/feeds/partner HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Api-Key: ${API_KEY}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`]);
    expect(expectShaped(res, 400).details).toEqual(expect.arrayContaining([expect.objectContaining({ in: 'body', field: 'post_id' })]));
  });
});

describe('query strings', () => {
  it('more parameters than the service reads: 400, not a silently truncated query', async () => {
    // 1,000 dummies then a filter: Node's own parser would have dropped the filter, widening the query.
    const padding = Array.from({ length: 1000 }, () => 'x=1').join('&');
    const res = await getJson(`${svc.url}/reports/archive?${padding}&${WINDOW}&admin=PH-QC`, UA);
    expect(res.status).toBe(400);
    expectErrorShape(res.body, 400);
    expect(res.body.details).toEqual([expect.objectContaining({ in: 'query', field: '(query)' })]);
  });

  it('empty pairs (&&) never push a parameter out of the query: a bad one after 200 of them is still read, and refused', async () => {
    const res = await getJson(`${svc.url}/reports/archive?${WINDOW}${'&'.repeat(200)}&geoformat=nonsense`, UA);
    expect(res.status).toBe(400);
    expect(res.body.details).toEqual([expect.objectContaining({ in: 'query', field: 'geoformat' })]);
  });

  it('a partner key in the query string is refused, even with a valid X-Api-Key, and never logged', async () => {
    for (const name of ['api_key', 'apiKey', 'X-Api-Key', 'access_token', 'key']) {
      const res = await fetch(`${svc.url}/feeds/partner?${encodeURIComponent(name)}=${API_KEY}`, {
        method: 'POST',
        headers: { 'X-Api-Key': API_KEY, 'Content-Type': 'application/json' },
        body: JSON.stringify(report(10)),
      });
      expect(res.status).toBe(400);
      const body = (await res.json()) as any;
      expectErrorShape(body, 400);
      expect(body.details).toEqual([expect.objectContaining({ in: 'query', field: name })]);
    }
    for (const name of ['apikey', 'sig', 'password', 'Authorization', 'session_token']) {
      const get = await getJson(`${svc.url}/reports/archive?${WINDOW}&${name}=${API_KEY}`, UA);
      expect(get.status).toBe(400);
      expect(get.body.details).toEqual([expect.objectContaining({ field: name, message: expect.stringMatching(/credential/) })]);
    }
    // Names that merely contain such words are ordinary (unknown) parameters.
    const ordinary = await getJson(`${svc.url}/reports/archive?${WINDOW}&author=x&keyword=y`, UA);
    expect(ordinary.body.details.map((d: any) => d.message)).toEqual([expect.stringMatching(/not a known parameter/), expect.stringMatching(/not a known parameter/)]);
    // A key under a harmless name is refused as an unknown parameter; its value is still not logged.
    const hidden = await getJson(`${svc.url}/reports/archive?${WINDOW}&q=${API_KEY}`, UA);
    expect(hidden.status).toBe(400);
    expect(await acceptedPkeys(svc.rt)).toEqual([]);

    await new Promise((resolve) => setTimeout(resolve, 100));
    const logged = lines.map((l) => JSON.parse(l)).filter((l) => l.req?.url?.includes('=[redacted]'));
    expect(logged.length).toBeGreaterThanOrEqual(11);
    expect(lines.join('\n')).not.toContain(API_KEY);
  });
});

describe('invalid UTF-8 in a feed body', () => {
  const post = (bytes: Buffer) =>
    fetch(`${svc.url}/feeds/partner`, { method: 'POST', headers: { 'X-Api-Key': API_KEY, 'Content-Type': 'application/json' }, body: bytes });
  const withBytes = (json: string, marker: string, bytes: number[]) => {
    const [before, after] = json.split(marker) as [string, string];
    return Buffer.concat([Buffer.from(before), Buffer.from(bytes), Buffer.from(after)]);
  };

  it.each([
    ['a stray byte in the title', 'title', [0xff]],
    ['a truncated sequence in the text', 'text', [0xe2, 0x82]],
    ['an overlong encoding in the title', 'title', [0xc0, 0xaf]],
    ['a UTF-16 surrogate in the text', 'text', [0xed, 0xa0, 0x80]],
  ])('%s: 400 naming the field, nothing stored', async (_name, field, bytes) => {
    const json = JSON.stringify(report(20, { title: 'Baha @@ dito', text: 'tubig @@ tuhod' }));
    const marked = field === 'title' ? json.replace('Baha @@', 'Baha MARK') : json.replace('tubig @@', 'tubig MARK');
    const res = await post(withBytes(marked, 'MARK', bytes));
    expect(res.status).toBe(400);
    const body = (await res.json()) as any;
    expectErrorShape(body, 400);
    expect(body.details).toEqual([{ in: 'body', field, message: expect.stringMatching(/not valid UTF-8/) }]);
    expect(await acceptedPkeys(svc.rt)).toEqual([]);
  });

  it('escaped as JSON, a lone UTF-16 surrogate in the title: 400 naming the field, nothing stored', async () => {
    // JSON.stringify writes a lone surrogate as its escape: valid UTF-8 bytes, not valid Unicode.
    const res = await post(Buffer.from(JSON.stringify(report(23, { title: 'Baha \ud800 dito' }))));
    expect(res.status).toBe(400);
    const body = (await res.json()) as any;
    expectErrorShape(body, 400);
    expect(body.details).toEqual([{ in: 'body', field: 'title', message: expect.stringMatching(/lone UTF-16 surrogate/) }]);
    expect(await acceptedPkeys(svc.rt)).toEqual([]);
  });

  it('a NUL (U+0000) in the title or text, which CSV readers stop at: 400 naming the field, nothing stored', async () => {
    const res = await post(Buffer.from(JSON.stringify(report(24, { title: 'Baha\u0000', text: 'a\u0000b' }))));
    expect(res.status).toBe(400);
    const body = (await res.json()) as any;
    expectErrorShape(body, 400);
    expect(body.details).toEqual(['title', 'text'].map((field) => ({ in: 'body', field, message: expect.stringMatching(/U\+0000/) })));
    expect(await acceptedPkeys(svc.rt)).toEqual([]);
  });

  it('in a nested property name: 400 naming the object', async () => {
    const json = JSON.stringify(report(21)).replace('"lat"', '"laMARK"');
    const res = await post(withBytes(json, 'MARK', [0xfe]));
    const body = (await res.json()) as any;
    expect(res.status).toBe(400);
    expect(body.details).toEqual([{ in: 'body', field: 'location', message: expect.stringMatching(/property name .*not valid UTF-8/) }]);
  });

  it.each([
    ['post_id given twice', '{"post_id":30,"post_id":31,"created_at":"2026-11-21T13:05:00+08:00","partner_city":"Quezon City","disaster_type":"flood","location":{"lat":14.6516,"lng":121.0497}}', 'post_id'],
    ['lat given twice in location', '{"post_id":32,"created_at":"2026-11-21T13:05:00+08:00","partner_city":"Quezon City","disaster_type":"flood","location":{"lat":14.6516,"lng":121.0497,"lat":0}}', 'location.lat'],
    ['a name and its escaped spelling', '{"post_id":33,"created_at":"2026-11-21T13:05:00+08:00","partner_city":"Quezon City","disaster_type":"flood","title":"a","\\u0074itle":"b","location":{"lat":14.6516,"lng":121.0497}}', 'title'],
  ])('%s: 400 naming it (parsers keep the first or the last: two readers, two reports), nothing stored', async (_name, body, field) => {
    const res = await post(Buffer.from(body));
    expect(res.status).toBe(400);
    const answer = (await res.json()) as any;
    expectErrorShape(answer, 400);
    expect(answer.details).toEqual([{ in: 'body', field, message: expect.stringMatching(/given twice/) }]);
    expect(await acceptedPkeys(svc.rt)).toEqual([]);
  });

  it('the same name in different objects, and a name inside a string, are no repeat', async () => {
    const body = '{"post_id":34,"created_at":"2026-11-21T13:05:00+08:00","partner_city":"Quezon City","disaster_type":"flood","title":"\\"lat\\":1, \\"post_id\\":2","location":{"lat":14.6516,"lng":121.0497}}';
    expect(JSON.parse(body).title).toBe('"lat":1, "post_id":2');
    expect((await post(Buffer.from(body))).status).toBe(201);
  });

  it('valid UTF-8, U+FFFD and astral characters included, is accepted and kept as sent', async () => {
    const title = 'Baha \uFFFD sa Espa\u00f1a \u{1F30A}';
    expect((await postReport(svc.url, report(22, { title }))).status).toBe(201);
    const kept = await svc.rt.ledger.get({ source: 'partner', partner: API_KEY_NAME, post_id: 22 });
    expect(kept!.record!.report.title).toBe(title);
  });
});

// Last: its posts are stored, and the tests above find the ledger empty.
describe('a connection that carries more than one request', () => {
  const post = (postId: number) => {
    const body = JSON.stringify(report(postId));
    return `POST /feeds/partner HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${API_KEY}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  };
  /** The statuses of every answer on the connection, in order (each begins where the body before it ends). */
  const statuses = (text: string) => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
  const repeatStatus = async (postId: number) =>
    (await fetch(`${svc.url}/feeds/partner`, { method: 'POST', headers: { 'X-Api-Key': API_KEY, 'Content-Type': 'application/json' }, body: JSON.stringify(report(postId)) })).status;

  it('a malformed request pipelined after a valid post: the post gets its own 201 first, then the 400', async () => {
    const res = await rawRequest(svc.url, [`${post(7102)}GARBAGE\r\n\r\n`]);
    expect(statuses(res.text)).toEqual([201, 400]);
    expect(res.closed).toBe(true);
    expect(await repeatStatus(7102)).toBe(200);
  });

  it('more bytes after the malformed request, while the answer before it is still being made: one refusal, after that answer', async () => {
    const { port } = new URL(svc.url);
    const socket = net.connect(Number(port), '127.0.0.1');
    socket.on('error', () => undefined);
    const received: Buffer[] = [];
    socket.on('data', (d: Buffer) => received.push(d));
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    const refusals = () => lines.filter((l) => l.includes('request refused by the HTTP parser')).length;
    const before = refusals();
    // The post's answer waits for its acceptance; each later write meets the parser's error again.
    socket.write(`${post(7104)}GARBAGE\r\n\r\n`);
    for (const more of ['MORE GARBAGE\r\n\r\n', 'AND MORE\r\n\r\n']) {
      await new Promise((r) => setTimeout(r, 1));
      if (!socket.destroyed) socket.write(more);
    }
    await closed;
    expect(statuses(Buffer.concat(received).toString('latin1'))).toEqual([201, 400]);
    expect(refusals() - before).toBe(1);
  });

  it('two reads pipelined before one whose headers are too large: 200, 200, then 431', async () => {
    const read = `GET /reports/archive/count?${WINDOW} HTTP/1.1\r\nHost: x\r\nUser-Agent: t\r\n\r\n`;
    const res = await rawRequest(svc.url, [`${read}${read}GET /cities HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20 * 1024)}\r\n\r\n`]);
    expect(statuses(res.text)).toEqual([200, 200, 431]);
    expect(res.closed).toBe(true);
  });

  it("a post whose chunked body turns malformed: the refusal is that post's own, and nothing is stored", async () => {
    const body = JSON.stringify(report(7103));
    const res = await rawRequest(svc.url, [
      `POST /feeds/partner HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${API_KEY}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${(10).toString(16)}\r\n${body.slice(0, 10)}\r\nZZ\r\n`,
    ]);
    expect(statuses(res.text)).toEqual([400]);
    expect(res.closed).toBe(true);
    expect(await repeatStatus(7103)).toBe(201);
  });
});
