// The HTTP contract, rule by rule: status, headers and body shape for each,
// and every answer checked against the served OpenAPI document.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gunzipSync, brotliDecompressSync } from 'node:zlib';
import { request as httpRequest } from 'node:http';
import { Validator } from '@seriousme/openapi-schema-validator';
import { startEmulator } from '../support/fauxqs.js';
import { acceptedPkeys, allArchived, API_KEY, eventually, report, startTestService, testConfig, testRuntime, type TestService, pkeyOf } from '../support/env.js';
import { OpenApiChecker } from '../support/openapi.js';

let svc: TestService;
let checker: OpenApiChecker;
let doc: any;

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  raw: Buffer;
  body: any;
}

/** A raw HTTP request: full control of headers (fetch always adds its own). */
function call(base: string, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${base}${path}`, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const raw = Buffer.concat(chunks);
        const enc = res.headers['content-encoding'];
        const plain = raw.length === 0 ? raw : enc === 'gzip' ? gunzipSync(raw) : enc === 'br' ? brotliDecompressSync(raw) : raw;
        let parsed: unknown;
        if (/json/.test(String(res.headers['content-type'])) && plain.length > 0) parsed = JSON.parse(plain.toString('utf8'));
        resolve({ status: res.statusCode!, headers: res.headers, raw, body: parsed });
      });
    });
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

const UA = { 'User-Agent': 'contract-tests/1.0' };
const WINDOW = 'start=2026-11-21T00:00:00%2B0800&end=2026-11-21T23:59:59%2B0800';
const json = { 'Content-Type': 'application/json' };
/** Reports posted by the cases land outside WINDOW, so window answers stay fixed. */
const OTHER_DAY = { created_at: '2026-11-19T10:00:00Z' };
const keyed = { ...json, 'X-Api-Key': API_KEY };

beforeAll(async () => {
  svc = await startTestService(await testRuntime(await testConfig('embedded')));
  doc = (await call(svc.url, 'GET', '/openapi.json')).body;
  checker = new OpenApiChecker(doc);
  for (const id of [1, 2, 3]) await call(svc.url, 'POST', '/feeds/partner', keyed, JSON.stringify(report(id)));
  await allArchived(svc.rt);
});
afterAll(async () => {
  await svc?.stop();
});

interface Case {
  rule: string;
  method: string;
  path: string;
  /** The OpenAPI path the answer is checked against. */
  route: string;
  headers?: Record<string, string>;
  body?: string;
  status: number;
  expectHeaders?: Record<string, RegExp | undefined>;
  check?: (a: Answer) => void;
}

const errorCase = (a: Answer) => {
  expect(Object.keys(a.body).sort()).toEqual(['details', 'error', 'message', 'statusCode']);
  expect(a.body.statusCode).toBe(a.status);
  expect(a.raw.toString()).not.toMatch(/\bat \S+ \(|node_modules|\.ts:\d+|Error:/);
};
const fields = (...names: string[]) => (a: Answer) => expect(a.body.details.map((d: { field: string }) => d.field).sort()).toEqual(names.sort());

const CASES: Case[] = [
  { rule: 'created → 201', method: 'POST', path: '/feeds/partner', route: '/feeds/partner', headers: keyed, body: JSON.stringify(report(10, OTHER_DAY)), status: 201 },
  { rule: 'a body declared UTF-16 → 415 (JSON is UTF-8)', method: 'POST', path: '/feeds/partner', route: '/feeds/partner', headers: { ...keyed, 'Content-Type': 'application/json; charset=utf-16' }, body: JSON.stringify(report(11, OTHER_DAY)), status: 415, check: fields('Content-Type') },
  { rule: 'already exists → 200', method: 'POST', path: '/feeds/partner', route: '/feeds/partner', headers: keyed, body: JSON.stringify(report(10, OTHER_DAY)), status: 200 },
  { rule: 'no API key → 401', method: 'POST', path: '/feeds/partner', route: '/feeds/partner', headers: json, body: '{}', status: 401, check: fields('X-Api-Key') },
  { rule: 'unknown API key → 403', method: 'POST', path: '/feeds/partner', route: '/feeds/partner', headers: { ...json, 'X-Api-Key': 'x'.repeat(20) }, body: '{}', status: 403 },
  { rule: 'not JSON → 415', method: 'POST', path: '/feeds/partner', route: '/feeds/partner', headers: { 'Content-Type': 'text/csv', 'X-Api-Key': API_KEY }, body: 'a,b', status: 415 },
  { rule: 'over 64 KiB → 413', method: 'POST', path: '/feeds/partner', route: '/feeds/partner', headers: keyed, body: JSON.stringify(report(11, { ...OTHER_DAY, text: 'x'.repeat(66_000) })), status: 413 },
  { rule: 'malformed JSON → 400', method: 'POST', path: '/feeds/partner', route: '/feeds/partner', headers: keyed, body: '{"post_id":', status: 400 },
  { rule: 'every body problem in details', method: 'POST', path: '/feeds/partner', route: '/feeds/partner', headers: keyed, body: JSON.stringify({ post_id: -1, extra: 1 }), status: 400, check: fields('post_id', 'extra', 'created_at', 'partner_city', 'disaster_type', 'location') },
  { rule: 'a query parameter on the feed → 400, and nothing stored', method: 'POST', path: '/feeds/partner?admn=PH-QC', route: '/feeds/partner', headers: keyed, body: JSON.stringify(report(13, OTHER_DAY)), status: 400, check: fields('admn') },
  { rule: 'the same report without it → 201: the refused one was not stored', method: 'POST', path: '/feeds/partner', route: '/feeds/partner', headers: keyed, body: JSON.stringify(report(13, OTHER_DAY)), status: 201 },
  { rule: 'a query parameter on a retraction → 400', method: 'DELETE', path: '/feeds/partner/13?reason=x', route: '/feeds/partner/{post_id}', headers: { 'X-Api-Key': API_KEY }, status: 400, check: fields('reason') },
  { rule: 'a post_id in the path that is not an integer → 400 naming it', method: 'DELETE', path: '/feeds/partner/13a', route: '/feeds/partner/{post_id}', headers: { 'X-Api-Key': API_KEY }, status: 400, check: fields('post_id') },
  { rule: 'a post_id in the path beyond 2^53-1 → 400 naming it', method: 'DELETE', path: '/feeds/partner/9007199254740992', route: '/feeds/partner/{post_id}', headers: { 'X-Api-Key': API_KEY }, status: 400, check: fields('post_id') },
  { rule: 'a post_id in the path with leading zeros is the same integer: its report retracted → 200', method: 'DELETE', path: '/feeds/partner/0013', route: '/feeds/partner/{post_id}', headers: { 'X-Api-Key': API_KEY }, status: 200, check: (a) => expect(a.body).toMatchObject({ post_id: 13, retracted: true }) },
  { rule: 'a query parameter on an operation that takes none → 400', method: 'GET', path: '/health?verbose=1', route: '', status: 400, check: fields('verbose') },
  { rule: 'the OpenAPI document in brotli when asked: the same document', method: 'GET', path: '/openapi.json', route: '', headers: { 'Accept-Encoding': 'br' }, status: 200, expectHeaders: { 'content-encoding': /^br$/, vary: /Accept-Encoding/ }, check: (a) => expect(a.body).toEqual(doc) },
  { rule: 'a query parameter on the OpenAPI document → 400', method: 'GET', path: '/openapi.json?v=2', route: '', status: 400, check: fields('v') },
  { rule: 'unknown path → 404', method: 'GET', path: '/nowhere', route: '', status: 404 },
  { rule: 'wrong method → 405 with Allow', method: 'PUT', path: '/reports/archive', route: '', status: 405, expectHeaders: { allow: /^GET, HEAD, OPTIONS$/ } },
  { rule: 'GET on the feed → 405 with Allow: POST', method: 'GET', path: '/feeds/partner', route: '', status: 405, expectHeaders: { allow: /^POST$/ } },
  { rule: 'archive without User-Agent → 400', method: 'GET', path: `/reports/archive?${WINDOW}`, route: '/reports/archive', status: 400, check: fields('User-Agent') },
  { rule: 'unknown query parameter → 400', method: 'GET', path: `/reports/archive?${WINDOW}&admn=PH-QC`, route: '/reports/archive', headers: UA, status: 400, check: fields('admn') },
  { rule: 'an end to the second covers all of it: a start inside that second → 200', method: 'GET', path: '/reports/archive?start=2026-11-21T23:59:59.500Z&end=2026-11-21T23:59:59Z&geoformat=geojson', route: '/reports/archive', headers: UA, status: 200, check: (a) => expect(a.body.result.features).toEqual([]) },
  { rule: 'a path segment that is not valid percent-encoding → 400 naming it', method: 'GET', path: '/cities/%ZZ/local-areas', route: '/cities/{code}/local-areas', status: 400, check: (a) => expect(a.body.details).toEqual([{ in: 'path', field: '(path)', message: 'is not valid percent-encoding' }]) },
  { rule: 'a parameter given twice → 400 saying so, not that it is missing', method: 'GET', path: '/reports/archive?start=2026-11-21T00:00:00Z&start=2026-11-21T01:00:00Z&end=2026-11-21T02:00:00Z', route: '/reports/archive', headers: UA, status: 400, check: (a) => expect(a.body.details).toEqual([{ in: 'query', field: 'start', message: 'must be given once, as a plain value' }]) },
  { rule: 'end before start → 400', method: 'GET', path: '/reports/archive?start=2026-11-21T00:00:00%2B0800&end=2026-11-20T00:00:00%2B0800', route: '/reports/archive', headers: UA, status: 400, check: fields('end') },
  { rule: 'window over ARCHIVE_MAX_WINDOW → 400', method: 'GET', path: '/reports/archive?start=2024-01-01T00:00:00%2B0800&end=2026-11-20T00:00:00%2B0800', route: '/reports/archive', headers: UA, status: 400, check: fields('end') },
  { rule: 'admin not a city code → 400', method: 'GET', path: `/reports/archive?${WINDOW}&admin=Manila`, route: '/reports/archive', headers: UA, status: 400, check: fields('admin') },
  { rule: 'archive geoformat unknown → 400', method: 'GET', path: `/reports/archive?${WINDOW}&geoformat=kml`, route: '/reports/archive', headers: UA, status: 400, check: fields('geoformat') },
  { rule: 'archive format unknown → 400', method: 'GET', path: `/reports/archive?${WINDOW}&format=xlsx`, route: '/reports/archive', headers: UA, status: 400, check: fields('format') },
  { rule: 'bad bbox → 400', method: 'GET', path: `/reports/archive?${WINDOW}&bbox=1,2,3`, route: '/reports/archive', headers: UA, status: 400, check: fields('bbox') },
  { rule: 'limit out of range → 400', method: 'GET', path: `/reports/archive?${WINDOW}&limit=0`, route: '/reports/archive', headers: UA, status: 400, check: fields('limit') },
  { rule: 'a + sent raw reads as +', method: 'GET', path: '/reports/archive?start=2026-11-21T00:00:00+0800&end=2026-11-21T23:59:59+0800&geoformat=geojson', route: '/reports/archive', headers: UA, status: 200, check: (a) => expect(a.body.result.features).toHaveLength(3) },
  { rule: 'cities format only json → 400', method: 'GET', path: '/cities?format=xml', route: '/cities', status: 400, check: fields('format') },
  { rule: 'cities geoformat unknown → 400', method: 'GET', path: '/cities?geoformat=wkt', route: '/cities', status: 400, check: fields('geoformat') },
  { rule: 'cities TopoJSON by default, CORS, strong ETag, Cache-Control', method: 'GET', path: '/cities', route: '/cities', status: 200, expectHeaders: { 'access-control-allow-origin': /^\*$/, etag: /^"[0-9a-f]{24}-[A-Za-z0-9]{10}-topojson"$/, 'cache-control': /max-age=\d+/ }, check: (a) => expect(a.body.result.type).toBe('Topology') },
  { rule: 'a window reaching past the maximum span → 400', method: 'GET', path: `/reports/archive?start=2026-11-21T00:00:00%2B0800&end=2999-01-01T00:00:00%2B0000&geoformat=geojson`, route: '/reports/archive', headers: UA, status: 400 },
  { rule: 'closed archive window: stored and revalidated (a retraction leaves caches at once), strong ETag', method: 'GET', path: `/reports/archive?${WINDOW}&geoformat=geojson`, route: '/reports/archive', headers: UA, status: 200, expectHeaders: { 'cache-control': /^public, no-cache$/, etag: /^"[A-Za-z0-9_-]{32}"$/, 'access-control-allow-origin': /^\*$/ } },
  { rule: 'closed archive window as Parquet: a weak ETag (the same rows may be laid out otherwise once ready texts are written)', method: 'GET', path: `/reports/archive?${WINDOW}&format=parquet`, route: '/reports/archive', headers: UA, status: 200, expectHeaders: { etag: /^W\/"[A-Za-z0-9_-]{32}"$/ } },
  { rule: 'count', method: 'GET', path: `/reports/archive/count?${WINDOW}`, route: '/reports/archive/count', headers: UA, status: 200, check: (a) => expect(a.body.result.count).toBe(3) },
  { rule: 'count rejects archive-only parameters', method: 'GET', path: `/reports/archive/count?${WINDOW}&geoformat=geojson`, route: '/reports/archive/count', headers: UA, status: 400, check: fields('geoformat') },
  { rule: 'health', method: 'GET', path: '/health', route: '/health', status: 200 },
  { rule: 'ready', method: 'GET', path: '/ready', route: '/ready', status: 200 },
  { rule: 'request id generated', method: 'GET', path: '/health', route: '/health', status: 200, expectHeaders: { 'x-request-id': /^[0-9a-f-]{36}$/ } },
  { rule: 'request id echoed', method: 'GET', path: '/health', route: '/health', headers: { 'X-Request-Id': 'abc-123' }, status: 200, expectHeaders: { 'x-request-id': /^abc-123$/ } },
  { rule: 'CORS preflight on a GET endpoint', method: 'OPTIONS', path: '/reports/archive', route: '', headers: { Origin: 'https://dashboard.example.org', 'Access-Control-Request-Method': 'GET' }, status: 204, expectHeaders: { 'access-control-allow-origin': /^\*$/, 'access-control-allow-methods': /GET/, 'access-control-expose-headers': /Link/ } },
  { rule: 'a write to the static pages → 405 with Allow', method: 'PUT', path: '/docs/index.html', route: '', status: 405, expectHeaders: { allow: /^GET, HEAD$/ } },
  { rule: "a preflight allows the route's own methods", method: 'OPTIONS', path: '/reports/stream', route: '', headers: { Origin: 'https://dashboard.example.org', 'Access-Control-Request-Method': 'GET' }, status: 204, expectHeaders: { 'access-control-allow-methods': /^GET, HEAD, OPTIONS$/, 'access-control-allow-headers': /(^|, )Last-Event-ID(,|$)/ } },
  { rule: 'a preflight of a path that is not there → 404', method: 'OPTIONS', path: '/nowhere', route: '', headers: { Origin: 'https://dashboard.example.org', 'Access-Control-Request-Method': 'GET' }, status: 404 },
  { rule: 'a query the request layer refuses (a secret in it) is a 400 a page of any origin can read', method: 'GET', path: `/reports/archive/count?${WINDOW}&token=abc`, route: '', headers: { ...UA, Origin: 'https://dashboard.example.org' }, status: 400, expectHeaders: { 'access-control-allow-origin': /^\*$/ } },
  { rule: 'no CORS on the partner feed, refused by the request layer either', method: 'POST', path: '/feeds/partner?token=abc', route: '', headers: { ...keyed, Origin: 'https://evil.example.org' }, body: JSON.stringify(report(13, OTHER_DAY)), status: 400, expectHeaders: { 'access-control-allow-origin': undefined } },
  { rule: 'no CORS on the partner feed', method: 'POST', path: '/feeds/partner', route: '/feeds/partner', headers: { ...keyed, Origin: 'https://evil.example.org' }, body: JSON.stringify(report(12, OTHER_DAY)), status: 201, expectHeaders: { 'access-control-allow-origin': undefined } },
];

describe('conformance', () => {
  it.each(CASES)('$rule', async (c) => {
    const a = await call(svc.url, c.method, c.path, c.headers, c.body);
    expect(a.status, a.raw.toString().slice(0, 300)).toBe(c.status);
    for (const [name, pattern] of Object.entries(c.expectHeaders ?? {})) {
      if (pattern === undefined) expect(a.headers[name]).toBeUndefined();
      else expect(String(a.headers[name])).toMatch(pattern);
    }
    if (a.status >= 400) errorCase(a);
    c.check?.(a);
    if (c.route) checker.check(c.method, c.route, a.status, String(a.headers['content-type'] ?? ''), a.body);
  });

  it('a window still open has a short Cache-Control and no ETag', async () => {
    const now = new Date();
    const start = new Date(now.getTime() - 3_600_000).toISOString().slice(0, 19);
    const end = new Date(now.getTime() + 600_000).toISOString().slice(0, 19);
    const a = await call(svc.url, 'GET', `/reports/archive?start=${start}%2B0000&end=${end}%2B0000`, UA);
    expect(a.status).toBe(200);
    expect(a.headers['cache-control']).toMatch(/max-age=10\b/);
    expect(a.headers.etag).toBeUndefined();
  });

  it('HEAD of a whole window answers its headers without building the answer', async () => {
    const archive = svc.rt.archive;
    const open = archive.open.bind(archive);
    const built: string[] = [];
    archive.open = async (...args) => {
      const window = await open(...args);
      for (const name of ['batches', 'parquet', 'arrow', 'page'] as const) {
        const method = (window[name] as (...a: unknown[]) => unknown).bind(window);
        (window as unknown as Record<string, unknown>)[name] = (...a: unknown[]) => (built.push(name), method(...a));
      }
      return window;
    };
    try {
      for (const format of ['geojson', 'csv', 'parquet', 'arrow']) {
        const res = await fetch(`${svc.url}/reports/archive?${WINDOW}&format=${format}`, { method: 'HEAD', headers: UA });
        expect([format, res.status, res.headers.get('etag') !== null, res.headers.get('content-disposition')]).toEqual([format, 200, true, expect.stringMatching(/filename=/)]);
      }
      expect(built).toEqual([]);
      // A GET builds it.
      expect((await fetch(`${svc.url}/reports/archive?${WINDOW}&format=csv`, { headers: UA })).status).toBe(200);
      expect(built).toEqual(['batches']);
    } finally {
      Reflect.deleteProperty(archive, 'open');
    }
  });

  it('If-None-Match answers 304 on /cities and on closed windows, per encoding, with no body and no Content-Encoding', async () => {
    for (const path of ['/cities?geoformat=geojson', `/reports/archive?${WINDOW}`, `/reports/archive/stats?${WINDOW}`, '/ogc/collections/cities/items', '/reports/cap.atom']) {
      for (const enc of ['identity', 'gzip', 'br']) {
        const first = await call(svc.url, 'GET', path, { ...UA, 'Accept-Encoding': enc });
        const etag = String(first.headers.etag);
        if (enc === 'identity') expect(etag).not.toMatch(/-(gz|br)"$/);
        else expect(etag).toMatch(enc === 'gzip' ? /-gz"$/ : /-br"$/);
        const again = await call(svc.url, 'GET', path, { ...UA, 'Accept-Encoding': enc, 'If-None-Match': etag });
        // The CAP feed's minute may turn between the two: asked once more.
        const answer = again.status === 200 && path === '/reports/cap.atom' ? await call(svc.url, 'GET', path, { ...UA, 'Accept-Encoding': enc, 'If-None-Match': String(again.headers.etag) }) : again;
        expect([path, enc, answer.status, answer.raw.length, answer.headers['content-encoding']]).toEqual([path, enc, 304, 0, undefined]);
      }
    }
  });

  it('every read that gives an ETag answers its If-None-Match with a 304 the document declares', async () => {
    const pkey = (await call(svc.url, 'GET', `/reports/archive?${WINDOW}&geoformat=geojson`, UA)).body.result.features[0].properties.pkey as string;
    const reads: [string, string][] = [
      [`/reports/archive/count?${WINDOW}`, '/reports/archive/count'],
      [`/reports/${pkey}`, '/reports/{pkey}'],
      [`/reports/${pkey}.cap`, '/reports/{pkey}.cap'],
      ['/reports/cap.atom', '/reports/cap.atom'],
      ['/releases', '/releases'],
      ['/ogc', '/ogc'],
      ['/ogc/conformance', '/ogc/conformance'],
      ['/ogc/api', '/ogc/api'],
      ['/ogc/collections', '/ogc/collections'],
      ['/ogc/collections/cities', '/ogc/collections/cities'],
      ['/ogc/collections/cities/items', '/ogc/collections/cities/items'],
      ['/ogc/collections/cities/items/PH-QC', '/ogc/collections/cities/items/{featureId}'],
    ];
    for (const [path, route] of reads) {
      const first = await call(svc.url, 'GET', path, UA);
      expect([path, first.status]).toEqual([path, 200]);
      const etag = String(first.headers.etag);
      expect([path, etag]).toEqual([path, expect.stringMatching(/^(W\/)?"/)]);
      const again = await call(svc.url, 'GET', path, { ...UA, 'If-None-Match': etag });
      // The CAP feed's minute may turn between the two: asked once more.
      const answer = again.status === 200 && route === '/reports/cap.atom' ? await call(svc.url, 'GET', path, { ...UA, 'If-None-Match': String(again.headers.etag) }) : again;
      expect([path, answer.status]).toEqual([path, 304]);
      checker.check('GET', route, 304, null, undefined);
    }
  });

  it('compresses with gzip or br when accepted, and the content is the same', async () => {
    const plain = await call(svc.url, 'GET', `/reports/archive?${WINDOW}&geoformat=geojson`, { ...UA, 'Accept-Encoding': 'identity' });
    expect(plain.headers['content-encoding']).toBeUndefined();
    for (const enc of ['gzip', 'br']) {
      for (const path of [`/reports/archive?${WINDOW}&geoformat=geojson`, '/cities?geoformat=geojson']) {
        const a = await call(svc.url, 'GET', path, { ...UA, 'Accept-Encoding': enc });
        expect(a.headers['content-encoding']).toBe(enc);
        expect(a.headers.vary).toMatch(/Accept-Encoding/);
        if (path.startsWith('/reports')) expect(a.body).toEqual(plain.body);
      }
    }
  });

  it('compresses answers built whole when accepted (the OGC API definition), each encoding its own ETag and 304', async () => {
    for (const path of ['/ogc/api']) {
      const plain = await call(svc.url, 'GET', path, { ...UA, 'Accept-Encoding': 'identity' });
      expect([path, plain.status, plain.headers['content-encoding']]).toEqual([path, 200, undefined]);
      expect(plain.raw.length).toBeGreaterThan(1024);
      const tags = new Set([String(plain.headers.etag)]);
      for (const enc of ['gzip', 'br']) {
        const a = await call(svc.url, 'GET', path, { ...UA, 'Accept-Encoding': enc });
        expect([path, a.headers['content-encoding'], a.headers.vary]).toEqual([path, enc, expect.stringMatching(/Accept-Encoding/)]);
        // The same text, fewer bytes.
        expect(enc === 'gzip' ? gunzipSync(a.raw).equals(plain.raw) : brotliDecompressSync(a.raw).equals(plain.raw)).toBe(true);
        expect(a.raw.length).toBeLessThan(plain.raw.length);
        const etag = String(a.headers.etag);
        tags.add(etag);
        const again = await call(svc.url, 'GET', path, { ...UA, 'Accept-Encoding': enc, 'If-None-Match': etag });
        expect([path, enc, again.status, again.raw.length]).toEqual([path, enc, 304, 0]);
      }
      expect(tags.size).toBe(3);
    }
  });

  it('every example in the document fits its own schema, and matches what the service answers', async () => {
    let examples = 0;
    for (const [path, methods] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
      for (const [method, op] of Object.entries(methods)) {
        for (const [status, response] of Object.entries(op.responses as Record<string, any>)) {
          const example = response.content?.['application/json']?.example;
          if (example === undefined) continue;
          checker.check(method, path, Number(status), 'application/json', example);
          examples += 1;
        }
      }
    }
    expect(examples).toBeGreaterThanOrEqual(5);
    // The documented feature has exactly the shape of a real one.
    const real = await call(svc.url, 'GET', `/reports/archive?${WINDOW}&geoformat=geojson`, UA);
    const documented = doc.paths['/reports/archive'].get.responses['200'].content['application/json'].example.result.features[0];
    const shape = (v: unknown): unknown => (Array.isArray(v) ? v.map(shape) : v && typeof v === 'object' ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, shape(x)])) : typeof v);
    const realFeature = real.body.result.features[0];
    expect(Object.keys(documented.properties)).toEqual(Object.keys(realFeature.properties));
    expect(shape({ ...documented, properties: { ...documented.properties, image_url: null, tags: null } })).toEqual(
      shape({ ...realFeature, properties: { ...realFeature.properties, image_url: null, tags: null } }),
    );
  });

  it('declares on every operation the answers any request may get before its route reads it, and Retry-After on every 429 and 503', async () => {
    const operations = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
      Object.entries(item)
        .filter(([method]) => ['get', 'head', 'post', 'delete'].includes(method))
        .map(([method, op]) => ({ path, method, responses: op.responses as Record<string, any> })),
    );
    expect(operations.length).toBeGreaterThan(20);
    for (const { path, method, responses } of operations) {
      for (const status of ['408', '417', '431']) expect(responses[status]?.content?.['application/json'], `${method} ${path} ${status}`).toBeDefined();
      for (const status of ['429', '503']) if (responses[status]) expect(responses[status].headers?.['Retry-After'], `${method} ${path} ${status}`).toBeDefined();
    }
    // As the service answers them: an Expect it does not know, headers past the limit.
    for (const path of ['/cities/levels', '/ogc/collections/reports/items']) {
      expect((await call(svc.url, 'GET', path, { 'User-Agent': 'contract-tests/1.0', Expect: 'teapot' })).status).toBe(417);
      expect((await call(svc.url, 'GET', path, { 'User-Agent': 'contract-tests/1.0', 'X-Big': 'a'.repeat(20_000) })).status).toBe(431);
    }
  });

  it('serves a valid OpenAPI 3.1 document and the docs page, offline', async () => {
    const validator = new Validator();
    const res = await validator.validate(doc);
    expect(res.errors ?? []).toEqual([]);
    expect(res.valid).toBe(true);
    expect(validator.version).toBe('3.1');
    const page = await call(svc.url, 'GET', '/docs/');
    expect(page.status).toBe(200);
    expect(page.raw.toString()).toMatch(/swagger-ui/);
    const init = await call(svc.url, 'GET', '/docs/swagger-initializer.js');
    expect(init.raw.toString()).toMatch(/\/openapi\.json/);
    const bundle = await call(svc.url, 'GET', '/docs/swagger-ui-bundle.js');
    expect(bundle.status).toBe(200);
  });
});

describe('rate limits', () => {
  let limited: TestService;
  beforeAll(async () => {
    limited = await startTestService(
      await testRuntime(await testConfig('embedded', undefined, { RATE_LIMIT_FEED_PER_MINUTE: '5', RATE_LIMIT_READ_PER_MINUTE: '3' })),
    );
  });
  afterAll(async () => {
    await limited?.stop();
  });

  it('per API key on the feed: 429 with Retry-After past the limit; every report that got a 2xx is kept, none of the others', async () => {
    const outcomes: number[] = [];
    for (let id = 100; id < 108; id++) {
      const a = await call(limited.url, 'POST', '/feeds/partner', keyed, JSON.stringify(report(id)));
      outcomes.push(a.status);
      if (a.status === 429) {
        expect(Number(a.headers['retry-after'])).toBeGreaterThan(0);
        errorCase(a);
        checker.check('POST', '/feeds/partner', 429, String(a.headers['content-type']), a.body);
      }
    }
    expect(outcomes).toEqual([201, 201, 201, 201, 201, 429, 429, 429]);
    expect(await acceptedPkeys(limited.rt)).toEqual([100, 101, 102, 103, 104].map((id) => pkeyOf(id)));
    // Another key has its own budget.
    const other = await call(limited.url, 'POST', '/feeds/partner', { ...json, 'X-Api-Key': 'other-key-0123456789abcdef' }, JSON.stringify(report(200)));
    expect(other.status).toBe(201);
  });

  it('per client on the GET endpoints; CORS preflights are not counted (a page sends one before its reads)', async () => {
    const preflight = { Origin: 'https://dashboard.example.org', 'Access-Control-Request-Method': 'GET', 'Access-Control-Request-Headers': 'if-none-match' };
    const preflights: number[] = [];
    for (let i = 0; i < 5; i++) preflights.push((await call(limited.url, 'OPTIONS', `/reports/archive?${WINDOW}&limit=${i + 1}`, preflight)).status);
    expect(preflights).toEqual([204, 204, 204, 204, 204]);
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await call(limited.url, 'GET', '/cities')).status);
    expect(statuses).toEqual([200, 200, 200, 429, 429]);
    const health = await call(limited.url, 'GET', '/health');
    expect(health.status).toBe(200);
  });
});

describe('503 when storage is down', () => {
  it('answers 503 with Retry-After in the error shape, and /ready turns 503 then back to 200', async () => {
    const emulator = await startEmulator();
    const down = await startTestService(await testRuntime(await testConfig('aws', emulator), emulator));
    expect((await call(down.url, 'GET', '/ready')).status).toBe(200);
    await emulator.stop();
    const post = await call(down.url, 'POST', '/feeds/partner', keyed, JSON.stringify(report(1)));
    expect(post.status).toBe(503);
    expect(post.headers['retry-after']).toBe('5');
    errorCase(post);
    checker.check('POST', '/feeds/partner', 503, String(post.headers['content-type']), post.body);
    const archive = await call(down.url, 'GET', `/reports/archive?${WINDOW}`, UA);
    expect(archive.status).toBe(503);
    // A readiness answer stands a second: the outage shows in the next one.
    const ready = await eventually(async () => {
      const answer = await call(down.url, 'GET', '/ready');
      return answer.status === 503 ? answer : undefined;
    }, 10_000, '/ready 503');
    expect(ready.body.message).toMatch(/object store unreachable/);
    checker.check('GET', '/ready', 503, String(ready.headers['content-type']), ready.body);

    await emulator.restart();
    const { bootstrap } = await import('../../src/main/bootstrap.js');
    await bootstrap(down.rt.config, { s3: emulator.s3, sqs: emulator.sqs });
    await eventually(async () => ((await call(down.url, 'GET', '/ready')).status === 200 ? true : undefined), 10_000, '/ready back to 200');
    await down.stop();
    await emulator.stop();
  });
});
