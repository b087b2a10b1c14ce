// OGC API – Features under /ogc, driven over HTTP and by GDAL's OAPIF driver:
// the items are the archive's reports (same order, same properties, same count),
// pages chain by next links, and every answer fits the served OpenAPI document.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { request as httpRequest } from 'node:http';
import { gdal, HAS_OGR, OGR_MISSING } from '../support/clients.js';
import { allArchived, API_KEY, getJson, HAS_SHARED_PH, pkeyOf, postReport, report, SHARED_PH_MISSING, startTestService, tempDir, testConfig, testRuntime, type TestService } from '../support/env.js';
import { OpenApiChecker } from '../support/openapi.js';
import { loadPsaBoundaries } from '../support/sharedData.js';

const WINDOW = 'start=2026-11-20T00:00:00%2B0000&end=2026-11-21T23:59:59%2B0000';
const TOTAL = 60;

let svc: TestService;
let checker: OpenApiChecker;
let archive: any[];

/** A GET without User-Agent (as GDAL may send), checked against the document's declared answer. */
async function ogc(pathAndQuery: string, docPath?: string): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(`${svc.url}${pathAndQuery}`, { headers: { 'User-Agent': '' } });
  const text = await res.text();
  const body = text ? JSON.parse(text) : undefined;
  if (docPath) checker.check('GET', docPath, res.status, res.headers.get('content-type'), body);
  return { status: res.status, body, headers: res.headers };
}

const next = (body: any) => body.links.find((l: any) => l.rel === 'next')?.href as string | undefined;

