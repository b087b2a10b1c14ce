// Checks a boundary set before it is published: a bad publish would mis-tag
// every report that follows, so nothing half-valid goes live.
import type { FeatureCollection, Position } from 'geojson';
import { PlaceNames, placesOf } from './placeNames.js';
import type { Area, BoundarySet } from './types.js';

/** PH-QC in the two-city set; PH- and the PSGC code nationally (PH-1381300000). */
const CITY_CODE = /^[A-Z]{2}-[A-Z0-9]{1,12}$/;
const PSGC = /^\d{10}$/;

export function boundaryProblems(set: BoundarySet): string[] {
  const problems: string[] = [];
  if (typeof set.label !== 'string' || set.label.trim() === '') problems.push('label: must be a non-empty string');
  if (set.cities?.type !== 'FeatureCollection' || !Array.isArray(set.cities.features)) {
    return [...problems, 'cities: must be a GeoJSON FeatureCollection'];
  }
  if (set.localAreas?.type !== 'FeatureCollection' || !Array.isArray(set.localAreas.features)) {
    return [...problems, 'local areas: must be a GeoJSON FeatureCollection'];
  }
  const regions = levelProblems(set.regions, 'regions', problems);
  const provinces = levelProblems(set.provinces, 'provinces', problems);
  if (Array.isArray(set.provinces?.features)) {
    set.provinces.features.forEach((f, i) => {
      if (set.regions && !regions.has(f?.properties?.region_psgc)) problems.push(`provinces[${i}]: region_psgc must name a region of this set`);
    });
  }
  if (set.cities.features.length === 0) problems.push('cities: at least one city is needed');
  // A city may have none (the City of Manila nationally), a set may not: a local-areas file left
  // empty by mistake would tag no report with a barangay from the moment it went live.
  if (set.localAreas.features.length === 0) problems.push('local areas: at least one local area (barangay) is needed');
  const codes = new Set<string>();
  const cityPsgcs = new Set<string>();
  const missingLevels = new Set<'regions' | 'provinces'>();
  set.cities.features.forEach((f, i) => {
    const where = `cities[${i}]`;
    if (!isFeature(f)) {
      problems.push(`${where}: must be a GeoJSON Feature`);
      return;
    }
    const code = f.properties?.code;
    if (typeof code !== 'string' || !CITY_CODE.test(code)) problems.push(`${where}: code must look like PH-QC`);
    else if (codes.has(code)) problems.push(`${where}: duplicate code ${code}`);
    else codes.add(code);
    problems.push(...nameProblems(f.properties?.name, where));
    const { psgc, region_psgc, province_psgc } = f.properties ?? {};
    if (psgc !== undefined && (typeof psgc !== 'string' || !PSGC.test(psgc))) problems.push(`${where}: psgc must be a 10-digit string`);
    else if (psgc !== undefined && cityPsgcs.has(psgc)) problems.push(`${where}: duplicate psgc ${psgc}`);
    else if (psgc !== undefined) cityPsgcs.add(psgc);
    if (set.regions && !regions.has(region_psgc)) problems.push(`${where}: region_psgc must name a region of this set`);
    if (set.provinces && province_psgc != null && !provinces.has(province_psgc)) problems.push(`${where}: province_psgc must name a province of this set, or be null`);
    // A level left out of the folder would leave every city's tag at that level empty.
    if (!set.regions && region_psgc != null) missingLevels.add('regions');
    if (!set.provinces && province_psgc != null) missingLevels.add('provinces');
    problems.push(...geometryProblems(f.geometry, where));
  });
  for (const level of missingLevels) problems.push(`cities name ${level} (${level === 'regions' ? 'region_psgc' : 'province_psgc'}), but the set has no ${level}.geojson: add it, or publish a folder whose cities name none`);
  const psgcs = new Set<string>();
  set.localAreas.features.forEach((f, i) => {
    const where = `localAreas[${i}]`;
    if (!isFeature(f)) {
      problems.push(`${where}: must be a GeoJSON Feature`);
      return;
    }
    const p = f.properties;
    if (typeof p?.psgc !== 'string' || !PSGC.test(p.psgc)) problems.push(`${where}: psgc must be a 10-digit string`);
    else if (psgcs.has(p.psgc)) problems.push(`${where}: duplicate psgc ${p.psgc}`);
    else psgcs.add(p.psgc);
    if (typeof p?.city_code !== 'string' || !codes.has(p.city_code)) problems.push(`${where}: city_code must name a city of this set`);
    problems.push(...nameProblems(p?.name, where));
    problems.push(...geometryProblems(f.geometry, where));
  });
  if (problems.length === 0) {
    // Every place a partner may name must have a label that names it alone.
    try {
      new PlaceNames(placesOf(set));
    } catch (err) {
      problems.push(`place names: ${(err as Error).message}`);
    }
  }
  return problems;
}

