// Writes a part's stats sidecar (FORMAT.md): the few columns `stats` filters and groups by, so a
// stats answer counts a year of reports from about 10 bytes each, with no Parquet decoding and
// no DuckDB. The reports are kept one by one rather than pre-counted: at the archive's density
// (a few reports per barangay and hour) counts per hour × barangay are nearly as many as the
// reports, and single reports answer any window edge, bbox and UTC offset exactly. Retracted
// tombstones (purged reports) are left out, as answers leave them out.
import { sqlString, type DuckDb } from '../duckdb.js';
import { align8, columnOffsets, NO_AREA, NO_CITY, REPORT_BYTES, STATS_VERSION, type StatsHeader } from './statsFormat.js';

/** The sidecar of one part file; undefined when its codes do not fit the columns (it is then counted by DuckDB). */
export async function statsSidecarOf(db: DuckDb, partFile: string): Promise<Buffer | undefined> {
  const rows = await db.withConnection(async (conn) => {
    const reader = await conn.runAndReadAll(
      `SELECT epoch_us(created_at)::DOUBLE, lng, lat, local_area_id, instance_region_code
        FROM read_parquet(${sqlString(partFile)}) WHERE status <> 'retracted' ORDER BY created_at`,
    );
    return reader.getRowsJS() as [number, number, number, string | null, string | null][];
  });
  const n = rows.length;
  const cities: string[] = [];
  const areas: string[] = [];
  const cityIndex = new Map<string, number>();
  const areaIndex = new Map<string, number>();
  const indexOf = (code: string, list: string[], index: Map<string, number>) => {
    let i = index.get(code);
    if (i === undefined) index.set(code, (i = list.push(code) - 1));
    return i;
  };
  const block = new ArrayBuffer(n * REPORT_BYTES);
  const at = columnOffsets(n);
  const createdUs = new Float64Array(block, at.createdUs, n);
  const lng = new Float64Array(block, at.lng, n);
  const lat = new Float64Array(block, at.lat, n);
  const area = new Uint16Array(block, at.area, n);
  const city = new Uint16Array(block, at.city, n);
  rows.forEach((r, i) => {
    createdUs[i] = r[0];
    lng[i] = r[1];
    lat[i] = r[2];
    area[i] = r[3] === null ? NO_AREA : indexOf(r[3], areas, areaIndex);
    city[i] = r[4] === null ? NO_CITY : indexOf(r[4], cities, cityIndex);
  });
  if (areas.length >= NO_AREA || cities.length >= NO_CITY) return undefined;
  const header: StatsHeader = { version: STATS_VERSION, count: n, cities, areas };
  const line = Buffer.from(`${JSON.stringify(header)}\n`);
  return Buffer.concat([line, Buffer.alloc(align8(line.length) - line.length), new Uint8Array(block)]);
}
