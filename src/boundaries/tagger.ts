// Point-in-polygon tagging: which city and which barangay hold a point, and the city's province
// and region. Bbox indexes (flatbush) narrow 1,642 cities and 41,096 barangays to the few worth an
// exact test. The province and region are the city's in the version's hierarchy (hierarchy.ts),
// so the tags always nest (a report counted in a city is counted in its province and region).
import Flatbush from 'flatbush';
import { compactLevels, containsAt, type CompactLevels, type Level } from './compactLevels.js';
import { cityParents, type CityParents } from './hierarchy.js';
import type { BoundarySet } from './types.js';

/** A report's tags (the archive's tag columns, schema.ts). */
export interface Tags {
  instance_region_code: string | null;
  local_area_id: string | null;
  province_code: string | null;
  region_code: string | null;
}

export class Tagger {
  private readonly cityIndex: Flatbush | undefined;
  private readonly areaIndex: Flatbush | undefined;

  private readonly levels: CompactLevels;
  private readonly parents: CityParents;

  /** From a loaded version's levels, or from a boundary set as published (its levels made here). */
  constructor(boundaries: CompactLevels | BoundarySet) {
    const levels = 'features' in boundaries.cities ? compactLevels(boundaries as BoundarySet) : (boundaries as CompactLevels);
    this.levels = levels;
    this.cityIndex = indexOf(levels.cities);
    this.areaIndex = indexOf(levels.localAreas);
    this.parents = cityParents(levels);
  }

  tag(lng: number, lat: number): Tags {
    const { cities, localAreas } = this.levels;
    // The first city in the version's order that holds the point (cities overlap only by slivers at borders).
    let first = Infinity;
    for (const i of this.cityIndex?.search(lng, lat, lng, lat) ?? []) {
      if (i < first && containsAt(cities, i, lng, lat)) first = i;
    }
    const city = first === Infinity ? null : cities.properties[first]!.code;
    let area: string | null = null;
    if (this.areaIndex) {
      // Prefer a barangay of the city that holds the point; the lowest PSGC for a stable pick where barangays overlap.
      let best: { psgc: string; ofCity: boolean } | undefined;
      for (const i of this.areaIndex.search(lng, lat, lng, lat)) {
        if (!containsAt(localAreas, i, lng, lat)) continue;
        const p = localAreas.properties[i]!;
        const ofCity = p.city_code === city;
        if (!best || (ofCity && !best.ofCity) || (ofCity === best.ofCity && p.psgc < best.psgc)) best = { psgc: p.psgc, ofCity };
      }
      area = best?.psgc ?? null;
    }
    const found = first !== Infinity;
    return { instance_region_code: city, local_area_id: area, province_code: found ? this.parents.province[first]! : null, region_code: found ? this.parents.region[first]! : null };
  }
}

/** A bbox index of a level's features, or none for none. */
function indexOf(level: Level<unknown>): Flatbush | undefined {
  const n = level.properties.length;
  if (n === 0) return undefined;
  const index = new Flatbush(n);
  for (let i = 0; i < n; i++) index.add(level.bboxes[4 * i]!, level.bboxes[4 * i + 1]!, level.bboxes[4 * i + 2]!, level.bboxes[4 * i + 3]!);
  index.finish();
  return index;
}
