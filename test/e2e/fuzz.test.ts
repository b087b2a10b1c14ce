// Bad input on purpose: a generated matrix of every feed field and query
// parameter, then random bodies, queries and headers (fast-check). Never a
// 5xx, and nothing stored from an invalid body.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { request as httpRequest } from 'node:http';
import { acceptedPkeys, API_KEY, report, startTestService, testConfig, testRuntime, type TestService } from '../support/env.js';

let svc: TestService;
beforeAll(async () => {
  // No worker, and limits out of the way: this is about validation.
  svc = await startTestService(
    await testRuntime(await testConfig('embedded', undefined, { RATE_LIMIT_FEED_PER_MINUTE: '1000000', RATE_LIMIT_READ_PER_MINUTE: '1000000' })),
    { worker: false, reconcile: false },
  );
});
afterAll(async () => {
  await svc?.stop();
});

function send(method: string, path: string, headers: Record<string, string>, body?: string | Buffer): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${svc.url}${path}`, { method, headers }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, body: text }));
    });
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

/**
 * The status of a GET, its answer read for at most a quarter of a second and then hung up on (an
 * event stream never ends; a hang-up on any answer must stop nothing but that answer).
 */
function statusOf(path: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${svc.url}${path}`, { headers }, (res) => {
      const cut = setTimeout(() => {
        req.destroy();
        resolve(res.statusCode!);
      }, 250);
      res.resume();
      res.on('end', () => {
        clearTimeout(cut);
        resolve(res.statusCode!);
      });
    });
    req.on('error', reject);
    req.end();
  });
}

const post = (body: unknown) => send('POST', '/feeds/partner', { 'Content-Type': 'application/json', 'X-Api-Key': API_KEY }, JSON.stringify(body));

const FIELDS: Record<string, { wrongType: unknown; outOfRange?: unknown; empty: unknown; huge: unknown }> = {
  post_id: { wrongType: true, outOfRange: -1, empty: '', huge: '9'.repeat(400) },
  created_at: { wrongType: 20261121, outOfRange: '2026-13-01T00:00:00Z', empty: '', huge: `2026-11-21T00:00:00Z${'0'.repeat(5000)}` },
  title: { wrongType: ['a'], empty: 7, huge: 't'.repeat(501) },
  text: { wrongType: { a: 1 }, empty: null, huge: 't'.repeat(10_001) },
  image_url: { wrongType: 5, outOfRange: 'ftp://x.example/a.png', empty: '', huge: `https://x.example/${'a'.repeat(3000)}` },
  partner_city: { wrongType: 1, outOfRange: 'Cebu', empty: '', huge: 'Q'.repeat(5000) },
  disaster_type: { wrongType: false, outOfRange: 'typhoon', empty: '', huge: 'f'.repeat(5000) },
  location: { wrongType: 'here', outOfRange: { lat: 91, lng: 181 }, empty: {}, huge: { lat: 1e308 * 10, lng: 0 } },
  'location.lat': { wrongType: '14.6', outOfRange: -90.0001, empty: null, huge: 1e300 },
  'location.lng': { wrongType: [121], outOfRange: 180.5, empty: null, huge: -1e300 },
};
const REQUIRED = new Set(['post_id', 'created_at', 'partner_city', 'disaster_type', 'location', 'location.lat', 'location.lng']);

function withField(field: string, value: unknown | undefined): Record<string, unknown> {
  const body = report(4242, { title: 'ok', text: 'ok', image_url: 'https://img.example.org/1.jpg' }) as Record<string, any>;
  if (field.startsWith('location.')) {
    const key = field.split('.')[1]!;
    body.location = { ...body.location };
    if (value === undefined) delete body.location[key];
    else body.location[key] = value;
  } else if (value === undefined) delete body[field];
  else body[field] = value;
  return body;
}

describe('the feed body matrix', () => {
  const cases: [string, string, unknown][] = [];
  for (const [field, v] of Object.entries(FIELDS)) {
    if (REQUIRED.has(field)) cases.push([field, 'missing', undefined]);
    cases.push([field, 'wrong type', v.wrongType]);
    if ('outOfRange' in v) cases.push([field, 'out of range', v.outOfRange]);
    cases.push([field, 'empty', v.empty]);
    cases.push([field, 'huge', v.huge]);
  }
  it.each(cases)('%s %s → 400 naming it, nothing stored', async (field, _kind, value) => {
    const res = await post(withField(field, value));
    expect(res.status, res.body).toBe(400);
    const details = JSON.parse(res.body).details as { field: string }[];
    const named = details.map((d) => d.field);
    // JSON has no Infinity: a huge number that overflows becomes null, and nested problems may name the parent.
    expect(named.some((f) => f === field || f === field.split('.')[0] || field.startsWith(`${f}.`) || f.startsWith(`${field}.`))).toBe(true);
    expect(await acceptedPkeys(svc.rt)).toEqual([]);
  });

  it('an extra property at the top or in location → 400 naming it', async () => {
    for (const body of [{ ...report(1), source: 'x' }, { ...report(1), location: { lat: 14.6, lng: 121, accuracy: 5 } }]) {
      const res = await post(body);
      expect(res.status).toBe(400);
      expect(JSON.parse(res.body).details.map((d: { field: string }) => d.field).join()).toMatch(/source|location\.accuracy/);
    }
    expect(await acceptedPkeys(svc.rt)).toEqual([]);
  });
});

