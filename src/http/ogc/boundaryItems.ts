// The boundary collections (`regions`, `provinces`, `cities`, `local-areas`): the current boundary
// version's polygons as OGC API – Features items, paged by offset. A version without regions and
// provinces (the two-city default) has empty collections of them.
import type { Feature } from 'geojson';
import type { BoundaryRepository } from '../../boundaries/repository.js';
import type { Area, BoundarySet } from '../../boundaries/types.js';
import type { Bbox } from './params.js';

export type BoundaryCollection = 'regions' | 'provinces' | 'cities' | 'local-areas';

/** Each collection's features, their item id and the properties an item shows. */
const LEVELS: Record<BoundaryCollection, { features: (set: BoundarySet) => readonly Feature<Area, object>[]; id: (p: Record<string, unknown>) => unknown; properties: (p: Record<string, unknown>) => Record<string, unknown> }> = {
  regions: { features: (s) => s.regions?.features ?? [], id: (p) => p.psgc, properties: (p) => ({ psgc: p.psgc, name: p.name }) },
  provinces: { features: (s) => s.provinces?.features ?? [], id: (p) => p.psgc, properties: (p) => ({ psgc: p.psgc, name: p.name, region_psgc: p.region_psgc }) },
  cities: { features: (s) => s.cities.features, id: (p) => p.code, properties: (p) => ({ code: p.code, name: p.name }) },
  'local-areas': { features: (s) => s.localAreas.features, id: (p) => p.psgc, properties: (p) => ({ psgc: p.psgc, name: p.name, city_code: p.city_code }) },
};

interface Indexed {
  version: string;
  features: { feature: Feature<Area, Record<string, unknown>>; id: string; bbox: Bbox }[];
  extent: Bbox;
}

function bboxOf(area: Area): Bbox {
  const box: Bbox = [Infinity, Infinity, -Infinity, -Infinity];
  const polygons = area.type === 'Polygon' ? [area.coordinates] : area.coordinates;
  for (const polygon of polygons) {
    for (const ring of polygon) {
      for (const [x, y] of ring) {
        if (x! < box[0]) box[0] = x!;
        if (y! < box[1]) box[1] = y!;
        if (x! > box[2]) box[2] = x!;
        if (y! > box[3]) box[3] = y!;
      }
    }
  }
  return box;
}

const intersects = (a: Bbox, b: Bbox) => a[0] <= b[2] && b[0] <= a[2] && a[1] <= b[3] && b[1] <= a[3];

export class BoundaryItems {
  private readonly indexed = new Map<BoundaryCollection, Indexed>();

  constructor(private readonly boundaries: BoundaryRepository) {}

  /** The version the answers come from (its id is part of their ETag). */
  async version(): Promise<string> {
    return (await this.boundaries.current()).version;
  }

  async extent(collection: BoundaryCollection): Promise<Bbox | undefined> {
    const index = await this.index(collection);
    return index.features.length > 0 ? index.extent : undefined;
  }

  async page(collection: BoundaryCollection, bbox: Bbox | undefined, limit: number, offset: number): Promise<{ features: Feature[]; numberMatched: number }> {
    const index = await this.index(collection);
    const matched = bbox ? index.features.filter((f) => intersects(f.bbox, bbox)) : index.features;
    return { features: matched.slice(offset, offset + limit).map((f) => this.itemOf(f)), numberMatched: matched.length };
  }

  async item(collection: BoundaryCollection, id: string): Promise<Feature | undefined> {
    const found = (await this.index(collection)).features.find((f) => f.id === id);
    return found ? this.itemOf(found) : undefined;
  }

  private itemOf(f: Indexed['features'][number]): Feature {
    return { type: 'Feature', id: f.id, geometry: f.feature.geometry, properties: f.feature.properties };
  }

  private async index(collection: BoundaryCollection): Promise<Indexed> {
    const current = await this.boundaries.current();
    const hit = this.indexed.get(collection);
    if (hit?.version === current.version) return hit;
    const level = LEVELS[collection];
    const features = level.features(current.set).map((feature) => {
      const p = feature.properties as Record<string, unknown>;
      return {
        feature: { ...feature, properties: level.properties(p) } as Feature<Area, Record<string, unknown>>,
        id: String(level.id(p)),
        bbox: bboxOf(feature.geometry),
      };
    });
    const extent = features.reduce<Bbox>((b, f) => [Math.min(b[0], f.bbox[0]), Math.min(b[1], f.bbox[1]), Math.max(b[2], f.bbox[2]), Math.max(b[3], f.bbox[3])], [Infinity, Infinity, -Infinity, -Infinity]);
    const index: Indexed = { version: current.version, features, extent };
    this.indexed.set(collection, index);
    return index;
  }
}
