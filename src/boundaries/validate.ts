// Checks a boundary set before it is published: a bad publish would mis-tag
// every report that follows, so nothing half-valid goes live.
import type { Position } from 'geojson';
import type { Area, BoundarySet } from './types.js';

const CITY_CODE = /^[A-Z]{2}-[A-Z0-9]{1,8}$/;
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
  if (set.cities.features.length === 0) problems.push('cities: at least one city is needed');
  const codes = new Set<string>();
  set.cities.features.forEach((f, i) => {
    const where = `cities[${i}]`;
    const code = f.properties?.code;
    if (typeof code !== 'string' || !CITY_CODE.test(code)) problems.push(`${where}: code must look like PH-QC`);
    else if (codes.has(code)) problems.push(`${where}: duplicate code ${code}`);
    else codes.add(code);
    if (typeof f.properties?.name !== 'string' || f.properties.name === '') problems.push(`${where}: name is required`);
    problems.push(...geometryProblems(f.geometry, where));
  });
  const psgcs = new Set<string>();
  set.localAreas.features.forEach((f, i) => {
    const where = `localAreas[${i}]`;
    const p = f.properties;
    if (typeof p?.psgc !== 'string' || !PSGC.test(p.psgc)) problems.push(`${where}: psgc must be a 10-digit string`);
    else if (psgcs.has(p.psgc)) problems.push(`${where}: duplicate psgc ${p.psgc}`);
    else psgcs.add(p.psgc);
    if (typeof p?.city_code !== 'string' || !codes.has(p.city_code)) problems.push(`${where}: city_code must name a city of this set`);
    if (typeof p?.name !== 'string' || p.name === '') problems.push(`${where}: name is required`);
    problems.push(...geometryProblems(f.geometry, where));
  });
  return problems;
}

function geometryProblems(geometry: Area | null | undefined, where: string): string[] {
  if (!geometry || (geometry.type !== 'Polygon' && geometry.type !== 'MultiPolygon')) {
    return [`${where}: geometry must be a Polygon or MultiPolygon`];
  }
  const polygons: Position[][][] = geometry.type === 'Polygon' ? [geometry.coordinates] : geometry.coordinates;
  const problems: string[] = [];
  polygons.forEach((rings) => {
    if (!Array.isArray(rings) || rings.length === 0) problems.push(`${where}: a polygon needs an outer ring`);
    rings.forEach((ring, r) => {
      if (!Array.isArray(ring) || ring.length < 4) {
        problems.push(`${where}: ring ${r} needs at least 4 positions`);
        return;
      }
      const bad = ring.find(
        (p) => !Array.isArray(p) || !Number.isFinite(p[0]) || !Number.isFinite(p[1]) || Math.abs(p[0]!) > 180 || Math.abs(p[1]!) > 90,
      );
      if (bad) problems.push(`${where}: ring ${r} has a position outside longitude/latitude range`);
      const first = ring[0]!;
      const last = ring[ring.length - 1]!;
      if (first[0] !== last[0] || first[1] !== last[1]) problems.push(`${where}: ring ${r} is not closed`);
    });
  });
  return problems;
}
