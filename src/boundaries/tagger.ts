// Point-in-polygon tagging: which city and which barangay hold a point.
// A bbox index (flatbush) narrows 680 barangays to the few worth an exact test.
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
  private readonly cityBoxes: number[][];
  private readonly areas: LocalAreaFeature[];
  private readonly areaIndex: Flatbush | undefined;

  constructor(set: BoundarySet) {
    this.cities = set.cities.features;
    this.cityBoxes = this.cities.map((f) => bboxOf(f.geometry));
    this.areas = set.localAreas.features;
    if (this.areas.length > 0) {
      this.areaIndex = new Flatbush(this.areas.length);
      for (const f of this.areas) {
        const [a, b, c, d] = bboxOf(f.geometry) as [number, number, number, number];
        this.areaIndex.add(a, b, c, d);
      }
      this.areaIndex.finish();
    }
  }

  tag(lng: number, lat: number): Tags {
    const point: Position = [lng, lat];
    let city: string | null = null;
    for (let i = 0; i < this.cities.length; i++) {
      const box = this.cityBoxes[i]!;
      if (lng < box[0]! || lat < box[1]! || lng > box[2]! || lat > box[3]!) continue;
      const f = this.cities[i]!;
      if (booleanPointInPolygon(point, f.geometry)) {
        city = f.properties.code;
        break;
      }
    }
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
