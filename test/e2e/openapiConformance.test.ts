// The served OpenAPI document against the service, the way an OpenAPI fuzzer
// (schemathesis --checks all) reads it: values generated from each parameter's
// schema that the document calls invalid get a 400 naming the parameter; values it
// calls valid are answered, refused only by a rule the parameter's description
// states in words (a window's length, end before start, …); and every answer is
// declared and fits its documented schema. Deliberate differences are in the README
// (403 for an unknown key, the generated cases below say which rules are words only).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { request as httpRequest } from 'node:http';
import { API_KEY, getJson, report, startTestService, testConfig, testRuntime, type TestService } from '../support/env.js';
import { OpenApiChecker } from '../support/openapi.js';

let svc: TestService;
let doc: any;
let checker: OpenApiChecker;
let postId = 1_000_000;

beforeAll(async () => {
  svc = await startTestService(
    await testRuntime(await testConfig('embedded', undefined, { RATE_LIMIT_FEED_PER_MINUTE: '1000000', RATE_LIMIT_READ_PER_MINUTE: '1000000' })),
    { worker: false, reconcile: false },
  );
  doc = (await getJson(`${svc.url}/openapi.json`)).body;
  checker = new OpenApiChecker(doc);
});
afterAll(async () => {
  await svc?.stop();
});

/** Operations and a base query every case varies one parameter of. */
const OPERATIONS: { path: string; base: Record<string, string> }[] = [
  { path: '/reports/archive', base: { start: '2026-11-21T00:00:00+0800', end: '2026-11-21T23:59:59+0800', geoformat: 'geojson' } },
  { path: '/reports/archive/count', base: { start: '2026-11-21T00:00:00+0800', end: '2026-11-21T23:59:59+0800' } },
  { path: '/cities', base: {} },
  { path: '/ogc/collections/reports/items', base: {} },
  { path: '/ogc/collections/local-areas/items', base: {} },
];

/**
 * Rules a pattern or a range cannot say, by parameter (or by operation and parameter): the message the service gives, and the
 * words of the parameter's description that state the rule (checked to be there).
 */
const WORDED_RULES: Record<string, { message: RegExp; documented: string; status?: number }[]> = {
  start: [
    { message: /from 1970-01-01T00:00:00Z to 9999/, documented: 'once the offset is applied' },
    { message: /must not be before start/, documented: 'end not before start' },
    { message: /may span at most/, documented: 'ARCHIVE_MAX_WINDOW' },
  ],
  end: [
    { message: /must not be before start/, documented: 'not before start' },
    { message: /may span at most/, documented: 'ARCHIVE_MAX_WINDOW' },
    { message: /from 1970-01-01T00:00:00Z to 9999/, documented: 'same form and range as start' },
  ],
  bbox: [
    { message: /minimums must not exceed maximums|minimum latitude must not exceed|antimeridian/, documented: 'minimums' },
    { message: /latitudes (must be )?within ±90/, documented: 'latitudes within ±90' },
  ],
  datetime: [
    { message: /must not end before it starts/, documented: 'does not end before it starts' },
    { message: /from 1970-01-01T00:00:00Z to 9999/, documented: 'each end from 1970-01-01T00:00:00Z' },
  ],
  // A bound on the answer's size, stated in the operation's description.
  '/reports/archive/stats start': [{ message: /buckets; at most/, documented: 'At most 10,000 buckets' }],
  '/reports/archive/stats end': [{ message: /buckets; at most/, documented: 'At most 10,000 buckets' }],
  '/cities/outlines level': [{ message: /^(the current boundary version|boundary version [0-9a-f]{24}) has no (region|province) level/, documented: 'A level the current boundary version has' }],
  '/reports/archive/stats by': [{ message: /^(the current boundary version|boundary version [0-9a-f]{24}) has no (regions|provinces)/, documented: 'need a version that has them' }],
  '/reports/archive format': [{ message: /applies to format=json only/, documented: 'geoformat applies to format=json only' }],
  '/reports/archive geoformat': [{ message: /applies to format=json only/, documented: 'geoformat applies to format=json only' }],
  // A code of the current boundary version: the document cannot list them (they change with each version).
  admin: [{ message: /^must be one of: |^must be the code of a region, province or city of (the current boundaries|boundary version [0-9a-f]{24})/, documented: 'An unknown code is a 400' }],
  cursor: [{ message: /is not a cursor this service issued|holds a position outside/, documented: 'Opaque' }],
  // A well-formed id of a version the service no longer keeps (or never had): 410, declared by the operation.
  version: [{ message: /is not a boundary version this service serves/, documented: 'while the service still serves it', status: 410 }],
  updated_after: [
    { message: /must not be in the future/, documented: 'not in the future' },
    { message: /from 1970-01-01T00:00:00Z to 9999/, documented: 'from 1970-01-01T00:00:00Z once the offset is applied' },
    // Before the change history kept: 410 Gone (the client pulls in full), declared by the operation.
    { message: /change logs are kept/, documented: 'SYNC_RETENTION_DAYS', status: 410 },
  ],
};

