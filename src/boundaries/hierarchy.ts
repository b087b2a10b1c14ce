// Each city's province and region in a boundary version, as tags and `admin=` use them. A city
// names its own (PSGC's province_psgc and region_psgc); an independent city (PSA lists 16 highly
// urbanised cities in no province: Angeles, Cebu City, …) is given the province whose polygon
// holds it, as its address names it, so a report in Angeles counts in Pampanga and the four
// tags of a report always nest.
import { containsAt, type CompactLevels, type Level } from './compactLevels.js';

/** The code of a province or region (`PH-` and its PSGC code), in `admin=` and in reports' tags. */
export const areaCode = (psgc: string): string => `PH-${psgc}`;

export interface CityParents {
  /** Each city's province code, in the cities' order; null where the version has no provinces or none holds it. */
  province: readonly (string | null)[];
  /** Each city's region code, in the cities' order; null where the version has no regions. */
  region: readonly (string | null)[];
}

export function cityParents(levels: CompactLevels): CityParents {
  const { cities, provinces, regions } = levels;
  const province = cities.properties.map((c, i) => {
    if (!provinces) return null;
    if (c.province_psgc) return areaCode(c.province_psgc);
    const point = interiorPoint(cities.rings[i]!);
    const holder = point && findHolder(provinces, point[0], point[1]);
    return holder === undefined ? null : areaCode(provinces.properties[holder]!.psgc);
  });
  const region = cities.properties.map((c) => (regions && c.region_psgc ? areaCode(c.region_psgc) : null));
  return { province, region };
}

/** The first feature of a level whose polygon holds the point. */
function findHolder(level: Level<unknown>, x: number, y: number): number | undefined {
  for (let i = 0; i < level.properties.length; i++) {
    const b = level.bboxes;
    if (x < b[4 * i]! || y < b[4 * i + 1]! || x > b[4 * i + 2]! || y > b[4 * i + 3]!) continue;
    if (containsAt(level, i, x, y)) return i;
  }
  return undefined;
}

/**
 * A point inside a feature, away from its edges: on the horizontal line through the middle of its
 * longest ring, the midpoint of the widest span between two crossings of all its rings.
 */
function interiorPoint(rings: readonly Float64Array[]): [number, number] | undefined {
  const outer = [...rings].sort((a, b) => b.length - a.length)[0];
  if (!outer) return undefined;
  let [minY, maxY] = [Infinity, -Infinity];
  for (let i = 1; i < outer.length; i += 2) [minY, maxY] = [Math.min(minY, outer[i]!), Math.max(maxY, outer[i]!)];
  const y = (minY + maxY) / 2;
  const xs: number[] = [];
  for (const ring of rings) {
    for (let i = 0, j = ring.length - 2; i < ring.length; j = i, i += 2) {
      const [xi, yi, xj, yj] = [ring[i]!, ring[i + 1]!, ring[j]!, ring[j + 1]!];
      if (yi > y !== yj > y) xs.push(((xj - xi) * (y - yi)) / (yj - yi) + xi);
    }
  }
  xs.sort((a, b) => a - b);
  let best: [number, number] | undefined;
  for (let k = 0; k + 1 < xs.length; k += 2) if (!best || xs[k + 1]! - xs[k]! > best[1] - best[0]) best = [xs[k]!, xs[k + 1]!];
  return best && [(best[0] + best[1]) / 2, y];
}