/** A level above the cities (regions, provinces): each a PSGC code once, a name and an area; returns the codes. */
function levelProblems(level: FeatureCollection<Area, { psgc: string; name: string }> | undefined, name: string, problems: string[]): Set<unknown> {
  const codes = new Set<unknown>();
  if (level === undefined) return codes;
  if (level?.type !== 'FeatureCollection' || !Array.isArray(level.features)) {
    problems.push(`${name}: must be a GeoJSON FeatureCollection`);
    return codes;
  }
  level.features.forEach((f, i) => {
    const where = `${name}[${i}]`;
    if (!isFeature(f)) {
      problems.push(`${where}: must be a GeoJSON Feature`);
      return;
    }
    const psgc = f.properties?.psgc;
    if (typeof psgc !== 'string' || !PSGC.test(psgc)) problems.push(`${where}: psgc must be a 10-digit string`);
    else if (codes.has(psgc)) problems.push(`${where}: duplicate psgc ${psgc}`);
    else codes.add(psgc);
    problems.push(...nameProblems(f.properties?.name, where));
    problems.push(...geometryProblems(f.geometry, where));
  });
  return codes;
}

/** As long as a post's `partner_city` may be: a longer name could never be named by a partner. */
const NAME_MAX = 200;

/** A name a partner can write and a line can show: 1 to NAME_MAX characters, no control characters. */
function nameProblems(name: unknown, where: string): string[] {
  if (typeof name !== 'string' || name.trim() === '') return [`${where}: name is required`];
  // Characters as JSON Schema counts them (code points), as the feed's check of partner_city does.
  const length = [...name].length;
  if (length > NAME_MAX) return [`${where}: name must be at most ${NAME_MAX} characters (a post's partner_city is), not ${length}`];
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(name)) return [`${where}: name must not hold control characters (a line break, a tab)`];
  return [];
}

/** A feature's shape, read from a file: an object (its members are checked one by one after). */
function isFeature(f: unknown): f is { properties?: Record<string, unknown> | null; geometry?: Area | null } {
  return typeof f === 'object' && f !== null && !Array.isArray(f);
}

function geometryProblems(geometry: Area | null | undefined, where: string): string[] {
  if (!geometry || (geometry.type !== 'Polygon' && geometry.type !== 'MultiPolygon')) {
    return [`${where}: geometry must be a Polygon or MultiPolygon`];
  }
  if (!Array.isArray(geometry.coordinates)) return [`${where}: geometry must have coordinates`];
  const polygons: Position[][][] = geometry.type === 'Polygon' ? [geometry.coordinates] : geometry.coordinates;
  const problems: string[] = [];
  polygons.forEach((rings) => {
    if (!Array.isArray(rings) || rings.length === 0) {
      problems.push(`${where}: a polygon needs an outer ring`);
      return;
    }
    rings.forEach((ring, r) => {
      if (!Array.isArray(ring) || ring.length < 4) {
        problems.push(`${where}: ring ${r} needs at least 4 positions`);
        return;
      }
      const bad = ring.some(
        (p) => !Array.isArray(p) || !Number.isFinite(p[0]) || !Number.isFinite(p[1]) || Math.abs(p[0]!) > 180 || Math.abs(p[1]!) > 90,
      );
      if (bad) {
        problems.push(`${where}: ring ${r} has a position outside longitude/latitude range`);
        return;
      }
      const first = ring[0]!;
      const last = ring[ring.length - 1]!;
      if (first[0] !== last[0] || first[1] !== last[1]) problems.push(`${where}: ring ${r} is not closed`);
      // Read as drawn, an edge from 179° to -179° goes the long way round: the area would claim
      // every point of its latitudes. GeoJSON (RFC 7946, 3.1.9) cuts such a shape at the antimeridian.
      if (ring.some((p, i) => i > 0 && Math.abs(p[0]! - ring[i - 1]![0]!) > 180)) {
        problems.push(`${where}: ring ${r} crosses the antimeridian (an edge spans more than 180° of longitude): cut it in two at ±180 (RFC 7946, 3.1.9)`);
      }
    });
  });
  return problems;
}
