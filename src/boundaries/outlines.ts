// A boundary version's levels as a map draws them: per level, one TopoJSON simplified for the
// zooms it is shown at, with small islands left out and coordinates quantized. The national
// cities are 1.5 MB as /cities quantizes them; the regions a country-wide map opens on are
// 0.1 MB here. Made once per version and level, on first use (the explorer's warm-up asks for
// the first), from the compact levels the process already holds.
//
// Each level's figures are for the explorer's zooms (web/explorer.js): regions up to zoom 6
// (a pixel is 2.4 km), provinces at 7 and 8 (600 m), cities at 9 and 10 (150 m); barangays
// beyond come per city from /cities/{code}/local-areas, unsimplified.
import { topology } from 'topojson-server';
import { quantize } from 'topojson-client';
import { filter, filterWeight, presimplify, simplify } from 'topojson-simplify';
import type { FeatureCollection } from 'geojson';
import type { GeometryCollection, Topology } from 'topojson-specification';
import { geometryOf, type CompactLevels, type Level } from './compactLevels.js';
import type { Area } from './types.js';
import { areaCode, cityParents } from './hierarchy.js';

export const OUTLINE_LEVELS = ['region', 'province', 'city'] as const;
export type OutlineLevel = (typeof OUTLINE_LEVELS)[number];

interface Shape {
  /** Visvalingam: a point goes when the triangle it makes with its neighbours is smaller (degrees²). */
  minTriangle: number;
  /** A ring (an island, a hole) smaller than this goes (degrees²). */
  minRing: number;
  /** Quantization over the level's extent: a grid step of about 150 m (regions, provinces) or 60 m (cities) nationally. */
  quantization: number;
}

const SHAPES: Record<OutlineLevel, Shape> = {
  region: { minTriangle: 3e-4, minRing: 1e-3, quantization: 1e4 },
  province: { minTriangle: 3e-5, minRing: 3e-5, quantization: 1e4 },
  city: { minTriangle: 2e-6, minRing: 2e-6, quantization: 3e4 },
};

/** The levels a version has, with their number of features. */
export function outlineLevels(levels: CompactLevels): { level: OutlineLevel; count: number }[] {
  const of = { region: levels.regions, province: levels.provinces, city: levels.cities };
  return OUTLINE_LEVELS.flatMap((level) => (of[level] ? [{ level, count: of[level].properties.length }] : []));
}

/** A level's outlines as TopoJSON (object `output`, each geometry with `code` and `name`, a city with its `province` where it has one); undefined where the version lacks the level. */
export function outlinesOf(levels: CompactLevels, level: OutlineLevel): Topology | undefined {
  const features = featuresOf(levels, level);
  if (!features) return undefined;
  const shape = SHAPES[level];
  const collection: FeatureCollection<Area, { code: string; name: string; province?: string }> = { type: 'FeatureCollection', features };
  const simpler = simplify(presimplify(topology({ output: collection }) as unknown as Parameters<typeof presimplify>[0]), shape.minTriangle);
  // The typings call a ring its positions; at run time it is the ring's arc indexes, as in the geometries.
  const large = filterWeight(simpler, shape.minRing) as unknown as (ring: number[], interior: boolean) => boolean;
  // A feature whose every polygon is small (an islet municipality) keeps them all: it stays on the map.
  const whole = new Set<unknown>();
  for (const g of (simpler.objects.output as GeometryCollection).geometries) {
    const polygons = g.type === 'Polygon' ? [g.arcs] : g.type === 'MultiPolygon' ? g.arcs : [];
    if (!polygons.some((rings) => rings.length > 0 && large(rings[0]!, false))) for (const rings of polygons) for (const ring of rings) whole.add(ring);
  }
  return quantize(
    filter(simpler, ((ring: number[], interior: boolean) => whole.has(ring) || large(ring, interior)) as unknown as Parameters<typeof filter>[1]),
    shape.quantization,
  );
}

function featuresOf(levels: CompactLevels, level: OutlineLevel) {
  const feature = (l: Level<unknown>, i: number, code: string, name: string, province?: string | null) => ({
    type: 'Feature' as const,
    geometry: geometryOf(l, i),
    properties: { code, name, ...(province && { province }) },
  });
  if (level === 'city') {
    // Each city with its province, where the version has them: ten San Joses nationally, told apart on a map by their provinces.
    const { province } = cityParents(levels);
    return levels.cities.properties.map((p, i) => feature(levels.cities, i, p.code, p.name, province[i]));
  }
  const l = level === 'region' ? levels.regions : levels.provinces;
  return l?.properties.map((p, i) => feature(l, i, areaCode(p.psgc), p.name));
}
