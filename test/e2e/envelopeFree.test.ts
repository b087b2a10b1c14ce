// format=geojson and format=topojson: the archive answer without the
// {statusCode, result} envelope, so researchers' tools read the URL as it is
// (geopandas.read_file, ogrinfo), while format=json + geoformat keeps the envelope (docs/http.md).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gdal, GEOPANDAS_MISSING, HAS_GEOPANDAS, HAS_OGR, OGR_MISSING, python } from '../support/clients.js';
import { allArchived, getJson, postReport, report, startTestService, testConfig, testRuntime, type TestService } from '../support/env.js';
import { OpenApiChecker } from '../support/openapi.js';

const WINDOW = 'start=2026-11-20T00:00:00%2B0000&end=2026-11-21T23:59:59%2B0000';
const UA = { 'User-Agent': 'envelope-free-tests/1.0' };
let svc: TestService;
let checker: OpenApiChecker;
let enveloped: { geojson: any; topojson: any };

async function fetchChecked(query: string): Promise<{ status: number; type: string; body: any; headers: Headers }> {
  const res = await fetch(`${svc.url}/reports/archive?${query}`, { headers: UA });
  const body = await res.json();
  checker.check('GET', '/reports/archive', res.status, res.headers.get('content-type'), body);
  return { status: res.status, type: res.headers.get('content-type') ?? '', body, headers: res.headers };
}

beforeAll(async () => {
  svc = await startTestService(await testRuntime(await testConfig('embedded')));
  for (let i = 0; i < 30; i++) {
    const qc = i % 2 === 0;
    const body = report(3000 + i, {
      created_at: new Date(Date.UTC(2026, 10, 20) + i * 83 * 60_000).toISOString(),
      partner_city: qc ? 'Quezon City' : 'Pampanga',
      location: qc ? { lat: 14.62 + i / 1000, lng: 121.03 + i / 1000 } : { lat: 15.02 + i / 1000, lng: 120.62 + i / 1000 },
      title: `Baha ${i}`,
    });
    expect((await postReport(svc.url, body)).status).toBe(201);
  }
  await allArchived(svc.rt);
  checker = new OpenApiChecker((await getJson(`${svc.url}/openapi.json`)).body);
  enveloped = {
    geojson: (await fetchChecked(`${WINDOW}&geoformat=geojson`)).body,
    topojson: (await fetchChecked(`${WINDOW}&geoformat=topojson`)).body,
  };
  expect(enveloped.geojson.result.features).toHaveLength(30);
});
afterAll(async () => {
  await svc?.stop();
});

describe('envelope-free formats', () => {
  it('format=geojson is the plain FeatureCollection of the json answer, as application/geo+json', async () => {
    const res = await fetchChecked(`${WINDOW}&format=geojson`);
    expect(res.status).toBe(200);
    expect(res.type).toMatch(/^application\/geo\+json/);
    expect(res.body).toEqual(enveloped.geojson.result);
    expect(res.headers.get('content-disposition')).toMatch(/^inline; filename=".*\.geojson"$/);
  });

  it('format=topojson is the plain Topology of the json answer', async () => {
    const res = await fetchChecked(`${WINDOW}&format=topojson`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual(enveloped.topojson.result);
    expect(res.body.type).toBe('Topology');
  });

  it('pages like json: the same reports, the next page in the Link header', async () => {
    const first = await fetchChecked(`${WINDOW}&format=geojson&limit=12`);
    expect(first.body.features).toEqual(enveloped.geojson.result.features.slice(0, 12));
    const next = /<([^>]+)>; rel="next"/.exec(first.headers.get('link') ?? '')![1]!;
    const second = (await (await fetch(next, { headers: UA })).json()) as any;
    expect(second.features).toEqual(enveloped.geojson.result.features.slice(12, 24));
  });

  it('format=json keeps SPEC 4.3: the envelope, geoformat choosing GeoJSON or TopoJSON; geoformat with an envelope-free format is a 400', async () => {
    expect(enveloped.geojson.statusCode).toBe(200);
    expect(enveloped.topojson.result.type).toBe('Topology');
    for (const f of ['geojson', 'topojson', 'csv', 'ndjson', 'parquet', 'arrow']) {
      const res = await fetchChecked(`${WINDOW}&format=${f}&geoformat=geojson`);
      expect(res.status).toBe(400);
      expect(res.body.details.map((d: any) => d.field)).toEqual(['geoformat']);
    }
  });

  it.skipIf(!HAS_GEOPANDAS)('geopandas.read_file reads the URL with no glue', async () => {
    const out = await python(
      `
import json, sys, geopandas
gdf = geopandas.read_file(sys.argv[1])
print(json.dumps({'rows': len(gdf), 'pkeys': gdf['pkey'].tolist(), 'epsg': gdf.crs.to_epsg()}))
`,
      `${svc.url}/reports/archive?${WINDOW}&format=geojson`,
    );
    expect(out).toEqual({ rows: 30, pkeys: enveloped.geojson.result.features.map((f: any) => f.properties.pkey), epsg: 4326 });
  });

  it.skipIf(!HAS_OGR)('ogrinfo reads both URLs (GeoJSON and TopoJSON drivers), naming itself as SPEC 4.3 asks', async () => {
    // GDAL 3.6 sends no User-Agent unless told; the archive endpoint requires one (docs/http.md), /ogc does not.
    const ua = ['--config', 'GDAL_HTTP_USERAGENT', 'ogrinfo-tests/1.0'];
    const geo = await gdal('ogrinfo', [...ua, '-so', '-al', `${svc.url}/reports/archive?${WINDOW}&format=geojson`]);
    expect(geo).toMatch(/Feature Count: 30\b/);
    expect(geo).toMatch(/Geometry: Point/);
    const topo = await gdal('ogrinfo', [...ua, '-so', '-al', `${svc.url}/reports/archive?${WINDOW}&format=topojson`]);
    expect(topo).toMatch(/Feature Count: 30\b/);
  });
});

if (!HAS_GEOPANDAS) console.warn(GEOPANDAS_MISSING);
if (!HAS_OGR) console.warn(OGR_MISSING);