async function get(path: string, query: Record<string, string>): Promise<{ status: number; body: any }> {
  const qs = new URLSearchParams(query).toString().replace(/\+/g, '%20');
  const res = await fetch(`${svc.url}${path}${qs ? `?${qs}` : ''}`, { headers: { 'User-Agent': 'conformance/1.0' } });
  const text = await res.text();
  const body = text && /json/.test(res.headers.get('content-type') ?? '') ? JSON.parse(text) : text;
  checker.check('GET', path, res.status, res.headers.get('content-type'), body);
  return { status: res.status, body };
}

/** Query-string values the schema accepts. */
function valid(schema: any): fc.Arbitrary<string> {
  if (schema.enum) return fc.constantFrom(...schema.enum.map(String));
  if (schema.type === 'integer') return fc.integer({ min: schema.minimum ?? -1e9, max: schema.maximum ?? 1e9 }).map(String);
  if (schema.type === 'array' && schema.oneOf) return fc.oneof(...(schema.oneOf as any[]).map((s) => valid({ ...schema, oneOf: undefined, ...s }))) as fc.Arbitrary<string>;
  if (schema.type === 'array') {
    return fc.array(fc.double({ min: schema.items.minimum ?? -1e6, max: schema.items.maximum ?? 1e6, noNaN: true, noDefaultInfinity: true }), { minLength: schema.minItems, maxLength: schema.maxItems }).map((a) => a.join(','));
  }
  if (schema.pattern) return fc.stringMatching(new RegExp(schema.pattern)).filter((s) => s.length <= (schema.maxLength ?? Infinity) && s.length >= (schema.minLength ?? 0));
  return fc.string({ minLength: schema.minLength ?? 0, maxLength: schema.maxLength ?? 40 });
}

