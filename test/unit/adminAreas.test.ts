// admin= at any level of a boundary version: a city names itself, a province or region the cities
// it covers; an unknown code gets the closest codes. Subscriptions keep a province or region and
// match reports by their tags.
import { describe, expect, it } from 'vitest';
import { AdminAreas } from '../../src/boundaries/adminAreas.js';
import { compactLevels } from '../../src/boundaries/compactLevels.js';
import { defaultBoundaries } from '../../src/boundaries/defaultBoundaries.js';
import { HostPolicy } from '../../src/events/hostPolicy.js';
import { matches } from '../../src/events/eventLog.js';
import type { ReportFeature } from '../../src/events/feature.js';
import { newSubscription } from '../../src/events/subscriptions.js';
import { loadNationalBoundaries } from '../support/sharedData.js';

const national = await loadNationalBoundaries();
const areas = new AdminAreas(compactLevels(national));
const cities = national.cities.features.map((f) => f.properties);

describe('admin areas', () => {
  it('covers a region or a province with its cities, and a city with itself, in the national set', () => {
    for (const region of national.regions!.features) {
      const psgc = region.properties.psgc;
      expect(areas.get(`PH-${psgc}`)).toEqual({ code: `PH-${psgc}`, name: region.properties.name, level: 'region', cities: cities.filter((c) => c.region_psgc === psgc).map((c) => c.code) });
    }
    // Every city is in exactly one region.
    expect(national.regions!.features.reduce((n, r) => n + areas.get(`PH-${r.properties.psgc}`)!.cities.length, 0)).toBe(1642);
    const pampanga = areas.get('PH-0305400000')!;
    expect(pampanga).toMatchObject({ name: 'Pampanga', level: 'province' });
    // Its 21 cities and municipalities, and Angeles, an independent city its polygon holds.
    expect(pampanga.cities).toHaveLength(22);
    expect(pampanga.cities).toContain('PH-0330100000');
    // Each of the 16 independent cities is in the province PSA's address names (PROVENANCE.md).
    const provinceOf = (city: string) => national.provinces!.features.find((p) => areas.get(`PH-${p.properties.psgc}`)!.cities.includes(city))?.properties.name;
    expect(['PH-0730600000', 'PH-1030900000', 'PH-1430300000', 'PH-1731500000'].map(provinceOf)).toEqual(['Cebu', 'Lanao del Norte', 'Benguet', 'Palawan']);
    expect(cities.filter((c) => !c.province_psgc).every((c) => provinceOf(c.code) !== undefined)).toBe(true);
    expect(areas.get('PH-1381300000')).toEqual({ code: 'PH-1381300000', name: 'Quezon City', level: 'city', cities: ['PH-1381300000'] });
    expect(areas.get('PH-QC')).toBeUndefined();
  });

  it('names the closest codes for an unknown one, and lists them all where there are few', async () => {
    expect(areas.problem('PH-03054')).toMatch(/^must be the code of a region, province or city of the current boundaries \(GET \/cities, \/ogc\/collections\); closest: PH-0305400000 \(Pampanga\)/);
    // The two-city set's code for Quezon City shares only "PH-" with the national codes: no list of strangers.
    expect(areas.problem('PH-QC')).toBe('must be the code of a region, province or city of the current boundaries (GET /cities, /ogc/collections); none of its codes begins as PH-QC does');
    const twoCities = new AdminAreas(compactLevels(await defaultBoundaries()));
    expect(twoCities.problem('PH-MNL')).toBe('must be one of: PH-QC, PH-PG');
    expect(twoCities.problem('ph-qc')).toBe('must be written PH-QC (codes are matched as written, in upper case)');
    expect(areas.problem('ph-0305400000')).toBe('must be written PH-0305400000 (codes are matched as written, in upper case)');
    expect(twoCities.get('PH-PG')).toEqual({ code: 'PH-PG', name: 'Pampanga', level: 'city', cities: ['PH-PG'] });
  });

  it('keeps a subscription to a province or region as asked, and matches reports by their city, province or region tag', () => {
    const sub = newSubscription(
      { url: 'https://hooks.example.org/flood', secret: 'a'.repeat(32), admins: ['PH-0305400000', 'PH-1381300000', 'PH-0305400000'], localAreas: [], events: [] },
      new HostPolicy([]),
      { areas, localAreas: new Set() },
    );
    expect(sub.admins).toEqual(['PH-0305400000', 'PH-1381300000']);
    const feature = (tags: Partial<ReportFeature['properties']['tags']>) =>
      ({ type: 'Feature', geometry: { type: 'Point', coordinates: [0, 0] }, properties: { tags: { instance_region_code: null, local_area_id: null, province_code: null, region_code: null, ...tags } } }) as ReportFeature;
    expect(matches(sub, feature({ instance_region_code: 'PH-0330100000', province_code: 'PH-0305400000', region_code: 'PH-0300000000' }))).toBe(true);
    expect(matches(sub, feature({ instance_region_code: 'PH-1381300000' }))).toBe(true);
    expect(matches(sub, feature({ instance_region_code: 'PH-0331400000', province_code: 'PH-0307100000', region_code: 'PH-0300000000' }))).toBe(false);
    expect(matches({ admins: ['PH-0300000000'], localAreas: [] }, feature({ region_code: 'PH-0300000000' }))).toBe(true);
    expect(() => newSubscription({ url: 'https://hooks.example.org/flood', secret: 'a'.repeat(32), admins: ['PH-03054'], localAreas: [], events: [] }, new HostPolicy([]), { areas, localAreas: new Set() })).toThrow(/closest: PH-0305400000/);
  });
});
