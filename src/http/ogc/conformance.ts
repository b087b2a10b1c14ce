// The conformance classes of OGC API – Features – Part 1 this API implements
// (OGC 17-069r4, section 7.4): Core, GeoJSON, and OpenAPI 3.0 for its definition.
export const CONFORMS_TO = [
  'http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/core',
  'http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/geojson',
  'http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/oas30',
] as const;

/** The CRS of every geometry served (OGC API – Features Part 1 default). */
export const CRS84 = 'http://www.opengis.net/def/crs/OGC/1.3/CRS84';
export const GREGORIAN = 'http://www.opengis.net/def/uom/ISO-8601/0/Gregorian';