describe('the query matrix', () => {
  const UA = { 'User-Agent': 'fuzz/1.0' };
  const base = { start: '2026-11-21T00:00:00%2B0800', end: '2026-11-21T23:59:59%2B0800' };
  const PARAMS: Record<string, { malformed: string; unknownValue?: string }> = {
    start: { malformed: '2026-11-21' },
    end: { malformed: 'tomorrow' },
    admin: { malformed: '', unknownValue: 'PH-00' },
    geoformat: { malformed: '', unknownValue: 'wkt' },
    format: { malformed: '', unknownValue: 'xml' },
    bbox: { malformed: '1,2,x,4', unknownValue: '10,10,0,0' },
    limit: { malformed: '1.5', unknownValue: '100000' },
    cursor: { malformed: '%%%', unknownValue: 'eyJjIjoxfQ' },
  };
  const cases: [string, string, string][] = [];
  for (const [name, v] of Object.entries(PARAMS)) {
    if (name === 'start' || name === 'end') cases.push([name, 'missing', '']);
    cases.push([name, 'malformed', v.malformed]);
    if (v.unknownValue) cases.push([name, 'unknown value', v.unknownValue]);
  }
  it.each(cases)('%s %s → 400 naming it', async (name, kind, value) => {
    const params = { ...base } as Record<string, string>;
    if (kind === 'missing') delete params[name];
    else params[name] = value;
    const qs = Object.entries(params).map(([k, v]) => `${k}=${v}`).join('&');
    const res = await send('GET', `/reports/archive?${qs}`, UA);
    expect(res.status, res.body).toBe(400);
    expect(JSON.parse(res.body).details.map((d: { field: string }) => d.field)).toContain(name);
  });
});

