// The whole Philippines published as a boundary version: partners anywhere post with the name of
// their city, municipality or province, and every report is tagged with the barangay, city,
// province and region its point lies in. The truth is computed here from the shared national files with a point-in-
// polygon of the test's own (even-odd ray casting), independent of the service's tagger.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FeatureCollection, Position } from 'geojson';
import { feature } from 'topojson-client';
import type { Topology } from 'topojson-specification';
import type { Area, BoundarySet } from '../../src/boundaries/types.js';
import { gdal } from '../support/clients.js';
import { random } from '../support/randomReports.js';
import { allArchived, archivedRow, getJson, pkeyOf, postReport, report, startTestService, testConfig, testRuntime, type TestService } from '../support/env.js';
import { loadNationalBoundaries } from '../support/sharedData.js';

const POINTS = 1_000;
const WINDOW = 'start=2026-11-21T00:00:00Z&end=2026-11-21T23:59:59Z';

let svc: TestService;
let national: BoundarySet;

beforeAll(async () => {
  national = await loadNationalBoundaries();
  svc = await startTestService(await testRuntime(await testConfig('embedded')));
  await svc.rt.boundaries.publish(national);
}, 120_000);
afterAll(async () => {
  await svc?.stop();
});

const polygonsOf = (g: Area): Position[][][] => (g.type === 'Polygon' ? [g.coordinates] : g.coordinates);

/** Even-odd rule over every ring of every polygon (holes included). */
function contains(g: Area, x: number, y: number): boolean {
  let inside = false;
  for (const rings of polygonsOf(g)) {
    for (const ring of rings) {
      for (let i = 0, j = ring.length - 1; i < ring.length; j = i++) {
        const [xi, yi] = ring[i] as [number, number];
        const [xj, yj] = ring[j] as [number, number];
        if (yi > y !== yj > y && x < ((xj - xi) * (y - yi)) / (yj - yi) + xi) inside = !inside;
      }
    }
  }
  return inside;
}

function bboxOf(g: Area): number[] {
  const points = polygonsOf(g).flatMap((rings) => rings[0]!);
  const xs = points.map((p) => p[0]!);
  const ys = points.map((p) => p[1]!);
  return [Math.min(...xs), Math.min(...ys), Math.max(...xs), Math.max(...ys)];
}

/**
 * A point inside the polygon: across a horizontal line through its largest part, the midpoint of
 * the widest span between two crossings (inside by the even-odd rule, away from any edge).
 */
function pointInside(g: Area, next: () => number): [number, number] {
  const rings = polygonsOf(g).sort((a, b) => b[0]!.length - a[0]!.length)[0]!;
  const ys = rings[0]!.map((p) => p[1]!);
  const [minY, maxY] = [Math.min(...ys), Math.max(...ys)];
  for (let attempt = 0; attempt < 50; attempt++) {
    const y = minY + (0.2 + 0.6 * next()) * (maxY - minY);
    const xs: number[] = [];
    for (const ring of rings) {
      for (let i = 0, j = ring.length - 1; i < ring.length; j = i++) {
        const [xi, yi] = ring[i] as [number, number];
        const [xj, yj] = ring[j] as [number, number];
        if (yi > y !== yj > y) xs.push(((xj - xi) * (y - yi)) / (yj - yi) + xi);
      }
    }
    xs.sort((a, b) => a - b);
    let best: [number, number] | undefined;
    for (let k = 0; k + 1 < xs.length; k += 2) if (!best || xs[k + 1]! - xs[k]! > best[1] - best[0]) best = [xs[k]!, xs[k + 1]!];
    if (best && best[1] - best[0] > 1e-5) return [Number(((best[0] + best[1]) / 2).toFixed(6)), Number(y.toFixed(6))];
  }
  throw new Error('no interior point found');
}