beforeAll(async () => {
  // The archive endpoint's windows at most three days: the items' are not bounded by it (the reports here are older).
  const rt = await testRuntime(await testConfig('embedded', undefined, { RATE_LIMIT_READ_PER_MINUTE: '100000', ARCHIVE_MAX_WINDOW: '72h' }));
  if (HAS_SHARED_PH) await rt.boundaries.publish(await loadPsaBoundaries());
  svc = await startTestService(rt);
  for (let i = 0; i < TOTAL; i++) {
    const qc = i % 2 === 0;
    const body = report(5000 + i, {
      created_at: new Date(Date.UTC(2026, 10, 20) + i * 47 * 60_000).toISOString(),
      partner_city: qc ? 'Quezon City' : 'Pampanga',
      location: qc ? { lat: 14.62 + (i % 10) * 0.01, lng: 121.02 + (i % 7) * 0.01 } : { lat: 15.0 + (i % 10) * 0.01, lng: 120.6 + (i % 7) * 0.01 },
      title: `Report ${i}, "quoted"`,
      text: i % 3 === 0 ? 'line one\nline two' : '',
    });
    expect((await postReport(svc.url, body)).status).toBe(201);
  }
  await allArchived(svc.rt);
  checker = new OpenApiChecker((await getJson(`${svc.url}/openapi.json`)).body);
  archive = (await getJson(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson`)).body.result.features;
  expect(archive).toHaveLength(TOTAL);
});
afterAll(async () => {
  await svc?.stop();
});

describe('OGC API – Features: the API', () => {
  it('landing page links the definition (OpenAPI 3.0), conformance and the collections', async () => {
    const { status, body } = await ogc('/ogc', '/ogc');
    expect(status).toBe(200);
    const rels = Object.fromEntries(body.links.map((l: any) => [l.rel, l]));
    expect(rels['service-desc']).toMatchObject({ href: `${svc.url}/ogc/api`, type: 'application/vnd.oai.openapi+json;version=3.0' });
    expect(rels.conformance.href).toBe(`${svc.url}/ogc/conformance`);
    expect(rels.data.href).toBe(`${svc.url}/ogc/collections`);
    const api = await fetch(`${svc.url}/ogc/api`);
    expect(api.headers.get('content-type')).toMatch(/^application\/vnd\.oai\.openapi\+json; ?version=3\.0/);
    const definition = (await api.json()) as any;
    expect(definition.openapi).toBe('3.0.3');
    expect(Object.keys(definition.paths).every((p) => p.startsWith('/ogc'))).toBe(true);
    // A 3.0 document: no 3.1-only keywords left.
    expect(JSON.stringify(definition)).not.toMatch(/"const"|"type":\[/);
    const { Validator } = await import('@seriousme/openapi-schema-validator');
    const result = await new Validator().validate(definition);
    expect(result.valid, JSON.stringify(result.errors)).toBe(true);
  });

  it('conformance: Core, GeoJSON and OpenAPI 3.0', async () => {
    const { body } = await ogc('/ogc/conformance', '/ogc/conformance');
    expect(body.conformsTo).toEqual([
      'http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/core',
      'http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/geojson',
      'http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/oas30',
    ]);
  });

  it('collections: reports (with its temporal extent), cities, local-areas', async () => {
    const { body } = await ogc('/ogc/collections', '/ogc/collections');
    expect(body.collections.map((c: any) => c.id)).toEqual(['reports', 'regions', 'provinces', 'cities', 'local-areas']);
    const reports = body.collections[0];
    expect(reports.extent.temporal.interval).toEqual([['2026-11-20T00:00:00.000Z', null]]);
    // The first box holds every report (the feed takes a point anywhere); the second, the cities' extent, where tagged ones lie.
    const cities = body.collections.find((c: any) => c.id === 'cities');
    expect(reports.extent.spatial.bbox).toEqual([[-180, -90, 180, 90], cities.extent.spatial.bbox[0]]);
    expect(cities.extent.spatial.bbox[0][0]).toBeGreaterThan(116);
    // The two-city default has no regions or provinces: no extent, rather than a made-up one.
    for (const level of ['regions', 'provinces']) expect(body.collections.find((c: any) => c.id === level).extent).toBeUndefined();
    expect(reports.links).toContainEqual(expect.objectContaining({ rel: 'items', type: 'application/geo+json', href: `${svc.url}/ogc/collections/reports/items` }));
    expect((await ogc('/ogc/collections/reports', '/ogc/collections/reports')).body).toEqual(reports);
    const missing = await ogc('/ogc/collections/barangays');
    expect(missing.status).toBe(404);
    expect(missing.body.details).toEqual([expect.objectContaining({ in: 'path', field: 'collectionId' })]);
  });
});

describe('OGC API – Features: reports items', () => {
  const items = '/ogc/collections/reports/items';
  const datetime = 'datetime=2026-11-20T00:00:00Z/2026-11-21T23:59:59Z';

  it('pages of the window chain by next links to exactly the archive answer, newest first, with its properties', async () => {
    let url: string | undefined = `${items}?${datetime}&limit=7`;
    const seen: any[] = [];
    let pages = 0;
    while (url) {
      const res = await ogc(url.replace(svc.url, ''), items);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^application\/geo\+json/);
      expect(res.body.numberMatched).toBe(TOTAL);
      expect(res.body.numberReturned).toBe(res.body.features.length);
      // The Link header carries the body's next link.
      const header = res.headers.get('link') ?? '';
      if (next(res.body)) expect(header).toContain(`<${next(res.body)}>; rel="next"`);
      else expect(header).not.toContain('rel="next"');
      seen.push(...res.body.features);
      url = next(res.body);
      pages += 1;
    }
    expect(pages).toBe(Math.ceil(TOTAL / 7));
    expect(seen.map((f) => f.properties)).toEqual(archive.map((f) => f.properties));
    expect(seen.map((f) => f.geometry)).toEqual(archive.map((f) => f.geometry));
    expect(seen[0].id).toBe(`${archive[0].properties.pkey}@${archive[0].properties.created_at.replace(/[-:]/g, '')}`);
  });

  it('a page asked again with its ETag is a 304 (its timeStamp and cursors\' sealing time are no part of it); another page has another tag', async () => {
    const url = `${svc.url}${items}?${datetime}&limit=7`;
    const first = await fetch(url);
    const etag = first.headers.get('etag')!;
    expect(etag).toMatch(/^W\/"[^"]+"$/);
    const next = ((await first.json()) as any).links.find((l: any) => l.rel === 'next').href as string;
    await new Promise((r) => setTimeout(r, 5));
    const again = await fetch(url, { headers: { 'If-None-Match': etag } });
    expect([again.status, await again.text(), again.headers.get('content-encoding')]).toEqual([304, '', null]);
    const second = await fetch(next, { headers: { 'If-None-Match': etag } });
    expect(second.status).toBe(200);
    expect(second.headers.get('etag')).not.toBe(etag);
    await second.arrayBuffer();
  });

  it('prev links walk back through the same pages', async () => {
    const forward: string[][] = [];
    let url: string | undefined = `${items}?${datetime}&limit=7`;
    let last: any;
    while (url) {
      last = (await ogc(url.replace(svc.url, ''), items)).body;
      forward.push(last.features.map((f: any) => f.id));
      url = next(last);
    }
    expect(forward[0]!.length).toBe(7);
    const backward: string[][] = [];
    let prev: string | undefined = last.links.find((l: any) => l.rel === 'prev')?.href;
    while (prev) {
      const res = await ogc(prev.replace(svc.url, ''), items);
      expect(res.headers.get('link') ?? '').toContain('rel="next"');
      backward.push(res.body.features.map((f: any) => f.id));
      prev = res.body.links.find((l: any) => l.rel === 'prev')?.href;
    }
    expect(backward.reverse()).toEqual(forward.slice(0, -1));
    // The first page has no prev link.
    expect((await ogc(`${items}?${datetime}&limit=7`)).body.links.some((l: any) => l.rel === 'prev')).toBe(false);
  });

  it('no datetime: every report, however old (Part 1 filters by time only when asked), the newest first, 10 by default; a limit above 10,000 is answered with 10,000 (Part 1), one below 1 refused', async () => {
    const { body } = await ogc(items, items);
    expect(body.features.map((f: any) => f.properties.pkey)).toEqual(archive.slice(0, 10).map((f) => f.properties.pkey));
    expect(body.numberMatched).toBe(TOTAL);
    expect((await ogc(`${items}?limit=10000`)).body.numberReturned).toBe(TOTAL);
    const above = await ogc(`${items}?limit=99999999999`);
    expect(above.status).toBe(200);
    expect(above.body.numberReturned).toBe(TOTAL);
    expect((await ogc(`${items}?limit=0`, items)).status).toBe(400);
    expect((await ogc(`${items}?limit=ten`, items)).status).toBe(400);
  });

  it('a datetime interval of a year (longer than the archive endpoint takes) is walked page by page, each page bounded by limit; so is an open start', async () => {
    expect((await ogc(`${items}?datetime=../2026-11-21T23:59:59Z&limit=100`)).body.numberMatched).toBe(TOTAL);
    expect((await ogc(`${items}?datetime=2020-01-01T00:00:00Z/2026-12-31T00:00:00Z&limit=100`)).body.numberMatched).toBe(TOTAL);
    const year = 'datetime=2025-11-22T00:00:00Z/2026-11-21T23:59:59Z';
    let url: string | undefined = `${items}?${year}&limit=25`;
    const seen: string[] = [];
    while (url) {
      const { status, body } = await ogc(url.replace(svc.url, ''), items);
      expect(status).toBe(200);
      expect(body.numberMatched).toBe(TOTAL);
      expect(body.numberReturned).toBeLessThanOrEqual(25);
      seen.push(...body.features.map((f: any) => f.properties.pkey));
      url = next(body);
    }
    expect(seen).toEqual(archive.map((f) => f.properties.pkey));
  });

  it('datetime: an instant, a date, intervals with open ends; bbox', async () => {
    const one = archive[5].properties.created_at;
    expect((await ogc(`${items}?datetime=${one}`)).body.features.map((f: any) => f.properties.pkey)).toEqual([archive[5].properties.pkey]);
    // An instant between two milliseconds is its millisecond; an interval starting there begins at the next.
    const within = one.replace(/Z$/, '400Z');
    expect((await ogc(`${items}?datetime=${within}`)).body.features.map((f: any) => f.properties.pkey)).toEqual([archive[5].properties.pkey]);
    expect((await ogc(`${items}?datetime=${within}/${one.replace(/Z$/, '900Z')}`)).body.features).toEqual([]);
    const day20 = archive.filter((f) => f.properties.created_at.startsWith('2026-11-20'));
    expect((await ogc(`${items}?datetime=2026-11-20&limit=100`)).body.numberMatched).toBe(day20.length);
    expect((await ogc(`${items}?datetime=../2026-11-20T23:59:59.999Z&limit=100`)).body.numberMatched).toBe(day20.length);
    expect((await ogc(`${items}?datetime=2026-11-21T00:00:00Z/..&limit=100`)).body.numberMatched).toBe(TOTAL - day20.length);
    expect((await ogc(`${items}?datetime=/2026-11-20T23:59:59.999Z&limit=100`)).body.numberMatched).toBe(day20.length);
    // Dates as an interval's ends: whole days (the docs' example).
    expect((await ogc(`${items}?datetime=2026-11-20/2026-11-20&limit=100`)).body.numberMatched).toBe(day20.length);
    expect((await ogc(`${items}?datetime=2026-11-20/2026-11-21&limit=100`)).body.numberMatched).toBe(TOTAL);
    // An offset's '+' sent unencoded (a space once decoded), as on the archive endpoint.
    expect((await ogc(`${items}?datetime=2026-11-21T08:00:00+08:00/..&limit=100`)).body.numberMatched).toBe(TOTAL - day20.length);
    const inBox = archive.filter((f) => f.geometry.coordinates[0] <= 121 && f.geometry.coordinates[1] >= 15);
    const boxed = await ogc(`${items}?${datetime}&bbox=120.5,15,121,15.2&limit=100`);
    expect(boxed.body.features.map((f: any) => f.properties.pkey)).toEqual(inBox.map((f) => f.properties.pkey));
    // The same box with signs typed and sent unencoded: a leading '+' and an exponent's.
    const signed = await ogc(`${items}?${datetime}&bbox=+120.5,15,1.21e+2,+15.2&limit=100`);
    expect(signed.status).toBe(200);
    expect(signed.body.features.map((f: any) => f.properties.pkey)).toEqual(inBox.map((f) => f.properties.pkey));
  });

  it.each([
    ['datetime=yesterday', 'datetime'],
    ['datetime=2026-11-20T00:00:00Z/2026-11-19T00:00:00Z', 'datetime'],
    ['datetime=0099-06-15T00:00:00Z', 'datetime'],
    ['datetime=a/b/c', 'datetime'],
    ['bbox=1,2,3', 'bbox'],
    ['bbox=121,15,120,16', 'bbox'],
    // Decimal numbers only, as the archive reads them: not hex, binary, octal or padded.
    ['bbox=0x79,0xe,0x7a,0xf', 'bbox'],
    ['bbox=0b1111001,14,0o172,15', 'bbox'],
    ['bbox=%09121,14,122,15%20', 'bbox'],
    ['limit=0', 'limit'],
    ['limit=ten', 'limit'],
    ['cursor=WzEsMiwzXQ', 'cursor'],
    ['cursor=not-a-cursor!', 'cursor'],
    ['f=html', 'f'],
    ['offset=10', 'offset'],
  ])('%s → 400 naming %s', async (q, field) => {
    const res = await ogc(`${items}?${q}`);
    expect(res.status).toBe(400);
    expect(res.body.details.map((d: any) => d.field)).toEqual([field]);
  });

  it('a cursor of another query is refused', async () => {
    const first = await ogc(`${items}?${datetime}&limit=5`);
    const cursor = new URL(next(first.body)!).searchParams.get('cursor');
    const other = await ogc(`${items}?datetime=2026-11-20&limit=5&cursor=${cursor}`);
    expect(other.status).toBe(400);
    expect(other.body.details[0]).toMatchObject({ field: 'cursor', message: expect.stringMatching(/another query/) });
  });

  it('one item by its id; an unknown id is a 404', async () => {
    const id = `${archive[3].properties.pkey}@${archive[3].properties.created_at.replace(/[-:]/g, '')}`;
    const { status, body, headers } = await ogc(`${items}/${encodeURIComponent(id)}`, `${items}/{featureId}`);
    expect(status).toBe(200);
    expect(headers.get('content-type')).toMatch(/^application\/geo\+json/);
    expect(body).toMatchObject({ type: 'Feature', id, geometry: archive[3].geometry, properties: archive[3].properties });
    expect((await ogc(`${items}/partner-1@20261120T000000.000Z`)).status).toBe(404);
    expect((await ogc(`${items}/nothing`)).status).toBe(404);
  });
});

describe('OGC API – Features: reports pages over a window longer than the archive endpoint takes', () => {
  it('take a heavy answer\'s turn (none free and no wait: refused, 429 or 503), while pages within the archive\'s bound answer at once', async () => {
    // One turn, no queue: pages that need a turn at the same moment refuse each other (pages'
    // own turns plenty here).
    const rt = await testRuntime(await testConfig('embedded', undefined, { RATE_LIMIT_READ_PER_MINUTE: '100000', ARCHIVE_MAX_WINDOW: '72h', ARCHIVE_MAX_CONCURRENT: '1', ARCHIVE_MAX_CONCURRENT_PAGES: '100', ARCHIVE_QUEUE_SECONDS: '0' }));
    const own = await startTestService(rt);
    try {
      for (let i = 0; i < 40; i++) expect((await postReport(own.url, report(7000 + i, { created_at: new Date(Date.UTC(2026, 10, 20) + i * 60_000).toISOString() }))).status).toBe(201);
      await allArchived(own.rt);
      const statuses = async (q: string) => (await Promise.all(Array.from({ length: 12 }, () => fetch(`${own.url}/ogc/collections/reports/items${q}`).then(async (r) => (await r.arrayBuffer(), r.status))))).sort();
      const whole = await statuses('?limit=40');
      expect(whole).toContain(200);
      expect(whole.filter((s) => s !== 200).length).toBeGreaterThan(0);
      expect(whole.every((s) => s === 200 || s === 429 || s === 503)).toBe(true);
      // Within 72 hours: no heavy turn taken, none refused.
      expect(await statuses('?limit=40&datetime=2026-11-20T00:00:00Z/2026-11-21T00:00:00Z')).toEqual(Array(12).fill(200));
    } finally {
      await own.stop();
    }
  });
});

describe('pages take turns of their own', () => {
  it('archive and OGC pages asked together past their turns refuse each other (429 or 503), one after another they all answer, and whole windows keep theirs', async () => {
    // One page turn, no queue; each page is held in memory until its client has taken it.
    const rt = await testRuntime(await testConfig('embedded', undefined, { RATE_LIMIT_READ_PER_MINUTE: '100000', ARCHIVE_MAX_CONCURRENT_PAGES: '1', ARCHIVE_QUEUE_SECONDS: '0' }));
    const own = await startTestService(rt);
    try {
      for (let i = 0; i < 40; i++) expect((await postReport(own.url, report(7100 + i, { created_at: new Date(Date.UTC(2026, 10, 20) + i * 60_000).toISOString() }))).status).toBe(201);
      await allArchived(own.rt);
      const window = 'start=2026-11-20T00:00:00%2B0000&end=2026-11-21T00:00:00%2B0000';
      const status = (path: string) => fetch(`${own.url}${path}`).then(async (r) => (await r.arrayBuffer(), r.status));
      for (const page of [`/reports/archive?${window}&limit=40&format=geojson`, '/ogc/collections/reports/items?limit=40&datetime=2026-11-20T00:00:00Z/2026-11-21T00:00:00Z']) {
        const together = await Promise.all(Array.from({ length: 12 }, () => status(page)));
        expect(together, page).toContain(200);
        expect(together.filter((s) => s !== 200).length, page).toBeGreaterThan(0);
        expect(together.every((s) => s === 200 || s === 429 || s === 503), page).toBe(true);
        for (let i = 0; i < 3; i++) expect(await status(page), page).toBe(200);
      }
      // Whole windows take the heavy answers' turns, not the pages'.
      expect(await Promise.all(Array.from({ length: 2 }, () => status(`/reports/archive?${window}&format=geojson`)))).toEqual([200, 200]);
    } finally {
      await own.stop();
    }
  });
});

describe('OGC API – Features: cities and barangays', () => {
  it('cities: every city, by code, with its polygon', async () => {
    const { body } = await ogc('/ogc/collections/cities/items', '/ogc/collections/cities/items');
    expect(body.features.map((f: any) => f.id).sort()).toEqual(['PH-PG', 'PH-QC']);
    const city = await ogc('/ogc/collections/cities/items/PH-QC', '/ogc/collections/cities/items/{featureId}');
    expect(city.body.properties).toEqual({ code: 'PH-QC', name: 'Quezon City' });
  });

  it('cities have no time: any datetime matches them, however long its interval; a malformed one is still a 400', async () => {
    for (const datetime of ['2000-01-01/2020-01-01', '1970-06-01', '../1980-01-01T00:00:00Z', '2026-11-21', '1971-01-01/..']) {
      const { status, body } = await ogc(`/ogc/collections/cities/items?datetime=${encodeURIComponent(datetime)}`);
      expect(status, datetime).toBe(200);
      expect(body.numberMatched, datetime).toBe(2);
    }
    expect((await ogc('/ogc/collections/cities/items?datetime=yesterday')).status).toBe(400);
    expect((await ogc('/ogc/collections/cities/items?datetime=2026-11-21/2026-11-20')).status).toBe(400);
    expect((await ogc('/ogc/collections/cities/items?datetime=1950-06-01')).status).toBe(400);
  });

  it.skipIf(!HAS_SHARED_PH)('local-areas: the 680 barangays, paged by next and prev links, by bbox', async () => {
    const all: string[] = [];
    let url: string | undefined = '/ogc/collections/local-areas/items?limit=300';
    let last: any;
    while (url) {
      last = (await ogc(url.replace(svc.url, ''), '/ogc/collections/local-areas/items')).body;
      expect(last.numberMatched).toBe(680);
      all.push(...last.features.map((f: any) => f.id));
      url = next(last);
    }
    expect(new Set(all).size).toBe(680);
    const prev = last.links.find((l: any) => l.rel === 'prev').href;
    expect((await ogc(prev.replace(svc.url, ''))).body.features.map((f: any) => f.id)).toEqual(all.slice(300, 600));
    const boxed = (await ogc('/ogc/collections/local-areas/items?bbox=121.0,14.6,121.05,14.65&limit=1000')).body;
    expect(boxed.numberMatched).toBeGreaterThan(0);
    expect(boxed.numberMatched).toBeLessThan(680);
    expect(boxed.features.every((f: any) => f.properties.city_code === 'PH-QC')).toBe(true);
    // A box that is a point: the one barangay whose area holds it, not every one whose bounding box does.
    const point = (await ogc('/ogc/collections/local-areas/items?bbox=121.05,14.65,121.05,14.65')).body;
    const holder = (await svc.rt.boundaries.current()).tagger.tag(121.05, 14.65).local_area_id;
    expect(point.features.map((f: any) => f.id)).toEqual([holder]);
    expect(point.numberMatched).toBe(1);
  });
});

describe.skipIf(!HAS_OGR)('GDAL (OAPIF driver) as the client', () => {
  it('ogrinfo lists the reports layer: points in EPSG:4326, with the feature count', async () => {
    const out = await gdal('ogrinfo', ['-so', `OAPIF:${svc.url}/ogc`, 'reports']);
    expect(out).toMatch(/Layer name: reports/);
    expect(out).toMatch(/Geometry: Point/);
    expect(out).toMatch(new RegExp(`Feature Count: ${TOTAL}\\b`));
    expect(out).toMatch(/ID\["EPSG",4326\]/);
  });

  it('ogr2ogr of a window gives exactly the reports /count counts, with their properties', async () => {
    const dir = await tempDir();
    const out = path.join(dir, 'window.geojson');
    const bbox = ['120.5', '14.9', '121.0', '15.2'];
    await gdal('ogr2ogr', ['-f', 'GeoJSON', out, `OAPIF:${svc.url}/ogc`, 'reports', '-spat', ...bbox]);
    const written = JSON.parse(await fs.readFile(out, 'utf8')).features;
    const count = (await getJson(`${svc.url}/reports/archive/count?${WINDOW}&bbox=${bbox.join(',')}`)).body.result.count;
    expect(count).toBeGreaterThan(0);
    expect(written).toHaveLength(count);
    const byKey = new Map(archive.map((f) => [f.properties.pkey, f]));
    for (const f of written) {
      const want = byKey.get(f.properties.pkey)!;
      // GDAL's GeoJSON writer keeps 15 significant digits.
      f.geometry.coordinates.forEach((c: number, i: number) => expect(c).toBeCloseTo(want.geometry.coordinates[i], 10));
      // GDAL writes its DateTime without milliseconds, and keeps tags as JSON.
      const { created_at, tags, id: _id, ...rest } = f.properties;
      const { created_at: wantCreated, tags: wantTags, ...wantRest } = want.properties;
      expect(rest).toEqual(wantRest);
      expect(Date.parse(created_at)).toBe(Date.parse(wantCreated));
      expect(typeof tags === 'string' ? JSON.parse(tags) : tags).toEqual(wantTags);
    }
  });
});

describe('OGC API – Features: a page revalidated after the window changed', () => {
  it('a report archived later in the window (one retracted, the count the same) gives page 1 a new tag, and its new next link reaches the report', async () => {
    const own = await startTestService(await testRuntime(await testConfig('embedded')));
    try {
      const url = `${own.url}/ogc/collections/reports/items?datetime=2026-11-10T00:00:00Z/2026-11-10T23:59:59Z&limit=1`;
      for (const [id, hour] of [[1, 9], [2, 7], [4, 6]] as const) {
        expect((await postReport(own.url, report(id, { created_at: `2026-11-10T0${hour}:00:00Z` }))).status).toBe(201);
      }
      await allArchived(own.rt);
      const first = await fetch(url);
      const etag = first.headers.get('etag')!;
      expect(((await first.json()) as any).features.map((f: any) => f.properties.pkey)).toEqual([pkeyOf(1)]);
      // A late report, and one retracted: page 1's report and the count stay the same.
      expect((await postReport(own.url, report(3, { created_at: '2026-11-10T05:00:00Z' }))).status).toBe(201);
      await allArchived(own.rt);
      expect((await fetch(`${own.url}/feeds/partner/4`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } })).status).toBe(200);
      const again = await fetch(url, { headers: { 'If-None-Match': etag } });
      expect(again.status).toBe(200);
      expect(again.headers.get('etag')).not.toBe(etag);
      const walked: string[] = [];
      for (let page: any = await again.json(); page; ) {
        walked.push(...page.features.map((f: any) => f.properties.pkey));
        const href = next(page);
        page = href ? await (await fetch(href)).json() : undefined;
      }
      expect((await (await fetch(url)).json() as any).numberMatched).toBe(3);
      expect(walked).toEqual([1, 2, 3].map((n) => pkeyOf(n)));
      // Asked again with the new tag, unchanged: a 304.
      expect((await fetch(url, { headers: { 'If-None-Match': again.headers.get('etag')! } })).status).toBe(304);

      // A window with an open end (no datetime, or `start/..`) ends an hour past now, moving with
      // the clock: its first page revalidates all the same, until a report is archived in it.
      const open = [`${own.url}/ogc/collections/reports/items?limit=1`, `${own.url}/ogc/collections/reports/items?datetime=2026-11-10T00:00:00Z/..&limit=1`];
      const tags = await Promise.all(open.map(async (u) => (await fetch(u)).headers.get('etag')!));
      await new Promise((r) => setTimeout(r, 20));
      for (const [i, u] of open.entries()) expect((await fetch(u, { headers: { 'If-None-Match': tags[i]! } })).status).toBe(304);
      expect((await postReport(own.url, report(5, { created_at: '2026-11-10T04:00:00Z' }))).status).toBe(201);
      await allArchived(own.rt);
      for (const [i, u] of open.entries()) {
        const changed = await fetch(u, { headers: { 'If-None-Match': tags[i]! } });
        expect(changed.status).toBe(200);
        expect(((await changed.json()) as any).numberMatched).toBe(4);
      }
    } finally {
      await own.stop();
    }
  });
});

describe('no User-Agent needed under /ogc', () => {
  it('a raw request without the header is answered', async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(`${svc.url}/ogc/collections/reports/items?limit=1`, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      });
      req.removeHeader('user-agent');
      req.on('error', reject);
      req.end();
    });
    expect(status).toBe(200);
  });
});

if (!HAS_OGR) console.warn(OGR_MISSING);
if (!HAS_SHARED_PH) console.warn(SHARED_PH_MISSING);
