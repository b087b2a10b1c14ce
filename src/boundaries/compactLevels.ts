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
  /** Each feature's rings, one flat [x0, y0, x1, y1, …] array a ring (holes included): views of `coordinates`. */
  rings: readonly (readonly Float64Array[])[];
  /**
   * Every ring's vertices one after another, feature by feature: feature i's rings are r in
   * [featureRings[i], featureRings[i + 1]), ring r's coordinates at [ringStarts[r], ringStarts[r + 1]).
   * A point's test reads these few arrays, not an object a ring (it tests features met at random,
   * and each object more is a memory read more).
   */
  coordinates: Float64Array;
  ringStarts: Int32Array;
  featureRings: Int32Array;
  /** The large features' edges by horizontal band: see `containsAt`. */
  bands: Bands;
}

/**
 * Large features' edges sorted into horizontal bands of equal height, so a point's even-odd test
 * crosses only the edges of its band: a city's outline of 2,000 vertices is a few dozen edges at
 * any height. Feature i's bands are b in [first[i], first[i + 1]) (none for a small feature), the
 * lowest starting at minY[i], each height[i] high; band b's edges are at [starts[b], starts[b + 1])
 * of `edges`, an edge as the offsets in `coordinates` of its two vertices.
 */
export interface Bands {
  minY: Float64Array;
  height: Float64Array;
  first: Int32Array;
  starts: Int32Array;
  edges: Int32Array;
}

/** Features with fewer vertices are tested edge by edge: their bands would not pay for themselves. */
const BANDED_FROM = 48;
/** About this many edges a band. */
const EDGES_PER_BAND = 8;

/** Whether feature i of a level has bands. */
export const isBanded = (level: Level<unknown>, i: number): boolean => level.bands.first[i + 1]! > level.bands.first[i]!;

function bandsOf(rings: readonly (readonly Float64Array[])[], ringStarts: Int32Array, featureRings: Int32Array, bboxes: Float64Array): Bands {
  const n = rings.length;
  const minYs = new Float64Array(n);
  const heights = new Float64Array(n);
  const first = new Int32Array(n + 1);
  const lists: number[][] = [];
  rings.forEach((ringsOf, f) => {
    first[f] = lists.length;
    const [minY, maxY] = [bboxes[4 * f + 1]!, bboxes[4 * f + 3]!];
    const vertices = ringsOf.reduce((v, r) => v + r.length / 2, 0);
    if (vertices < BANDED_FROM || !(maxY > minY)) return;
    const count = Math.min(1024, Math.ceil(vertices / EDGES_PER_BAND));
    const height = (maxY - minY) / count;
    minYs[f] = minY;
    heights[f] = height;
    const band = (y: number) => Math.min(count - 1, Math.max(0, Math.floor((y - minY) / height)));
    const own: number[][] = Array.from({ length: count }, () => []);
    ringsOf.forEach((ring, k) => {
      const at = ringStarts[featureRings[f]! + k]!;
      for (let i = 0, j = ring.length - 2; i < ring.length; j = i, i += 2) {
        const [y0, y1] = ring[i + 1]! < ring[j + 1]! ? [ring[i + 1]!, ring[j + 1]!] : [ring[j + 1]!, ring[i + 1]!];
        for (let b = band(y0); b <= band(y1); b++) own[b]!.push(at + i, at + j);
      }
    });
    lists.push(...own);
  });
  first[n] = lists.length;
  const starts = new Int32Array(lists.length + 1);
  lists.forEach((l, b) => (starts[b + 1] = starts[b]! + l.length));
  const edges = new Int32Array(starts[lists.length]!);
  lists.forEach((l, b) => edges.set(l, starts[b]!));
  return { minY: minYs, height: heights, first, starts, edges };
}

export interface CompactLevels {
  regions?: Level<RegionProps> | undefined;
  provinces?: Level<ProvinceProps> | undefined;
  cities: Level<CityProps>;
  localAreas: Level<LocalAreaProps>;
}

