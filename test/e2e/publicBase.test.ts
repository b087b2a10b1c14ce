// Absolute URLs in answers (archive paging links, CAP ids and links, OGC links) come from the
// configured public base, never from the request's Host: these answers are cached publicly, and a
// forged Host would otherwise be served to everybody who asks after (cache poisoning).
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allArchived, postReport, report, startTestService, testConfig, testRuntime, type TestService, pkeyOf } from '../support/env.js';

const FORGED = 'evil.example';

/** A GET with a Host header of the caller's choosing (fetch does not let one set it). */
function get(url: string, host = FORGED): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers: { Host: host, 'User-Agent': 'public-base-tests/1.0', 'X-Forwarded-Host': FORGED } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

const minutesAgo = (m: number) => new Date(Date.now() - m * 60_000).toISOString();
const WINDOW = () => `start=${encodeURIComponent(minutesAgo(600))}&end=${encodeURIComponent(new Date().toISOString())}`;

/** Every absolute http(s) URL in a text. */
const urlsIn = (text: string) => [...text.matchAll(/https?:\/\/[^\s"'<>]+/g)].map((m) => m[0]);

async function links(svc: TestService): Promise<string[]> {
  const page = await get(`${svc.url}/reports/archive?${WINDOW()}&format=geojson&limit=1`);
  expect(page.status).toBe(200);
  const next = /^<([^>]+)>; rel="next"$/.exec(String(page.headers.link))![1]!;
  const atom = await get(`${svc.url}/reports/cap.atom`);
  expect(atom.status).toBe(200);
  const cap = await get(`${svc.url}/reports/${pkeyOf(2)}.cap`);
  expect(cap.status).toBe(200);
  const landing = await get(`${svc.url}/ogc`);
  const items = await get(`${svc.url}/ogc/collections/reports/items?limit=1`);
  expect(items.status).toBe(200);
  const out = [next, ...urlsIn(atom.body).filter((u) => u.includes('/reports/')), ...urlsIn(cap.body).filter((u) => u.includes('/reports/'))];
  for (const body of [landing.body, items.body]) out.push(...(JSON.parse(body).links as { href: string }[]).map((l) => l.href));
  out.push(...String(items.headers.link).split(', ').map((l) => /^<([^>]+)>/.exec(l)![1]!));
  return out;
}

describe.each([
  ['PUBLIC_BASE_URL set', 'https://floods.example.org/'],
  ['PUBLIC_BASE_URL unset', undefined],
])('absolute URLs with %s', (_name, configured) => {
  let svc: TestService;
  beforeAll(async () => {
    const env: Record<string, string> = { TRUST_PROXY: '1', ...(configured && { PUBLIC_BASE_URL: configured }) };
    svc = await startTestService(await testRuntime(await testConfig('embedded', undefined, env)));
    for (const id of [1, 2]) expect((await postReport(svc.url, report(id, { created_at: minutesAgo(30 + id) }))).status).toBe(201);
    await allArchived(svc.rt);
  }, 60_000);
  afterAll(async () => {
    await svc?.stop();
  });

  it('are built on the configured base (the listening address by default), whatever Host the request names', async () => {
    const base = configured ? 'https://floods.example.org' : svc.url;
    const found = await links(svc);
    // next page, the feed's self and an alert's link, an alert's own URL, OGC landing, items and Link header.
    expect(found.length).toBeGreaterThan(8);
    for (const url of found) expect(url.startsWith(`${base}/`), url).toBe(true);
    expect(found.join(' ')).not.toContain(FORGED);
  });
});
