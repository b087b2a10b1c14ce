// A boundary version as a process keeps it: each level's properties, each feature's bbox, and its
// geometry as GeoJSON text (parsed only for the answers that show it) and as flat coordinate
// arrays (for point-in-polygon). The national set parsed as GeoJSON is millions of small arrays
// that every major garbage collection marks, in every thread that holds it; kept this way it is a
// few hundred thousand objects, and ingest does not pay for the boundaries it tags with.
import type { Area, BoundarySet, CityProps, LocalAreaProps, ProvinceProps, RegionProps } from './types.js';

export interface Level<P> {
  properties: readonly P[];
  /** Each feature's geometry, as its GeoJSON text. */
  geometries: readonly string[];
  /** Each feature's [minX, minY, maxX, maxY] at 4i. */
  bboxes: Float64Array;
  /** Each feature's rings, one flat [x0, y0, x1, y1, …] array a ring (holes included). */
  rings: readonly (readonly Float64Array[])[];
}

export interface CompactLevels {
  regions?: Level<RegionProps> | undefined;
  provinces?: Level<ProvinceProps> | undefined;
  cities: Level<CityProps>;
  localAreas: Level<LocalAreaProps>;
}

function levelOf<P>(features: readonly { properties: P; geometry: Area }[]): Level<P> {
  const bboxes = new Float64Array(features.length * 4);
  const rings = features.map((f, i) => {
    const polygons = f.geometry.type === 'Polygon' ? [f.geometry.coordinates] : f.geometry.coordinates;
    let [minX, minY, maxX, maxY] = [Infinity, Infinity, -Infinity, -Infinity];
    const flat = polygons.flatMap((polygon) =>
      polygon.map((ring) => {
        const out = new Float64Array(ring.length * 2);
        ring.forEach(([x, y], k) => {
          out[2 * k] = x!;
          out[2 * k + 1] = y!;
          if (x! < minX) minX = x!;
          if (x! > maxX) maxX = x!;
          if (y! < minY) minY = y!;
          if (y! > maxY) maxY = y!;
        });
        return out;
      }),
    );
    bboxes.set([minX, minY, maxX, maxY], 4 * i);
    return flat;
  });
  return { properties: features.map((f) => f.properties), geometries: features.map((f) => JSON.stringify(f.geometry)), bboxes, rings };
}

export function compactLevels(set: BoundarySet): CompactLevels {
  return {
    ...(set.regions && { regions: levelOf(set.regions.features) }),
    ...(set.provinces && { provinces: levelOf(set.provinces.features) }),
    cities: levelOf(set.cities.features),
    localAreas: levelOf(set.localAreas.features),
  };
}

/** A feature's geometry, parsed anew (callers may keep or change it). */
export function geometryOf(level: Level<unknown>, i: number): Area {
  return JSON.parse(level.geometries[i]!) as Area;
}

/**
 * Whether a point lies in a feature: the even-odd rule over all its rings (a point on an edge
 * may fall either way, as with any boundary shared by two polygons).
 */
export function contains(rings: readonly Float64Array[], x: number, y: number): boolean {
  let inside = false;
  for (const ring of rings) {
    const n = ring.length;
    for (let i = 0, j = n - 2; i < n; j = i, i += 2) {
      const yi = ring[i + 1]!;
      const yj = ring[j + 1]!;
      if (yi > y !== yj > y) {
        const xi = ring[i]!;
        const xj = ring[j]!;
        if (x < ((xj - xi) * (y - yi)) / (yj - yi) + xi) inside = !inside;
      }
    }
  }
  return inside;
}
