// Tagging with the real PSA/NAMRIA boundaries of Quezon City, Pampanga and their 680 barangays.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { feature } from 'topojson-client';
import type { Topology } from 'topojson-specification';
import { defaultBoundaries } from '../../src/boundaries/defaultBoundaries.js';
import { BoundaryRepository } from '../../src/boundaries/repository.js';
import { Tagger } from '../../src/boundaries/tagger.js';
import type { BoundarySet } from '../../src/boundaries/types.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import {
  BACKENDS,
  HAS_SHARED_PH,
  SHARED_PH_MISSING,
  eventually,
  getJson,
  postReport,
  report,
  startTestService,
  testConfig,
  testRuntime,
  type TestService,
  pkeyOf,
} from '../support/env.js';
import { loadPsaBoundaries } from '../support/sharedData.js';
import { VERSION_TAG } from '../../src/shared/version.js';

if (!HAS_SHARED_PH) console.warn(SHARED_PH_MISSING);

// Known points from the data's PROVENANCE.md: [name, lat, lng, city, barangay PSGC].
const KNOWN: [string, number, number, string | null, string | null][] = [
  ['Quezon Memorial Circle', 14.6516, 121.0497, 'PH-QC', '1381300020'],
  ['UP Diliman (Quezon Hall)', 14.6549, 121.0645, 'PH-QC', '1381300124'],
  ['Araneta Center, Cubao', 14.6203, 121.0537, 'PH-QC', '1381300115'],
  ['SM North EDSA', 14.6565, 121.0296, 'PH-QC', '1381300108'],
  ['City of San Fernando', 15.0286, 120.6898, 'PH-PG', '0305416013'],
  ['Angeles City centre', 15.1371, 120.5885, 'PH-PG', '0330100029'],
  ['Mt Arayat', 15.2, 120.742, 'PH-PG', '0305403029'],
  ['Guagua town proper', 14.9653, 120.6342, 'PH-PG', '0305407033'],
  ['Manila City Hall', 14.5896, 120.9812, null, null],
  ['Makati CBD', 14.557, 121.0235, null, null],
  ['Marikina City Hall', 14.6507, 121.1029, null, null],
  ['Caloocan (south)', 14.6571, 120.9837, null, null],
  ['Malolos, Bulacan', 14.8527, 120.816, null, null],
  ['Tarlac City', 15.4755, 120.5963, null, null],
  ['Olongapo City', 14.8292, 120.2828, null, null],
];