function levelOf<P>(features: readonly { properties: P; geometry: Area }[]): Level<P> {
  const polygonsOf = (g: Area) => (g.type === 'Polygon' ? [g.coordinates] : g.coordinates);
  let size = 0;
  let ringCount = 0;
  for (const f of features) {
    for (const polygon of polygonsOf(f.geometry)) {
      for (const ring of polygon) size += 2 * ring.length;
      ringCount += polygon.length;
    }
  }
  const coordinates = new Float64Array(size);
  const ringStarts = new Int32Array(ringCount + 1);
  const featureRings = new Int32Array(features.length + 1);
  const bboxes = new Float64Array(features.length * 4);
  let at = 0;
  let r = 0;
  const rings = features.map((f, i) => {
    featureRings[i] = r;
    let [minX, minY, maxX, maxY] = [Infinity, Infinity, -Infinity, -Infinity];
    const flat = polygonsOf(f.geometry).flatMap((polygon) =>
      polygon.map((ring) => {
        const start = at;
        ringStarts[r++] = start;
        for (const [x, y] of ring) {
          coordinates[at++] = x!;
          coordinates[at++] = y!;
          if (x! < minX) minX = x!;
          if (x! > maxX) maxX = x!;
          if (y! < minY) minY = y!;
          if (y! > maxY) maxY = y!;
        }
        return coordinates.subarray(start, at);
      }),
    );
    bboxes.set([minX, minY, maxX, maxY], 4 * i);
    return flat;
  });
  ringStarts[r] = at;
  featureRings[features.length] = r;
  const bands = bandsOf(rings, ringStarts, featureRings, bboxes);
  return { properties: features.map((f) => f.properties), geometries: features.map((f) => JSON.stringify(f.geometry)), bboxes, rings, coordinates, ringStarts, featureRings, bands };
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
  const { bands, coordinates: c } = level;
  const first = bands.first[i]!;
  const count = bands.first[i + 1]! - first;
  let inside = false;
  if (count === 0) {
    const { ringStarts, featureRings } = level;
    for (let r = featureRings[i]!, end = featureRings[i + 1]!; r < end; r++) {
      const start = ringStarts[r]!;
      const stop = ringStarts[r + 1]!;
      for (let k = start, j = stop - 2; k < stop; j = k, k += 2) {
        const yi = c[k + 1]!;
        const yj = c[j + 1]!;
        if (yi > y !== yj > y && x < crossingX(c[k]!, yi, c[j]!, yj, y)) inside = !inside;
      }
    }
    return inside;
  }
  const b = Math.floor((y - bands.minY[i]!) / bands.height[i]!);
  if (b < 0 || b >= count) return false;
  const { starts, edges } = bands;
  for (let e = starts[first + b]!, end = starts[first + b + 1]!; e < end; e += 2) {
    const k = edges[e]!;
    const j = edges[e + 1]!;
    const yi = c[k + 1]!;
    const yj = c[j + 1]!;
    if (yi > y !== yj > y && x < crossingX(c[k]!, yi, c[j]!, yj, y)) inside = !inside;
  }
  return inside;
}

/**
 * Where the edge (xi, yi)–(xj, yj) meets the line at height y, from its lower end whichever way
 * it runs: two neighbours run their shared edge in opposite directions, and the same arithmetic
 * gives both the same x to the last bit, so a point on that edge is in exactly one of them
 * (rounded each its own way, it could fall in neither).
 */
function crossingX(xi: number, yi: number, xj: number, yj: number, y: number): number {
  return yi < yj ? ((xj - xi) * (y - yi)) / (yj - yi) + xi : ((xi - xj) * (y - yj)) / (yi - yj) + xj;
}

/**
 * Whether a point lies in a feature: the even-odd rule over all its rings (a point on an edge
 * shared by two features is in the one to its right, as the crossing's x is the same for both).
 */
export function contains(rings: readonly Float64Array[], x: number, y: number): boolean {
  let inside = false;
  for (const ring of rings) {
    const n = ring.length;
    for (let i = 0, j = n - 2; i < n; j = i, i += 2) {
      const yi = ring[i + 1]!;
      const yj = ring[j + 1]!;
      if (yi > y !== yj > y && x < crossingX(ring[i]!, yi, ring[j]!, yj, y)) inside = !inside;
    }
  }
  return inside;
}

/**
 * Whether feature `i` of a level meets the box [minX, minY, maxX, maxY] (its area, not only its
 * bounding box): one of its edges crosses into the box, or the box lies inside it.
 */
export function intersectsBox(level: Level<unknown>, i: number, box: readonly [number, number, number, number]): boolean {
  const [minX, minY, maxX, maxY] = box;
  const b = level.bboxes;
  if (b[4 * i]! > maxX || b[4 * i + 2]! < minX || b[4 * i + 1]! > maxY || b[4 * i + 3]! < minY) return false;
  if (b[4 * i]! >= minX && b[4 * i + 2]! <= maxX && b[4 * i + 1]! >= minY && b[4 * i + 3]! <= maxY) return true;
  const { ringStarts, featureRings, coordinates: c } = level;
  for (let r = featureRings[i]!, end = featureRings[i + 1]!; r < end; r++) {
    for (let k = ringStarts[r]!, stop = ringStarts[r + 1]! - 2; k < stop; k += 2) {
      if (segmentMeetsBox(c[k]!, c[k + 1]!, c[k + 2]!, c[k + 3]!, minX, minY, maxX, maxY)) return true;
    }
  }
  // No edge in the box: it is inside the feature whole, or outside it.
  return containsAt(level, i, minX, minY);
}

/** Liang–Barsky: whether the segment (x0, y0)–(x1, y1) has a point in the box. */
function segmentMeetsBox(x0: number, y0: number, x1: number, y1: number, minX: number, minY: number, maxX: number, maxY: number): boolean {
  const dx = x1 - x0;
  const dy = y1 - y0;
  let t0 = 0;
  let t1 = 1;
  for (const [p, q] of [[-dx, x0 - minX], [dx, maxX - x0], [-dy, y0 - minY], [dy, maxY - y0]] as const) {
    if (p === 0) {
      if (q < 0) return false;
    } else {
      const t = q / p;
      if (p < 0) {
        if (t > t1) return false;
        if (t > t0) t0 = t;
      } else {
        if (t < t0) return false;
        if (t < t1) t1 = t;
      }
    }
  }
  return true;
}