describe('the national boundaries', () => {
  it('tag reports posted at 1,000 random barangays across every region with the barangay, city, province and region their point lies in', async () => {
    const next = random(2026);
    const areas = national.localAreas.features;
    const regionOf = new Map(national.cities.features.map((c) => [c.properties.code, c.properties.region_psgc]));
    const picked = new Set<number>();
    while (picked.size < POINTS) picked.add(Math.floor(next() * areas.length));
    // The truth first (each point against every city and barangay whose bbox holds it).
    const cityBoxes = national.cities.features.map((f) => ({ f, box: bboxOf(f.geometry) }));
    const areaBoxes = areas.map((f) => ({ f, box: bboxOf(f.geometry) }));
    const provinceBoxes = national.provinces!.features.map((f) => ({ f, box: bboxOf(f.geometry) }));
    const regionBoxes = national.regions!.features.map((f) => ({ f, box: bboxOf(f.geometry) }));
    const holding = <T extends { geometry: Area }>(boxed: { f: T; box: number[] }[], x: number, y: number) =>
      boxed.filter(({ box }) => x >= box[0]! && y >= box[1]! && x <= box[2]! && y <= box[3]!).map(({ f }) => f).filter((f) => contains(f.geometry, x, y));
    const cases = [...picked].map((i, n) => {
      const [lng, lat] = pointInside(areas[i]!.geometry, next);
      return { post: 50_000 + n, lng, lat, area: areas[i]!, inCities: holding(cityBoxes, lng, lat).map((f) => f.properties.code), inAreas: holding(areaBoxes, lng, lat),
        inProvinces: holding(provinceBoxes, lng, lat).map((f) => `PH-${f.properties.psgc}`), inRegions: holding(regionBoxes, lng, lat).map((f) => `PH-${f.properties.psgc}`) };
    });
    // Every region is reached.
    expect(new Set(cases.map((c) => regionOf.get(c.area.properties.city_code))).size).toBe(17);
    for (let k = 0; k < cases.length; k += 50) {
      await Promise.all(
        cases.slice(k, k + 50).map(async (c) => {
          const res = await postReport(svc.url, report(c.post, { created_at: '2026-11-21T03:00:00Z', partner_city: 'Quezon City', location: { lat: c.lat, lng: c.lng } }));
          expect(res.status).toBe(201);
        }),
      );
    }
    await allArchived(svc.rt);
    const res = await getJson(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson`);
    expect(res.status).toBe(200);
    const tagsOf = new Map(
      (res.body.result.features as { properties: { pkey: string; tags: Record<'instance_region_code' | 'local_area_id' | 'province_code' | 'region_code', string | null> } }[]).map((f) => [f.properties.pkey, f.properties.tags]),
    );
    expect(tagsOf.size).toBe(POINTS);
    let ownBarangay = 0;
    let independent = 0;
    for (const c of cases) {
      const tags = tagsOf.get(pkeyOf(c.post))!;
      const { inCities, inAreas } = c;
      const where = `${c.area.properties.name} (${c.area.properties.psgc}) at ${c.lng},${c.lat}`;
      // The city: one whose polygon holds the point; none only where none does.
      if (inCities.length === 0) expect(tags.instance_region_code, where).toBeNull();
      else expect(inCities, where).toContain(tags.instance_region_code);
      // The barangay: one whose polygon holds the point (its own, or where the separately
      // simplified layers overlap, a neighbour), of the tagged city when one of them is.
      expect(inAreas.map((f) => f.properties.psgc), where).toContain(tags.local_area_id);
      const ofCity = inAreas.filter((f) => f.properties.city_code === tags.instance_region_code);
      if (ofCity.length > 0) expect(ofCity.map((f) => f.properties.psgc), where).toContain(tags.local_area_id);
      if (tags.local_area_id === c.area.properties.psgc) ownBarangay += 1;
      // The province and region: the tagged city's in the shared files (an independent city's, the
      // province that holds it), and ones whose polygons hold the point; none where no city holds it.
      const city = national.cities.features.find((f) => f.properties.code === tags.instance_region_code)?.properties;
      if (!city) expect([tags.province_code, tags.region_code], where).toEqual([null, null]);
      else {
        if (city.province_psgc) expect(tags.province_code, where).toBe(`PH-${city.province_psgc}`);
        else independent += 1;
        expect(tags.region_code, where).toBe(`PH-${city.region_psgc}`);
        expect(c.inProvinces, where).toContain(tags.province_code);
        expect(c.inRegions, where).toContain(tags.region_code);
      }
    }
    // Overlaps between barangays of neighbouring cities are rare (36 of 41,096 representative points).
    expect(ownBarangay).toBeGreaterThan(POINTS * 0.98);
    // Some points fall in the 16 independent cities (their 1,1xx barangays are about 3 % of all).
    expect(independent).toBeGreaterThan(0);
  }, 300_000);

  it('filter the archive, its count and CAP alerts by a region, province or city code, each covering its cities', async () => {
    // A report in Angeles, an independent city inside Pampanga's polygon: Pampanga covers it.
    expect((await postReport(svc.url, report(60_000, { created_at: '2026-11-21T04:00:00Z', partner_city: 'Pampanga', location: { lat: 15.1371, lng: 120.5885 } }))).status).toBe(201);
    await allArchived(svc.rt);
    const all = await getJson(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson`);
    const cityOf = (all.body.result.features as { properties: { pkey: string; tags: { instance_region_code: string | null } } }[]).map((f) => [f.properties.pkey, f.properties.tags.instance_region_code] as const);
    const pampanga = '0305400000';
    const centralLuzon = '0300000000';
    const cities = national.cities.features.map((f) => f.properties);
    const expected = (keep: (c: (typeof cities)[number]) => boolean) => {
      const codes = new Set(cities.filter(keep).map((c) => c.code));
      return cityOf.filter(([, code]) => code !== null && codes.has(code)).map(([pkey]) => pkey).sort();
    };
    const pkeysOf = async (admin: string) => {
      const res = await getJson(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson&admin=${admin}`);
      expect(res.status).toBe(200);
      return (res.body.result.features as { properties: { pkey: string } }[]).map((f) => f.properties.pkey).sort();
    };
    const inRegion = expected((c) => c.region_psgc === centralLuzon);
    expect(inRegion.length).toBeGreaterThan(10);
    expect(await pkeysOf(`PH-${centralLuzon}`)).toEqual(inRegion);
    expect(await pkeysOf(`PH-${pampanga}`)).toEqual([...expected((c) => c.province_psgc === pampanga), pkeyOf(60_000)].sort());
    const aCity = cityOf.find(([, code]) => code !== null)![1]!;
    expect(await pkeysOf(aCity)).toEqual(expected((c) => c.code === aCity));
    const count = await getJson(`${svc.url}/reports/archive/count?${WINDOW}&admin=PH-${centralLuzon}`);
    expect(count.body).toMatchObject({ statusCode: 200, result: { count: inRegion.length } });
    // CAP alerts of the last day, by region: the reports posted here are not of the last day, so
    // the feed is valid and names the region, with none of another's.
    const cap = await fetch(`${svc.url}/reports/cap.atom?admin=PH-${centralLuzon}`, { headers: { 'User-Agent': 'flood-tests/1.0' } });
    expect(cap.status).toBe(200);
    expect(await cap.text()).toContain('Region III (Central Luzon)');
    // An unknown code: a 400 naming the closest codes, not all 1,747.
    const unknown = await getJson(`${svc.url}/reports/archive?${WINDOW}&admin=PH-030540000`);
    expect(unknown.status).toBe(400);
    expect(unknown.body.details).toEqual([{ in: 'query', field: 'admin', message: expect.stringMatching(/^must be the code of a region, province or city of the current boundaries .*closest: PH-0305400000 \(Pampanga\)/) }]);
    expect(unknown.body.details[0].message.length).toBeLessThan(400);
  });

  it('count by region and by province: the cities rolled up by the hierarchy', async () => {
    const stats = async (by: string) => {
      const res = await getJson(`${svc.url}/reports/archive/stats?${WINDOW}&interval=day&by=${by}`);
      expect(res.status).toBe(200);
      return res.body.result as { by: string; total: number; rows: { bucket: string; key: string | null; count: number }[] };
    };
    const byCity = await stats('city');
    // Each city's province and region as its reports' tags say (an independent city's province is
    // the one holding it, which the shared files do not name).
    const all = await getJson(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson`);
    const parent = new Map<string, { province: string | null; region: string | null }>();
    for (const f of all.body.result.features as { properties: { tags: Record<string, string | null> } }[]) {
      const t = f.properties.tags;
      if (t.instance_region_code) parent.set(t.instance_region_code, { province: t.province_code ?? null, region: t.region_code ?? null });
    }
    for (const level of ['province', 'region'] as const) {
      const want = new Map<string | null, number>();
      for (const r of byCity.rows) {
        const key = r.key === null ? null : parent.get(r.key)![level];
        want.set(key, (want.get(key) ?? 0) + r.count);
      }
      const got = await stats(level);
      expect(got.by).toBe(level);
      expect(got.total).toBe(byCity.total);
      expect(new Map(got.rows.map((r) => [r.key, r.count]))).toEqual(want);
      expect(got.rows.map((r) => r.key)).toEqual([...got.rows.map((r) => r.key)].sort((a, b) => (a === null ? 1 : b === null ? -1 : a < b ? -1 : 1)));
    }
    expect((await stats('region')).rows.filter((r) => r.key !== null)).toHaveLength(17);
  });

  it('answer a map drawn before a publish by the areas of its version (version=): admin= and by= keep naming regions the new version lacks', async () => {
    const drawn = (await svc.rt.boundaries.current()).version;
    const previous = (await svc.rt.boundaries.versions()).find((v) => v !== drawn)!;
    const centralLuzon = 'PH-0300000000';
    const filtered = `${svc.url}/reports/archive?${WINDOW}&geoformat=geojson&admin=${centralLuzon}`;
    const regions = `${svc.url}/reports/archive/stats?${WINDOW}&interval=day&by=region`;
    const [inRegion, byRegion] = [await getJson(filtered), await getJson(regions)];
    expect(inRegion.status).toBe(200);
    expect(inRegion.body.result.features.length).toBeGreaterThan(0);
    // The two cities' version (no regions) made current meanwhile.
    await svc.rt.boundaries.rollback(previous);
    try {
      const now = await getJson(filtered);
      expect(now.status).toBe(400);
      expect(now.body.details).toEqual([{ in: 'query', field: 'admin', message: expect.stringMatching(/^must be one of: PH-QC, PH-PG/) }]);
      expect((await getJson(regions)).body.details).toEqual([{ in: 'query', field: 'by', message: expect.stringMatching(/^the current boundary version has no regions/) }]);
      const pinned = await getJson(`${filtered}&version=${drawn}`);
      expect(pinned.status).toBe(200);
      expect(pinned.body.result.features.map((f: { properties: { pkey: string } }) => f.properties.pkey)).toEqual(inRegion.body.result.features.map((f: { properties: { pkey: string } }) => f.properties.pkey));
      const pinnedRegions = await getJson(`${regions}&version=${drawn}`);
      expect(pinnedRegions.status).toBe(200);
      expect(pinnedRegions.body.result).toEqual(byRegion.body.result);
      // Pinned to the two cities' version, a region is named as that version's mistake.
      const wrongVersion = await getJson(`${regions}&version=${previous}`);
      expect(wrongVersion.body.details).toEqual([{ in: 'query', field: 'by', message: expect.stringMatching(new RegExp(`^boundary version ${previous} has no regions`)) }]);
      // A version not served is a 410 on every window operation, needed or not, when it is the
      // only problem; beside others, one of the 400's. A malformed one is a 400 of its own, and
      // names no areas to check by= against.
      const notServed = { in: 'query', field: 'version', message: `is not a boundary version this service serves (unknown, or no longer served); the current one is ${previous}` };
      for (const path of ['/reports/archive', '/reports/archive/count', '/reports/archive/stats']) {
        const gone = await getJson(`${svc.url}${path}?${WINDOW}&version=${'0'.repeat(24)}`);
        expect(gone.status, path).toBe(410);
        expect(gone.body.details, path).toEqual([notServed]);
        const andMore = await getJson(`${svc.url}${path}?start=2026-13-01T00:00:00Z&end=2026-11-21T23:59:59Z&version=${'0'.repeat(24)}`);
        expect(andMore.status, path).toBe(400);
        expect(andMore.body.details, path).toEqual([{ in: 'query', field: 'start', message: expect.any(String) }, notServed]);
        const malformed = await getJson(`${svc.url}${path}?${WINDOW}&version=national${path.endsWith('stats') ? '&by=region' : ''}`);
        expect(malformed.status, path).toBe(400);
        expect(malformed.body.details, path).toEqual([{ in: 'query', field: 'version', message: expect.stringMatching(/24 hexadecimal digits/) }]);
      }
      // A page's cursor holds to the version it was made with: what admin= covers depends on it.
      const firstPage = await fetch(`${filtered}&limit=1&version=${drawn}`, { headers: { 'User-Agent': 'national-tests/1.0' } });
      const next = /<([^>]+)>; rel="next"/.exec(firstPage.headers.get('link') ?? '')![1]!;
      expect((await getJson(next)).status).toBe(200);
      const elsewhere = await getJson(next.replace(`version=${drawn}`, `version=${previous}`));
      expect(elsewhere.status).toBe(400);
      expect(elsewhere.body.details).toContainEqual(expect.objectContaining({ field: 'cursor' }));
    } finally {
      await svc.rt.boundaries.rollback(drawn);
    }
  });

  it('walk the pages of admin= without version= in the areas of the first page, though other boundaries are made current on the way', async () => {
    const drawn = (await svc.rt.boundaries.current()).version;
    const previous = (await svc.rt.boundaries.versions()).find((v) => v !== drawn)!;
    const filtered = `${svc.url}/reports/archive?${WINDOW}&geoformat=geojson&admin=PH-0300000000`;
    const pkeysOf = (body: { result: { features: { properties: { pkey: string } }[] } }) => body.result.features.map((f) => f.properties.pkey);
    const whole = pkeysOf((await getJson(filtered)).body);
    expect(whole.length).toBeGreaterThan(1);
    const headers = { 'User-Agent': 'national-tests/1.0' };
    const first = await fetch(`${filtered}&limit=1`, { headers });
    const walked = pkeysOf((await first.json()) as never);
    let next = /<([^>]+)>; rel="next"/.exec(first.headers.get('link') ?? '')?.[1];
    // The two cities' version (no regions) made current after the first page.
    await svc.rt.boundaries.rollback(previous);
    try {
      while (next) {
        const res = await fetch(next, { headers });
        expect(res.status, await res.clone().text()).toBe(200);
        walked.push(...pkeysOf((await res.json()) as never));
        next = /<([^>]+)>; rel="next"/.exec(res.headers.get('link') ?? '')?.[1];
      }
      expect(walked).toEqual(whole);
      // A walk begun now reads admin= in the version now current.
      expect((await getJson(`${filtered}&limit=1`)).status).toBe(400);
    } finally {
      await svc.rt.boundaries.rollback(drawn);
    }
  });

  it('list their levels, and draw each simplified for a map: every area kept, small, and still holding its places', async () => {
    const levels = await getJson(`${svc.url}/cities/levels`);
    expect(levels.status).toBe(200);
    expect(levels.body.result.levels).toEqual([
      { level: 'region', count: 17 },
      { level: 'province', count: 88 },
      { level: 'city', count: 1642 },
    ]);
    const full = Buffer.byteLength(JSON.stringify((await getJson(`${svc.url}/cities`)).body));
    const sizes: number[] = [];
    for (const [level, source] of [['region', national.regions!], ['province', national.provinces!], ['city', national.cities]] as const) {
      const res = await fetch(`${svc.url}/cities/outlines?level=${level}`, { headers: { 'User-Agent': 'flood-tests/1.0', 'Accept-Encoding': 'identity' } });
      expect(res.status).toBe(200);
      const text = await res.text();
      sizes.push(text.length);
      const topo = JSON.parse(text).result as Topology;
      const drawn = feature(topo, topo.objects.output!) as FeatureCollection<Area, { code: string; name: string }>;
      // Every area, by the code admin= takes, with a shape.
      const codeOf = (p: { psgc?: string; code?: string }) => (level === 'city' ? (p as { code: string }).code : `PH-${p.psgc}`);
      expect(drawn.features.map((f) => f.properties.code).sort()).toEqual(source.features.map((f) => codeOf(f.properties as never)).sort());
      expect(drawn.features.every((f) => f.geometry !== null && f.geometry.coordinates.length > 0)).toBe(true);
      if (level === 'city') {
        // Each city with its province, as its reports' tags carry it: its own, else the one holding it.
        const provinces = new Set(national.provinces!.features.map((f) => `PH-${f.properties.psgc}`));
        const own = new Map(source.features.map((f) => [(f.properties as { code: string }).code, (f.properties as { province_psgc?: string | null }).province_psgc]));
        const of = drawn.features.map((f) => [f.properties.code, (f.properties as { province?: string }).province] as const);
        expect(of.every(([, province]) => province !== undefined && provinces.has(province))).toBe(true);
        expect(of.filter(([code]) => own.get(code)).every(([code, province]) => province === `PH-${own.get(code)}`)).toBe(true);
      }
      // Simplified, yet a point well inside each of 30 areas is still inside its outline.
      const next = random(7);
      for (let k = 0; k < 30; k++) {
        const i = Math.floor(next() * source.features.length);
        const [x, y] = pointInside(source.features[i]!.geometry, next);
        const own = drawn.features.find((f) => f.properties.code === codeOf(source.features[i]!.properties as never))!;
        if (!contains(own.geometry, x, y)) {
          // Near its edge, a neighbour's simplified outline may take the point; it is never lost at sea.
          expect(drawn.features.some((f) => contains(f.geometry, x, y)), `${own.properties.name} at ${x},${y}`).toBe(true);
        }
      }
    }
    // Each level is a fraction of /cities (the full cities, quantized): regions open the map.
    expect(sizes[0]!).toBeLessThan(full / 8);
    expect(sizes[1]!).toBeLessThan(full / 5);
    expect(sizes[2]!).toBeLessThan(full);
    const bad = await getJson(`${svc.url}/cities/outlines?level=barangay`);
    expect(bad.status).toBe(400);
    expect(bad.body.details).toEqual([{ in: 'query', field: 'level', message: 'must be one of: region, province, city' }]);
  });

  it('serve every level as an OGC API – Features collection, which GDAL reads', async () => {
    const count = async (id: string) => (await getJson(`${svc.url}/ogc/collections/${id}/items?limit=1`)).body.numberMatched;
    expect([await count('regions'), await count('provinces'), await count('cities'), await count('local-areas')]).toEqual([17, 88, 1642, 41096]);
    const pampanga = await getJson(`${svc.url}/ogc/collections/provinces/items/0305400000`);
    expect(pampanga.status).toBe(200);
    expect(pampanga.body).toMatchObject({ type: 'Feature', id: '0305400000', properties: { psgc: '0305400000', name: 'Pampanga', region_psgc: '0300000000' }, geometry: { type: expect.stringMatching(/Polygon/) } });
    const out = await gdal('ogrinfo', ['-so', `OAPIF:${svc.url}/ogc`, 'regions']);
    expect(out).toMatch(/Feature Count: 17/);
  });

  it("answer a city's barangays by its national code, an empty collection for a city without any in the data", async () => {
    const qc = await getJson(`${svc.url}/cities/PH-1381300000/local-areas?geoformat=geojson`);
    expect(qc.status).toBe(200);
    expect(qc.body.result.features).toHaveLength(142);
    const manila = await getJson(`${svc.url}/cities/PH-1380600000/local-areas?geoformat=geojson`);
    expect(manila.body.result.features).toEqual([]);
    const province = await getJson(`${svc.url}/cities/PH-0305400000/local-areas`);
    expect(province.status).toBe(404);
    expect(province.body.message.length).toBeLessThan(400);
    // Says what the code is and which codes the path takes, never the code it was sent as the closest.
    expect(province.body.message).toMatch(/^PH-0305400000 is a province \(Pampanga\); this path takes the code of one of its cities, e\.g\. PH-\d{10}/);
    expect(province.body.details).toEqual([{ in: 'path', field: 'code', message: 'is a province, not a city' }]);
  });

  it('take partner_city by the name of any city, municipality or province, and ask which where a name repeats', async () => {
    const cebu = await postReport(svc.url, report(60_001, { created_at: '2026-11-21T04:00:00Z', partner_city: 'cebu city', location: { lat: 10.2958, lng: 123.8854 } }));
    expect(cebu.status).toBe(201);
    // Kept under the place's official name.
    await allArchived(svc.rt);
    expect((await archivedRow(svc.rt, pkeyOf(60_001)))?.partner_city).toBe('City of Cebu');
    expect((await postReport(svc.url, report(60_002, { partner_city: 'Quezon City' }))).status).toBe(201);
    expect((await postReport(svc.url, report(60_003, { partner_city: 'Pampanga' }))).status).toBe(201);
    expect((await postReport(svc.url, report(60_004, { partner_city: 'San Jose, Batangas' }))).status).toBe(201);
    const ambiguous = await postReport(svc.url, report(60_005, { partner_city: 'San Jose' }));
    expect(ambiguous.status).toBe(400);
    expect(ambiguous.body.details).toEqual([{ in: 'body', field: 'partner_city', message: expect.stringMatching(/^names several places; send one of: .*"San Jose, Batangas"/) }]);
    // Every place the name may mean, each partner's own among them (ten San Joses nationally).
    const meant = [...(ambiguous.body.details[0].message as string).matchAll(/"([^"]+)"/g)].map((m) => m[1]!);
    const sanJoses = (await svc.rt.boundaries.current()).placeNames.labels().filter((l) => /^San Jose( City)?(,|$)/.test(l));
    expect(sanJoses.length).toBeGreaterThan(5);
    expect(new Set(meant)).toEqual(new Set(sanJoses));
    const unknown = await postReport(svc.url, report(60_006, { partner_city: 'Cebu Ctiy' }));
    expect(unknown.status).toBe(400);
    expect(unknown.body.details[0].message).toMatch(/closest: "City of Cebu"/);
    // Refused posts are not kept: the same post_ids are new reports once named right.
    expect((await postReport(svc.url, report(60_005, { partner_city: 'San Jose City' }))).status).toBe(201);
  });
});