/** Query-string values the schema refuses. */
function invalid(schema: any): fc.Arbitrary<string> | undefined {
  if (schema.enum) return fc.string({ maxLength: 12 }).filter((s) => !schema.enum.map(String).includes(s));
  if (schema.type === 'integer') {
    const outside: fc.Arbitrary<string>[] = [fc.constantFrom<string>('', 'ten', '1.5', '-', '1e3')];
    if (schema.minimum !== undefined) outside.push(fc.integer({ min: -1e9, max: schema.minimum - 1 }).map(String));
    if (schema.maximum !== undefined) outside.push(fc.integer({ min: schema.maximum + 1, max: 1e12 }).map(String));
    return fc.oneof(...outside);
  }
  if (schema.type === 'array') {
    const lengths: number[] = schema.oneOf ? schema.oneOf.map((s: any) => s.minItems) : [schema.minItems];
    const min = Math.min(...lengths);
    const max = schema.oneOf ? Math.max(...schema.oneOf.map((s: any) => s.maxItems)) : schema.maxItems;
    const gaps = Array.from({ length: max - min + 1 }, (_, i) => min + i).filter((n) => !lengths.includes(n) && n > (schema.oneOf ? 0 : schema.maxItems));
    return fc.oneof(
      ...gaps.map((n) => fc.array(fc.double({ min: -180, max: 180, noNaN: true }), { minLength: n, maxLength: n }).map((a) => a.join(','))),
      fc.array(fc.double({ min: -180, max: 180, noNaN: true }), { minLength: 1, maxLength: min - 1 }).map((a) => a.join(',')),
      fc.array(fc.double({ min: -180, max: 180, noNaN: true }), { minLength: max + 1, maxLength: 9 }).map((a) => a.join(',')),
      fc.constantFrom('a,b,c,d', '1,2,,4', '', '200,0,201,1', '-181,0,0,1'),
    );
  }
  if (schema.pattern) {
    const re = new RegExp(schema.pattern);
    return fc.oneof(fc.string({ maxLength: 40 }), fc.constantFrom('', ' ', '2026-13-01T00:00:00Z', '2026-02-30T00:00:00Z', '2026-11-21T24:00:00Z', '2026-11-21T00:00:00+99:99', '0099-06-15T00:00:00Z', '1,2,3,4,5')).filter((s) => !re.test(s));
  }
  return undefined;
}

describe.each(OPERATIONS)('GET $path against its parameters in the document', ({ path, base }) => {
  const params = () => (doc.paths[path].get.parameters as any[]).filter((p) => p.in === 'query');

  it('values the document calls invalid get a 400 naming the parameter', async () => {
    for (const param of params()) {
      const arb = invalid(param.schema);
      if (!arb) continue;
      await fc.assert(
        fc.asyncProperty(arb, async (value) => {
          const { status, body } = await get(path, { ...base, [param.name]: value });
          expect(status, `${param.name}=${JSON.stringify(value)}`).toBe(400);
          expect(body.details.map((d: any) => d.field), `${param.name}=${JSON.stringify(value)}`).toContain(param.name);
        }),
        { numRuns: 25 },
      );
    }
  });

  it('values the document calls valid are answered, or refused only by a rule its description states', async () => {
    for (const param of params()) {
      const rules = WORDED_RULES[`${path} ${param.name}`] ?? WORDED_RULES[param.name] ?? [];
      for (const rule of rules) expect(param.description, `${path} ${param.name}`).toContain(rule.documented);
      await fc.assert(
        fc.asyncProperty(valid(param.schema), async (value) => {
          const { status, body } = await get(path, { ...base, [param.name]: value });
          const where = `${param.name}=${JSON.stringify(value)}`;
          if (status === 200) return;
          expect([400, ...rules.flatMap((r) => r.status ?? [])], where).toContain(status);
          for (const d of body.details) {
            expect(rules.some((r) => r.message.test(d.message)), `${where}: ${d.field} ${d.message}`).toBe(true);
          }
        }),
        { numRuns: 25 },
      );
    }
  });
});

