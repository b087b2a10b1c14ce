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
  /** Each feature's edges by horizontal band (large features only): see `containsAt`. */
  bands: readonly (Bands | undefined)[];
}

/**
 * A feature's edges sorted into horizontal bands of equal height, so a point's even-odd test
 * crosses only the edges of its band: a city's outline of 2,000 vertices is a few dozen edges at
 * any height. Edges are (ring, vertex) pairs; band b's are at [starts[b], starts[b + 1]).
 */
export interface Bands {
  minY: number;
  height: number;
  starts: Int32Array;
  edges: Int32Array;
}

/** Features with fewer vertices are tested edge by edge: their bands would not pay for themselves. */
const BANDED_FROM = 48;
/** About this many edges a band. */
const EDGES_PER_BAND = 8;

function bandsOf(rings: readonly Float64Array[], minY: number, maxY: number): Bands | undefined {
  const vertices = rings.reduce((n, r) => n + r.length / 2, 0);
  if (vertices < BANDED_FROM || !(maxY > minY)) return undefined;
  const count = Math.min(1024, Math.ceil(vertices / EDGES_PER_BAND));
  const height = (maxY - minY) / count;
  const band = (y: number) => Math.min(count - 1, Math.max(0, Math.floor((y - minY) / height)));
  const lists: number[][] = Array.from({ length: count }, () => []);
  rings.forEach((ring, k) => {
    for (let i = 0, j = ring.length - 2; i < ring.length; j = i, i += 2) {
      const [y0, y1] = ring[i + 1]! < ring[j + 1]! ? [ring[i + 1]!, ring[j + 1]!] : [ring[j + 1]!, ring[i + 1]!];
      for (let b = band(y0); b <= band(y1); b++) lists[b]!.push(k, i);
    }
  });
  const starts = new Int32Array(count + 1);
  lists.forEach((l, b) => (starts[b + 1] = starts[b]! + l.length));
  const edges = new Int32Array(starts[count]!);
  lists.forEach((l, b) => edges.set(l, starts[b]!));
  return { minY, height, starts, edges };
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
  const bands = rings.map((r, i) => bandsOf(r, bboxes[4 * i + 1]!, bboxes[4 * i + 3]!));
  return { properties: features.map((f) => f.properties), geometries: features.map((f) => JSON.stringify(f.geometry)), bboxes, rings, bands };
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

/** Whether a point lies in feature `i` of a level: `contains`, over its band's edges alone where it has bands. */
export function containsAt(level: Level<unknown>, i: number, x: number, y: number): boolean {
  const bands = level.bands[i];
  const rings = level.rings[i]!;
  if (!bands) return contains(rings, x, y);
  const b = Math.floor((y - bands.minY) / bands.height);
  if (b < 0 || b >= bands.starts.length - 1) return false;
  let inside = false;
  for (let e = bands.starts[b]!; e < bands.starts[b + 1]!; e += 2) {
    const ring = rings[bands.edges[e]!]!;
    const i0 = bands.edges[e + 1]!;
    const j0 = i0 === 0 ? ring.length - 2 : i0 - 2;
    const yi = ring[i0 + 1]!;
    const yj = ring[j0 + 1]!;
    if (yi > y !== yj > y) {
      const xi = ring[i0]!;
      const xj = ring[j0]!;
      if (x < ((xj - xi) * (y - yi)) / (yj - yi) + xi) inside = !inside;
    }
  }
  return inside;
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
