import type { Feature, FeatureCollection, MultiPolygon, Polygon } from 'geojson';

export type Area = Polygon | MultiPolygon;
export interface CityProps {
  code: string;
  name: string;
}
export interface LocalAreaProps {
  city_code: string;
  /** PSGC code, a 10-digit string (keep the leading zero). */
  psgc: string;
  name: string;
}
export type CityFeature = Feature<Area, CityProps>;
export type LocalAreaFeature = Feature<Area, LocalAreaProps>;

/** What a boundary version holds. Its id is the hash of this content. */
export interface BoundarySet {
  /** Says where the geometry comes from, e.g. "approximate outlines" or "PSA/NAMRIA 2023". */
  label: string;
  cities: FeatureCollection<Area, CityProps>;
  localAreas: FeatureCollection<Area, LocalAreaProps>;
}
