import type { FeatureCollection, MultiPolygon, Polygon } from 'geojson';

export type Area = Polygon | MultiPolygon;
export interface RegionProps {
  /** PSGC code, a 10-digit string (keep the leading zero). */
  psgc: string;
  name: string;
}
export interface ProvinceProps {
  psgc: string;
  name: string;
  region_psgc: string;
}
/** An instance region (SPEC's "city"): a city or municipality nationally; Quezon City and the province of Pampanga in the two-city set. */
export interface CityProps {
  code: string;
  name: string;
  psgc?: string | undefined;
  /** Null for a city in no province (an independent city). */
  province_psgc?: string | null | undefined;
  region_psgc?: string | undefined;
  /** PSA's level: City, Mun or SGU. */
  kind?: string | undefined;
}
export interface LocalAreaProps {
  city_code: string;
  /** PSGC code, a 10-digit string (keep the leading zero). */
  psgc: string;
  name: string;
}

/**
 * What a boundary version holds: region → province → city/municipality → barangay (local area).
 * Regions and provinces are optional (the two-city set has none). Its id is the hash of this content.
 */
export interface BoundarySet {
  /** Says where the geometry comes from, e.g. "PSA/NAMRIA 2023: Quezon City and Pampanga". */
  label: string;
  /** The credit the source asks for, shown beside the boundaries. */
  attribution?: string | undefined;
  regions?: FeatureCollection<Area, RegionProps> | undefined;
  provinces?: FeatureCollection<Area, ProvinceProps> | undefined;
  cities: FeatureCollection<Area, CityProps>;
  localAreas: FeatureCollection<Area, LocalAreaProps>;
}
