// GeoParquet 1.1 for Parquet answers and exports: a WKB `geometry` column (a Point,
// WGS 84 longitude first, as OGC:CRS84) beside lng/lat, and the `geo` file metadata that
// geopandas, GDAL, QGIS and DuckDB's spatial extension read. DuckDB's spatial
// extension is downloaded at run time (impossible on locked-down hosts), so the
// WKB is built in plain SQL: byte order 01, type 1 (Point), then x and y as
// little-endian IEEE 754 doubles.
import type { DuckDBConnection } from '@duckdb/node-api';
import { sqlString } from './duckdb.js';

/**
 * Macros (per connection, temporary) that turn lng/lat into the 21 bytes of a WKB Point. A
 * DOUBLE cast to BIT is its IEEE 754 bits, most significant first: as an unsigned integer,
 * byte-swapped with shifts and masks (cheap, vectorised), then back to 8 bytes, it is the
 * little-endian double WKB wants. -0 is written as 0.
 */
const MACROS = [
  `CREATE OR REPLACE TEMP MACRO fa_bswap(b) AS ((b & 255) << 56) | (((b >> 8) & 255) << 48) | (((b >> 16) & 255) << 40)
     | (((b >> 24) & 255) << 32) | (((b >> 32) & 255) << 24) | (((b >> 40) & 255) << 16) | (((b >> 48) & 255) << 8) | (b >> 56)`,
  `CREATE OR REPLACE TEMP MACRO fa_le(x) AS fa_bswap((CASE WHEN x = 0 THEN 0::DOUBLE ELSE x END)::BIT::UBIGINT)::BIT::BLOB`,
  `CREATE OR REPLACE TEMP MACRO fa_wkb_point(x, y) AS '\\x01\\x01\\x00\\x00\\x00'::BLOB || fa_le(x) || fa_le(y)`,
];

/** The geometry column's SQL, once `prepareGeometry` ran on the connection. */
export const GEOMETRY_SQL = 'fa_wkb_point(lng, lat) AS geometry';

export async function prepareGeometry(conn: DuckDBConnection): Promise<void> {
  for (const sql of MACROS) await conn.run(sql);
}

/**
 * The same 21 bytes a point for Arrow batches, whose lng/lat DuckDB already gave as typed
 * arrays: writing them here costs a hundredth of having DuckDB build and hand over the blobs.
 * It must agree with the macros byte for byte (-0 written as 0 too); a unit test holds both to it.
 */
export function wkbPoints(lng: Float64Array, lat: Float64Array): { offsets: Int32Array; data: Uint8Array } {
  const data = new Uint8Array(lng.length * 21);
  const view = new DataView(data.buffer);
  const offsets = new Int32Array(lng.length + 1);
  for (let i = 0; i < lng.length; i++) {
    const at = i * 21;
    const x = lng[i]!;
    const y = lat[i]!;
    data[at] = 1;
    view.setUint32(at + 1, 1, true);
    view.setFloat64(at + 5, x === 0 ? 0 : x, true);
    view.setFloat64(at + 13, y === 0 ? 0 : y, true);
    offsets[i + 1] = at + 21;
  }
  return { offsets, data };
}

export type Bbox = [number, number, number, number];

/**
 * The bbox covering column of GeoParquet 1.1 (its best practice for files read over a network): a
 * struct of each row's extent, whose Parquet statistics let a reader skip row groups by place
 * without decoding the WKB. A point's extent is the point.
 */
export const BBOX_COVERING_SQL = `{'xmin': lng, 'ymin': lat, 'xmax': lng, 'ymax': lat} AS bbox`;

/** The GeoParquet 1.1 `geo` metadata of a file of points with this bbox (none for an empty file), naming the `bbox` covering column when it has one. */
export function geoMetadata(bbox: Bbox | undefined, covering = false): string {
  return JSON.stringify({
    version: '1.1.0',
    primary_column: 'geometry',
    columns: {
      geometry: {
        encoding: 'WKB',
        geometry_types: ['Point'],
        crs: WGS84,
        edges: 'planar',
        ...(bbox ? { bbox } : {}),
        ...(covering ? { covering: { bbox: { xmin: ['bbox', 'xmin'], ymin: ['bbox', 'ymin'], xmax: ['bbox', 'xmax'], ymax: ['bbox', 'ymax'] } } } : {}),
      },
    },
  });
}

/** The options of a DuckDB COPY … (FORMAT parquet, …) that put the `geo` metadata in the file. */
export function geoCopyOption(bbox: Bbox | undefined, covering = false): string {
  return `KV_METADATA {geo: ${sqlString(geoMetadata(bbox, covering))}}`;
}

/**
 * EPSG:4326 as PROJJSON (as pyproj writes it). GeoParquet stores geographic coordinates
 * longitude first whatever the CRS's axis order, so this is the same data as OGC:CRS84;
 * naming EPSG:4326 lets geopandas, GDAL and QGIS say "EPSG:4326" rather than an OGC code
 * many tools do not map to an EPSG one.
 */
const WGS84 = {
  $schema: 'https://proj.org/schemas/v0.7/projjson.schema.json',
  type: 'GeographicCRS',
  name: 'WGS 84',
  datum_ensemble: {
    name: 'World Geodetic System 1984 ensemble',
    members: [
      { name: 'World Geodetic System 1984 (Transit)', id: { authority: 'EPSG', code: 1166 } },
      { name: 'World Geodetic System 1984 (G730)', id: { authority: 'EPSG', code: 1152 } },
      { name: 'World Geodetic System 1984 (G873)', id: { authority: 'EPSG', code: 1153 } },
      { name: 'World Geodetic System 1984 (G1150)', id: { authority: 'EPSG', code: 1154 } },
      { name: 'World Geodetic System 1984 (G1674)', id: { authority: 'EPSG', code: 1155 } },
      { name: 'World Geodetic System 1984 (G1762)', id: { authority: 'EPSG', code: 1156 } },
      { name: 'World Geodetic System 1984 (G2139)', id: { authority: 'EPSG', code: 1309 } },
    ],
    ellipsoid: { name: 'WGS 84', semi_major_axis: 6378137, inverse_flattening: 298.257223563 },
    accuracy: '2.0',
    id: { authority: 'EPSG', code: 6326 },
  },
  coordinate_system: {
    subtype: 'ellipsoidal',
    axis: [
      { name: 'Geodetic latitude', abbreviation: 'Lat', direction: 'north', unit: 'degree' },
      { name: 'Geodetic longitude', abbreviation: 'Lon', direction: 'east', unit: 'degree' },
    ],
  },
  scope: 'Horizontal component of 3D system.',
  area: 'World.',
  bbox: { south_latitude: -90, west_longitude: -180, north_latitude: 90, east_longitude: 180 },
  id: { authority: 'EPSG', code: 4326 },
};
