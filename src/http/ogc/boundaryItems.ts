// The boundary collections (`regions`, `provinces`, `cities`, `local-areas`): the current boundary
// version's polygons as OGC API – Features items, paged by offset. A version without regions and
// provinces (the two-city default) has empty collections of them.
import type { Feature } from 'geojson';
import { geometryOf, intersectsBox, type CompactLevels, type Level } from '../../boundaries/compactLevels.js';
import type { BoundaryRepository } from '../../boundaries/repository.js';
import type { Bbox } from './params.js';

export type BoundaryCollection = 'regions' | 'provinces' | 'cities' | 'local-areas';

/** Each collection's level of the version, its item id and the properties an item shows. */
const LEVELS: Record<BoundaryCollection, { level: (l: CompactLevels) => Level<object> | undefined; id: (p: Record<string, unknown>) => unknown; properties: (p: Record<string, unknown>) => Record<string, unknown> }> = {
  regions: { level: (l) => l.regions, id: (p) => p.psgc, properties: (p) => ({ psgc: p.psgc, name: p.name }) },
  provinces: { level: (l) => l.provinces, id: (p) => p.psgc, properties: (p) => ({ psgc: p.psgc, name: p.name, region_psgc: p.region_psgc }) },
  cities: { level: (l) => l.cities, id: (p) => p.code, properties: (p) => ({ code: p.code, name: p.name }) },
  'local-areas': { level: (l) => l.localAreas, id: (p) => p.psgc, properties: (p) => ({ psgc: p.psgc, name: p.name, city_code: p.city_code }) },
};

interface Indexed {
  version: string;
  /** `at`: the feature's position in its level (its geometry is parsed only for the items answered). */
  features: { at: number; properties: Record<string, unknown>; id: string; bbox: Bbox }[];
  level: Level<object> | undefined;
  extent: Bbox;
}

const intersects = (a: Bbox, b: Bbox) => a[0] <= b[2] && b[0] <= a[2] && a[1] <= b[3] && b[1] <= a[3];

export class BoundaryItems {
  private readonly indexed = new Map<BoundaryCollection, Indexed>();

  constructor(private readonly boundaries: BoundaryRepository) {}

  async extent(collection: BoundaryCollection): Promise<Bbox | undefined> {
    const index = await this.index(collection);
    return index.features.length > 0 ? index.extent : undefined;
  }

  async page(collection: BoundaryCollection, bbox: Bbox | undefined, limit: number, offset: number): Promise<{ features: Feature[]; numberMatched: number }> {
    const index = await this.index(collection);
    // Part 1: the items whose geometry meets the box, not only their bounding box.
    const matched = bbox ? index.features.filter((f) => intersects(f.bbox, bbox) && intersectsBox(index.level!, f.at, bbox)) : index.features;
    return { features: matched.slice(offset, offset + limit).map((f) => this.itemOf(index.level!, f)), numberMatched: matched.length };
  }

  async item(collection: BoundaryCollection, id: string): Promise<Feature | undefined> {
    const index = await this.index(collection);
    const found = index.features.find((f) => f.id === id);
    return found ? this.itemOf(index.level!, found) : undefined;
  }

  private itemOf(level: Level<object>, f: Indexed['features'][number]): Feature {
    return { type: 'Feature', id: f.id, geometry: geometryOf(level, f.at), properties: f.properties };
  }

  private async index(collection: BoundaryCollection): Promise<Indexed> {
    const current = await this.boundaries.current();
    const hit = this.indexed.get(collection);
    if (hit?.version === current.version) return hit;
    const { level: levelOf, id, properties } = LEVELS[collection];
    const level = levelOf(current.levels);
    const features = (level?.properties ?? []).map((p, at) => {
      const b = level!.bboxes;
      return { at, properties: properties(p as Record<string, unknown>), id: String(id(p as Record<string, unknown>)), bbox: [b[4 * at]!, b[4 * at + 1]!, b[4 * at + 2]!, b[4 * at + 3]!] as Bbox };
    });
    const extent = features.reduce<Bbox>((b, f) => [Math.min(b[0], f.bbox[0]), Math.min(b[1], f.bbox[1]), Math.max(b[2], f.bbox[2]), Math.max(b[3], f.bbox[3])], [Infinity, Infinity, -Infinity, -Infinity]);
    const index: Indexed = { version: current.version, features, level, extent };
    this.indexed.set(collection, index);
    return index;
  }
}