describe('the archive window and the feed body', () => {
  const pattern = () => new RegExp(doc.paths['/reports/archive'].get.parameters.find((p: any) => p.name === 'start').schema.pattern);

  it('any instant the pattern allows is a window of its own (start = end), answered 200 unless before 1970 in UTC', async () => {
    await fc.assert(
      fc.asyncProperty(fc.stringMatching(pattern()), async (t) => {
        const { status, body } = await get('/reports/archive/count', { start: t, end: t });
        if (status === 400) expect(body.details.every((d: any) => /from 1970-01-01T00:00:00Z/.test(d.message)), `${t}: ${JSON.stringify(body.details)}`).toBe(true);
        else expect(status, t).toBe(200);
      }),
      { numRuns: 100 },
    );
  });

  it('created_at: what the document allows is taken (or refused as in the future or before 1970, as it says), what it refuses is a 400', async () => {
    const schema = doc.components.schemas.PartnerReport.properties.created_at;
    const post = async (createdAt: string) => {
      const res = await fetch(`${svc.url}/feeds/partner`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Api-Key': API_KEY },
        body: JSON.stringify(report(postId++, { created_at: createdAt })),
      });
      const body = (await res.json()) as any;
      checker.check('POST', '/feeds/partner', res.status, res.headers.get('content-type'), body);
      return { status: res.status, body };
    };
    await fc.assert(
      fc.asyncProperty(valid(schema), async (t) => {
        const { status, body } = await post(t);
        if (status === 400) expect(body.details.map((d: any) => d.message)[0], t).toMatch(/future|before 1970/);
        else expect(status, t).toBe(201);
      }),
      { numRuns: 60 },
    );
    await fc.assert(
      fc.asyncProperty(invalid(schema)!, async (t) => {
        const { status, body } = await post(t);
        expect(status, t).toBe(400);
        expect(body.details.map((d: any) => d.field)).toEqual(['created_at']);
      }),
      { numRuns: 60 },
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Every operation of the document, the checks of `schemathesis --checks all` one by one:
// not_a_server_error, status_code / content_type / response_headers / response_schema
// conformance, negative_data_rejection and positive_data_acceptance (query and path parameters),
// missing_required_header, unsupported_method and ignored_auth. (schemathesis itself is a
// Python package this suite cannot assume; these are its checks, over the served document.)

/** Required query parameters of each operation: a one-day window. */
const REQUIRED_QUERY: Record<string, Record<string, string>> = {
  '/reports/archive': { start: '2026-11-21T00:00:00+0800', end: '2026-11-21T23:59:59+0800', geoformat: 'geojson' },
  '/reports/archive/count': { start: '2026-11-21T00:00:00+0800', end: '2026-11-21T23:59:59+0800' },
  '/reports/archive/stats': { start: '2026-11-21T00:00:00+0800', end: '2026-11-21T23:59:59+0800' },
};
/** Path parameters without a pattern: a value that exists. */
const PATH_EXAMPLES: Record<string, string> = { code: 'PH-QC', featureId: 'PH-QC' };

const { openApiDocument } = await import('../../src/http/openapi.js');
const DOC = openApiDocument() as any;
const GETS = Object.keys(DOC.paths).filter((p) => DOC.paths[p].get);

const resolve = (p: any) => (p.$ref ? DOC.components.parameters[p.$ref.split('/').pop()] : p);
const paramsOf = (path: string, method = 'get') => ((DOC.paths[path][method].parameters ?? []) as any[]).map(resolve);

/** A valid value of each path parameter (its pattern's, or an existing one). */
function pathWith(path: string, values: Record<string, string> = {}): string {
  return path.replace(/\{(\w+)\}/g, (_m, name: string) => {
    if (values[name] !== undefined) return encodeURIComponent(values[name]);
    const param = paramsOf(path, Object.keys(DOC.paths[path])[0]).find((p) => p.name === name);
    const value = param?.schema?.pattern ? fc.sample(valid(param.schema), { numRuns: 1, seed: 7 })[0]! : PATH_EXAMPLES[name] ?? 'x';
    return encodeURIComponent(value);
  });
}

/** Any request, answered and checked against the document (a stream is checked on its headers). */
async function call(method: string, docPath: string, url: string, headers: Record<string, string> = { 'User-Agent': 'conformance/1.0' }) {
  const abort = new AbortController();
  const res = await fetch(`${svc.url}${url}`, { method, headers, signal: abort.signal });
  const type = res.headers.get('content-type') ?? '';
  let body: any;
  if (type.startsWith('text/event-stream')) {
    abort.abort();
    body = '';
  } else {
    const text = await res.text();
    body = text && /json/.test(type) ? JSON.parse(text) : text || undefined;
  }
  expect(res.status, `${method} ${url}`).toBeLessThan(500);
  if (res.status !== 405) {
    checker.check(method, docPath, res.status, type, body);
    checker.checkHeaders(method, docPath, res.status, res.headers);
  }
  return { status: res.status, body, headers: res.headers };
}

const query = (q: Record<string, string>) => {
  const text = new URLSearchParams(q).toString().replace(/\+/g, '%20');
  return text ? `?${text}` : '';
};

describe.each(GETS)('GET %s: the checks of an OpenAPI fuzzer', (path) => {
  const base = REQUIRED_QUERY[path] ?? {};
  const hasPathParams = path.includes('{');
  const rulesOf = (name: string) => [...(WORDED_RULES[`${path} ${name}`] ?? []), ...(WORDED_RULES[name] ?? [])];
  const words = (param: any) => `${param.description ?? ''} ${DOC.paths[path].get.description ?? ''}`;

  it('is answered as declared, and its parameters are as strict as the service', async () => {
    // positive: the base request.
    const plain = await call('GET', path, `${pathWith(path)}${query(base)}`);
    expect([200, 404, 410], `GET ${path}`).toContain(plain.status);
    for (const param of paramsOf(path)) {
      if (param.in === 'header') continue;
      const where = (v: string) => `${param.in} ${param.name}=${JSON.stringify(v)}`;
      const url = (v: string) => (param.in === 'path' ? `${pathWith(path, { [param.name]: v })}${query(base)}` : `${pathWith(path)}${query({ ...base, [param.name]: v })}`);
      for (const rule of rulesOf(param.name)) expect(words(param), `${path} ${param.name}`).toContain(rule.documented);
      const bad = invalid(param.schema);
      if (bad) {
        await fc.assert(
          fc.asyncProperty(bad, async (v) => {
            // A path segment cannot be empty or hold a slash: such a value names another path.
            fc.pre(param.in !== 'path' || (v !== '' && v !== '.' && v !== '..'));
            const { status, body } = await call('GET', path, url(v));
            if (param.in === 'path') {
              expect([400, 404], where(v)).toContain(status);
            } else {
              expect(status, where(v)).toBe(400);
              expect(body.details.map((d: any) => d.field), where(v)).toContain(param.name);
            }
          }),
          { numRuns: 15 },
        );
      }
      await fc.assert(
        fc.asyncProperty(valid(param.schema), async (v) => {
          fc.pre(param.in !== 'path' || (v !== '' && v !== '.' && v !== '..'));
          const { status, body } = await call('GET', path, url(v));
          if (status === 200 || status === 304 || (hasPathParams && (status === 404 || status === 410))) return;
          expect([400, ...rulesOf(param.name).flatMap((r) => r.status ?? [])], where(v)).toContain(status);
          for (const d of body.details) expect(rulesOf(param.name).some((r) => r.message.test(d.message)), `${where(v)}: ${d.field} ${d.message}`).toBe(true);
        }),
        { numRuns: 15 },
      );
    }
  });

  it('a query parameter it does not take is a 400 naming it, a status the document declares', async () => {
    const { status, body } = await call('GET', path, `${pathWith(path)}${query({ ...base, not_a_parameter: '1' })}`);
    if (hasPathParams && status === 404) return;
    expect(status, `GET ${path}`).toBe(400);
    expect(body.details.map((d: any) => d.field)).toContain('not_a_parameter');
    // Where the document's example is this refusal, it is the operation's own: the parameters it lists are the ones it takes.
    const example = DOC.paths[path].get.responses['400'].content?.['application/json']?.example;
    const unknown = example?.details.find((d: any) => d.message.startsWith('is not a known parameter'));
    if (unknown) expect(body.details.find((d: any) => d.field === 'not_a_parameter').message, `GET ${path}`).toBe(unknown.message);
  });

  it('a 200 answer that may be stored carries an ETag: the same request with it is a 304 without a body, or the new body under a new tag', async () => {
    const url = `${svc.url}${pathWith(path)}${query(base)}`;
    const abort = new AbortController();
    const first = await fetch(url, { headers: { 'User-Agent': 'conformance/1.0', 'Accept-Encoding': 'gzip' }, signal: abort.signal });
    // An event stream is never stored (no-store) and never ends.
    if (/no-store/.test(first.headers.get('cache-control') ?? '') || first.status !== 200) {
      abort.abort();
      return;
    }
    const body = await first.text();
    const etag = first.headers.get('etag');
    expect(etag, `GET ${path}`).toMatch(/^(W\/)?"[^"]+"$/);
    // fetch() sends If-None-Match with `Cache-Control: no-cache`, as a browser's revalidation does.
    const again = await fetch(url, { headers: { 'User-Agent': 'conformance/1.0', 'Accept-Encoding': 'gzip', 'If-None-Match': etag! } });
    const text = await again.text();
    if (again.status === 304) expect(text, `GET ${path}`).toBe('');
    else expect([again.status, again.headers.get('etag') !== etag, text !== body], `GET ${path}: a full answer to its own ETag`).toEqual([200, true, true]);
  });

  const requiredHeaders = paramsOf(path).filter((p) => p.in === 'header' && p.required);
  if (requiredHeaders.length > 0) it('a required header left out is a 400 naming it', async () => {
    for (const header of requiredHeaders) {
      // node:http sends no User-Agent (or any other optional header) unless told.
      const { status, body } = await new Promise<{ status: number; body: any }>((resolveAnswer, reject) => {
        const req = httpRequest(`${svc.url}${pathWith(path)}${query(base)}`, (res) => {
          let text = '';
          res.on('data', (c) => (text += c)).on('end', () => resolveAnswer({ status: res.statusCode!, body: JSON.parse(text) }));
        });
        req.on('error', reject);
        req.end();
      });
      checker.check('GET', path, status, 'application/json', body);
      expect(status).toBe(400);
      expect(body.details.map((d: any) => d.field)).toContain(header.name);
    }
  });
});

describe('methods and authentication', () => {
  it('a method a path does not have is a 405 that lists the ones it has', async () => {
    for (const path of Object.keys(DOC.paths)) {
      const declared = Object.keys(DOC.paths[path]).filter((m) => ['get', 'post', 'put', 'patch', 'delete'].includes(m));
      for (const method of ['POST', 'PUT', 'PATCH', 'DELETE'].filter((m) => !declared.includes(m.toLowerCase()))) {
        const { status, headers } = await call(method, path, pathWith(path), { 'User-Agent': 'conformance/1.0', 'X-Api-Key': API_KEY });
        expect(status, `${method} ${path}`).toBe(405);
        const allow = (headers.get('allow') ?? '').split(/,\s*/);
        for (const m of declared) expect(allow, `${method} ${path}: Allow ${headers.get('allow')}`).toContain(m.toUpperCase());
      }
    }
  });

  it('operations that need a key refuse a request without one (401) and with an unknown one (403, as documented)', async () => {
    const secured = Object.entries(DOC.paths).flatMap(([path, ops]: [string, any]) =>
      Object.entries(ops)
        .filter(([, op]: [string, any]) => op?.responses?.['401'])
        .map(([method]) => [method.toUpperCase(), path] as const),
    );
    expect(secured.length).toBeGreaterThan(0);
    for (const [method, path] of secured) {
      const init = (key?: string) => ({
        'User-Agent': 'conformance/1.0',
        'Content-Type': 'application/json',
        ...(key ? { 'X-Api-Key': key } : {}),
      });
      const url = pathWith(path);
      const body = method === 'POST' ? JSON.stringify(report(postId++)) : undefined;
      for (const [key, want] of [[undefined, 401], ['not-a-key-of-this-service', 403]] as const) {
        const res = await fetch(`${svc.url}${url}`, { method, headers: init(key), body });
        const answer = await res.json();
        checker.check(method, path, res.status, res.headers.get('content-type'), answer);
        expect(res.status, `${method} ${path} with ${key ?? 'no key'}`).toBe(want);
      }
    }
  });
});
