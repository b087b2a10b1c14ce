// Point-in-polygon tagging: which city and which barangay hold a point.
// Bbox indexes (flatbush) narrow 1,642 cities and 41,096 barangays to the few worth an exact test.
import booleanPointInPolygon from '@turf/boolean-point-in-polygon';
import Flatbush from 'flatbush';
import type { Position } from 'geojson';
import type { Area, BoundarySet, CityFeature, LocalAreaFeature } from './types.js';

export interface Tags {
  instance_region_code: string | null;
  local_area_id: string | null;
}

export class Tagger {
  private readonly cities: CityFeature[];
  private readonly cityIndex: Flatbush;
  private readonly areas: LocalAreaFeature[];
  private readonly areaIndex: Flatbush | undefined;

  constructor(set: BoundarySet) {
    this.cities = set.cities.features;
    this.cityIndex = indexOf(this.cities)!;
    this.areas = set.localAreas.features;
    this.areaIndex = indexOf(this.areas);
  }

  tag(lng: number, lat: number): Tags {
    const point: Position = [lng, lat];
    // The first city in the version's order that holds the point (cities overlap only by slivers at borders).
    let city: string | null = null;
    let first = Infinity;
    for (const i of this.cityIndex.search(lng, lat, lng, lat)) {
      if (i < first && booleanPointInPolygon(point, this.cities[i]!.geometry)) first = i;
    }
    if (first !== Infinity) city = this.cities[first]!.properties.code;
    let area: string | null = null;
    if (this.areaIndex) {
      // Prefer a barangay of the city that holds the point; sort for a stable pick on shared edges.
      const hits = this.areaIndex
        .search(lng, lat, lng, lat)
        .map((i) => this.areas[i]!)
        .filter((f) => booleanPointInPolygon(point, f.geometry))
        .sort((a, b) => (a.properties.psgc < b.properties.psgc ? -1 : 1));
      const match = hits.find((f) => f.properties.city_code === city) ?? hits[0];
      area = match?.properties.psgc ?? null;
    }
    return { instance_region_code: city, local_area_id: area };
  }
}

/** A bbox index of the features, or none for none. */
function indexOf(features: readonly { geometry: Area }[]): Flatbush | undefined {
  if (features.length === 0) return undefined;
  const index = new Flatbush(features.length);
  for (const f of features) {
    const [a, b, c, d] = bboxOf(f.geometry) as [number, number, number, number];
    index.add(a, b, c, d);
  }
  index.finish();
  return index;
}

function bboxOf(geometry: Area): number[] {
  let minX = Infinity;
  let minY = Infinity;
  let maxX = -Infinity;
  let maxY = -Infinity;
  const polygons = geometry.type === 'Polygon' ? [geometry.coordinates] : geometry.coordinates;
  for (const rings of polygons) {
    for (const [x, y] of rings[0] ?? []) {
      if (x! < minX) minX = x!;
      if (y! < minY) minY = y!;
      if (x! > maxX) maxX = x!;
      if (y! > maxY) maxY = y!;
    }
  }
  return [minX, minY, maxX, maxY];
}