describe('random input (fast-check)', () => {
  const anyJson = fc.jsonValue({ maxDepth: 3 });
  const reportLike = fc.record(
    {
      post_id: fc.oneof(fc.integer(), fc.string(), fc.double(), fc.constant(null)),
      created_at: fc.oneof(fc.date({ noInvalidDate: true }).map((d) => d.toISOString()), fc.string()),
      partner_city: fc.oneof(fc.constantFrom('Quezon City', 'Pampanga'), fc.string()),
      disaster_type: fc.oneof(fc.constant('flood'), fc.string()),
      location: fc.oneof(fc.record({ lat: fc.double(), lng: fc.double() }), anyJson),
      title: fc.oneof(fc.string(), anyJson),
      extra: anyJson,
    },
    { requiredKeys: [] },
  );

  it('random bodies to the feed: never a 5xx, and every 2xx body was valid', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(reportLike, anyJson), async (body) => {
        const res = await post(body);
        expect(res.status).toBeLessThan(500);
        if (res.status < 300) {
          const b = body as Record<string, unknown>;
          expect(Object.keys(b).every((k) => ['post_id', 'created_at', 'partner_city', 'disaster_type', 'location', 'title', 'text', 'image_url'].includes(k))).toBe(true);
        }
      }),
      { numRuns: 150 },
    );
    // Only valid bodies were stored: every stored record re-validates.
    const { parsePartnerReport } = await import('../../src/partners/partnerReport.js');
    for (const pkey of await acceptedPkeys(svc.rt)) {
      // No worker: every report is pending, and the ledger holds it whole.
      const record = (await svc.rt.ledger.lookup(pkey))!.record!;
      expect(() => parsePartnerReport({ ...record.report, title: record.report.title ?? undefined, text: record.report.text ?? undefined, image_url: record.report.image_url ?? undefined }, Date.parse(record.received_at))).not.toThrow();
    }
  });

  it('random raw bytes and content types to the feed: never a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 300 }), fc.constantFrom('application/json', 'text/plain', 'application/json; charset=latin1', ''), async (bytes, type) => {
        const headers: Record<string, string> = { 'X-Api-Key': API_KEY };
        if (type) headers['Content-Type'] = type;
        const res = await send('POST', '/feeds/partner', headers, Buffer.from(bytes));
        expect(res.status).toBeLessThan(500);
      }),
      { numRuns: 100 },
    );
  });

  it('every GET route the OpenAPI document lists, with its own parameters at random and odd headers: never a 5xx, and the process answers on', async () => {
    type Param = { name: string; in: string; schema?: { enum?: unknown[]; items?: { enum?: unknown[] } } };
    type Operation = { parameters?: (Param | { $ref: string })[] };
    const doc = JSON.parse((await send('GET', '/openapi.json', {})).body) as { paths: Record<string, { get?: Operation; parameters?: (Param | { $ref: string })[] }>; components?: { parameters?: Record<string, Param> } };
    const resolve = (p: Param | { $ref: string }): Param => ('$ref' in p ? doc.components!.parameters![p.$ref.split('/').pop()!]! : p);
    const routes = Object.entries(doc.paths)
      .filter(([, item]) => item.get)
      .map(([path, item]) => ({ path, query: [...(item.parameters ?? []), ...(item.get!.parameters ?? [])].map(resolve).filter((p) => p.in === 'query') }));
    // Every route of the contract, the archive's, the OGC API's, the releases' and the cities' among them.
    expect(routes.length).toBeGreaterThan(25);
    const odd = ['', '-1', '0', '1.5', '1e309', 'NaN', '%00', '%ff', 'x'.repeat(3000), '😀', '2026-02-30T00:00:00Z', '2026-11-21', '9999-12-31T23:59:59Z', '-180,-90,180,90', '1,2,3', '10,10,0,0', '../..', '2026-11-21T00:00:00Z/..', 'PH-QC', 'region', 'barangay', 'hour', '+08:00', '-99:00', 'EPSG:4326', '-created_at', '100000'];
    const valuesOf = (p: Param) => [...odd, ...[...(p.schema?.enum ?? []), ...(p.schema?.items?.enum ?? [])].map(String)];
    const headers: Record<string, string>[] = [{}, { 'Accept-Encoding': 'gzip' }, { 'Accept-Encoding': 'br;q=abc, gzip;q=-1' }, { 'Accept-Encoding': '*;q=0' }, { 'If-None-Match': '"x", W/"y"' }, { Range: 'bytes=abc' }, { Range: 'bytes=5-1' }, { Range: 'bytes=0-1,3-4' }, { Accept: 'text/html' }, { 'Last-Event-ID': '99999999999999999999' }];
    const pathValues = ['x', '1', '%25', '..', 'PH-QC', 'partner-x-1', 'catalog.json', 'a'.repeat(300), '%F0%9F%98%80'];
    const get = async (route: string, pathValue: string, pairs: [string, string][], extra: Record<string, string>) => {
      const qs = pairs.map(([k, v]) => `${k}=${encodeURIComponent(v).replace(/%25(00|ff)/g, '%$1')}`).join('&');
      const status = await statusOf(`${route.replace(/\{[^}]+\}/g, pathValue)}${qs ? `?${qs}` : ''}`, { 'User-Agent': 'fuzz/1.0', ...extra });
      expect(status, `${route} ${qs} ${JSON.stringify(extra)}`).toBeLessThan(500);
    };
    for (const route of routes) {
      // Each odd header on each route, then its parameters at random.
      for (const extra of headers) await get(route.path, 'x', [], extra);
      const pair = route.query.length === 0 ? fc.constant(undefined) : fc.constantFrom(...route.query).chain((p) => fc.tuple(fc.constant(p.name), fc.oneof(fc.constantFrom(...valuesOf(p)), fc.string())));
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...pathValues), fc.array(pair, { maxLength: 5 }), fc.constantFrom(...headers), async (pathValue, pairs, extra) =>
          get(route.path, pathValue, pairs.filter((p): p is [string, string] => p !== undefined), extra),
        ),
        { numRuns: 12 },
      );
    }
    expect((await send('GET', '/health', {})).status).toBe(200);
  });

  it('random query strings and headers to the GET endpoints: never a 5xx', async () => {
    const key = fc.constantFrom('start', 'end', 'admin', 'geoformat', 'format', 'bbox', 'limit', 'cursor', 'x', 'START');
    const value = fc.oneof(fc.string(), fc.constantFrom('2026-11-21T00:00:00%2B0800', '2026-11-21T00:00:00+0800', 'PH-QC', 'geojson', 'csv', 'parquet', '0,0,1,1', '5'));
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('/reports/archive', '/reports/archive/count', '/cities'),
        fc.array(fc.tuple(key, value), { maxLength: 6 }),
        fc.option(fc.string({ maxLength: 40 })),
        async (path, pairs, agent) => {
          const qs = pairs.map(([k, v]) => `${k}=${encodeURIComponent(v).replace(/%25(2B|20)/g, '%$1')}`).join('&');
          const headers: Record<string, string> = {};
          if (agent !== null && /^[\x20-\x7e]*$/.test(agent)) headers['User-Agent'] = agent;
          const res = await send('GET', `${path}?${qs}`, headers);
          expect(res.status).toBeLessThan(500);
        },
      ),
      { numRuns: 150 },
    );
  });
});