describe.skipIf(!HAS_SHARED_PH)('tagging with the PSA/NAMRIA boundaries', () => {
  let psa: BoundarySet;
  beforeAll(async () => {
    psa = await loadPsaBoundaries();
  });

  it.each(KNOWN)('%s → %s / %s', (_name, lat, lng, city, barangay) => {
    const tags = new Tagger(psa).tag(lng, lat);
    expect(tags).toEqual({ instance_region_code: city, local_area_id: barangay, province_code: null, region_code: null });
  });

  describe.each(BACKENDS)('published and used by the worker on the %s backend', (kind) => {
    let emulator: Emulator | undefined;
    let svc: TestService;
    let version: string;
    beforeAll(async () => {
      if (kind === 'aws') emulator = await startEmulator();
      const rt = await testRuntime(await testConfig(kind, emulator), emulator);
      await rt.boundaries.seedIfEmpty();
      version = (await rt.boundaries.publish(psa)).version;
      svc = await startTestService(rt);
    });
    afterAll(async () => {
      await svc?.stop();
      await emulator?.stop();
    });

    it('tags archived reports with city and barangay', async () => {
      const points = KNOWN.filter(([name]) => ['Quezon Memorial Circle', 'City of San Fernando', 'Manila City Hall'].includes(name));
      for (const [i, [, lat, lng]] of points.entries()) {
        expect((await postReport(svc.url, report(100 + i, { location: { lat, lng } }))).status).toBe(201);
      }
      const q = `${svc.url}/reports/archive?start=2026-11-21T00:00:00%2B0800&end=2026-11-21T23:59:59%2B0800&geoformat=geojson`;
      const features = await eventually(async () => {
        const res = await getJson(q);
        return res.body.result.features.length === points.length ? res.body.result.features : undefined;
      }, 20_000, 'tagged reports in the archive');
      const tags = Object.fromEntries(features.map((f: any) => [f.properties.pkey, f.properties.tags]));
      expect(tags).toEqual({
        [pkeyOf(100)]: { instance_region_code: 'PH-QC', local_area_id: '1381300020', province_code: null, region_code: null },
        [pkeyOf(101)]: { instance_region_code: 'PH-PG', local_area_id: '0305416013', province_code: null, region_code: null },
        [pkeyOf(102)]: { instance_region_code: null, local_area_id: null, province_code: null, region_code: null },
      });
    });

    it('lists the two-city version as cities alone, and draws them (no region or province level: a 400 that says so)', async () => {
      const levels = await getJson(`${svc.url}/cities/levels`);
      // Published without an attribution: null, said so rather than left out.
      expect(levels.body.result).toEqual({ version, label: expect.stringMatching(/PSA/), attribution: null, levels: [{ level: 'city', count: 2 }] });
      const outlines = await getJson(`${svc.url}/cities/outlines`);
      expect(outlines.status).toBe(200);
      expect(outlines.body.result.objects.output.geometries.map((g: any) => g.properties)).toEqual([
        { code: 'PH-QC', name: 'Quezon City' },
        { code: 'PH-PG', name: 'Pampanga' },
      ]);
      expect(outlines.headers.get('etag')).toMatch(new RegExp(`^"${version}-${VERSION_TAG}-outlines-city`));
      const none = await getJson(`${svc.url}/cities/outlines?level=province`);
      expect(none.status).toBe(400);
      expect(none.body.details).toEqual([{ in: 'query', field: 'level', message: 'the current boundary version has no province level; GET /cities/levels lists the levels it has' }]);
    });

    it("serves the published cities with the boundary version and the service's release in a strong ETag, and 304 on If-None-Match", async () => {
      const geo = await getJson(`${svc.url}/cities?geoformat=geojson`);
      // Node's fetch asks for br/gzip: the strong ETag names the encoding too.
      expect(geo.headers.get('etag')).toMatch(new RegExp(`^"${version}-${VERSION_TAG}-geojson(-br|-gz)?"$`));
      expect(geo.body.result.features.map((f: any) => f.properties)).toEqual([
        { code: 'PH-QC', name: 'Quezon City' },
        { code: 'PH-PG', name: 'Pampanga' },
      ]);
      expect(geo.body.result.features.map((f: any) => f.geometry)).toEqual(psa.cities.features.map((f) => f.geometry));

      const topo = await fetch(`${svc.url}/cities`);
      const etag = topo.headers.get('etag')!;
      expect(etag).toMatch(new RegExp(`^"${version}-${VERSION_TAG}-topojson(-br|-gz)?"$`));
      const body = (await topo.json()) as any;
      const decoded = feature(body.result as Topology, body.result.objects.output) as any;
      decoded.features.forEach((f: any, i: number) => {
        const ring = f.geometry.coordinates[0];
        const want = (psa.cities.features[i]!.geometry.coordinates as number[][][])[0]!;
        expect(ring[0]).toEqual(ring[ring.length - 1]);
        expect(ring.length).toBe(want.length);
        const worst = Math.max(...ring.map(([x, y]: number[], j: number) => Math.max(Math.abs(x! - want[j]![0]!), Math.abs(y! - want[j]![1]!))));
        expect(worst).toBeLessThan(1e-5);
      });
      const again = await fetch(`${svc.url}/cities`, { headers: { 'If-None-Match': etag } });
      expect(again.status).toBe(304);
      const otherFormat = await fetch(`${svc.url}/cities?geoformat=geojson`, { headers: { 'If-None-Match': etag } });
      expect(otherFormat.status).toBe(200);
    });

    it('rollback restores the previous /cities answer and ETag', async () => {
      const versions = await svc.rt.boundaries.versions();
      const previous = versions.find((v) => v !== version)!;
      await svc.rt.boundaries.rollback(previous);
      const res = await getJson(`${svc.url}/cities?geoformat=geojson`);
      expect(res.headers.get('etag')).toMatch(new RegExp(`^"${previous}-${VERSION_TAG}-geojson(-br|-gz)?"$`));
      const shipped = (await defaultBoundaries()).cities.features.map((f) => ({ type: 'Feature', geometry: f.geometry, properties: { code: f.properties.code, name: f.properties.name } }));
      expect(res.body.result.features).toEqual(shipped);
      await svc.rt.boundaries.rollback(version);
    });

    it("answers a map pinned to a version another process published, before this one's pointer has moved to it", async () => {
      const elsewhere = new BoundaryRepository(svc.rt.store);
      const before = (await getJson(`${svc.url}/cities/levels`)).body.result.version;
      const { version: next } = await elsewhere.publish({ ...psa, label: `${psa.label}, published elsewhere` });
      try {
        // This process trusts the pointer it read for a few seconds: unpinned, still the version before.
        expect((await getJson(`${svc.url}/cities/levels`)).body.result.version).toBe(before);
        // A map whose levels another process answered names the new version: this one reads the pointer again.
        const pinned = await getJson(`${svc.url}/cities/outlines?version=${next}`);
        expect(pinned.status).toBe(200);
        expect(pinned.headers.get('etag')).toMatch(new RegExp(`^"${next}-`));
      } finally {
        await elsewhere.rollback(before);
        // This process reads the pointer again at once (its read above named the new version).
        await svc.rt.boundaries.latest();
      }
    });

    it('answers a map begun before a publish from the version it began with; a version no longer served is a 410, a malformed one a 400', async () => {
      const versions = await svc.rt.boundaries.versions();
      const previous = versions.find((v) => v !== version)!;
      const began = (await getJson(`${svc.url}/cities/levels`)).body.result.version;
      expect(began).toBe(version);
      // Published meanwhile (here, the version before made current again).
      await svc.rt.boundaries.rollback(previous);
      try {
        const now = await getJson(`${svc.url}/cities/outlines`);
        expect(now.headers.get('etag')).toMatch(new RegExp(`^"${previous}-`));
        for (const path of ['/cities/outlines', '/cities/levels', '/cities', '/cities/PH-QC/local-areas']) {
          const pinned = await getJson(`${svc.url}${path}?version=${began}`);
          expect(pinned.status, path).toBe(200);
          expect(pinned.headers.get('etag'), path).toMatch(new RegExp(`^"${began}-`));
        }
        expect((await getJson(`${svc.url}/cities/levels?version=${began}`)).body.result.version).toBe(began);
        const gone = await getJson(`${svc.url}/cities/outlines?version=${'0'.repeat(24)}`);
        expect(gone.status).toBe(410);
        expect(gone.body).toMatchObject({ statusCode: 410, error: 'Gone', details: [{ in: 'query', field: 'version' }] });
        expect(gone.body.details[0].message).toContain(`the current one is ${previous}`);
        // Beside another problem of the query, one of the 400's problems.
        const andLevel = await getJson(`${svc.url}/cities/outlines?level=county&version=${'0'.repeat(24)}`);
        expect(andLevel.status).toBe(400);
        expect(andLevel.body.details.map((d: { field: string }) => d.field)).toEqual(['level', 'version']);
        const malformed = await getJson(`${svc.url}/cities/PH-QC/local-areas?version=latest`);
        expect(malformed.status).toBe(400);
        expect(malformed.body.details).toEqual([{ in: 'query', field: 'version', message: expect.stringMatching(/24 hexadecimal digits/) }]);
      } finally {
        await svc.rt.boundaries.rollback(version);
      }
    });
  });
});
