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
  // Columns, not rows: the numbers come as typed arrays, only the codes as strings.
  const columns = await db.withConnection(async (conn) => {
    const result = await conn.stream(
      `SELECT epoch_us(created_at)::DOUBLE, lng, lat, local_area_id, instance_region_code
        FROM read_parquet(${sqlString(partFile)}) WHERE status <> 'retracted' ORDER BY created_at`,
    );
    const out = { numbers: [[], [], []] as Float64Array[][], codes: [[], []] as (string | null)[][] };
    for await (const chunk of result) {
      out.numbers.forEach((parts, c) => parts.push((chunk.getColumnVector(c) as unknown as { items: Float64Array }).items.slice(0, chunk.rowCount)));
      out.codes.forEach((codes, c) => {
        const vector = chunk.getColumnVector(3 + c);
        for (let i = 0; i < chunk.rowCount; i++) codes.push(vector.getItem(i) as string | null);
      });
    }
    return out;
  });
  const [areaCodes, cityCodes] = columns.codes as [(string | null)[], (string | null)[]];
  const n = areaCodes.length;
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
  [at.createdUs, at.lng, at.lat].forEach((offset, c) => {
    const column = new Float64Array(block, offset, n);
    let k = 0;
    for (const part of columns.numbers[c]!) {
      column.set(part, k);
      k += part.length;
    }
  });
  const area = new Uint16Array(block, at.area, n);
  const city = new Uint16Array(block, at.city, n);
  for (let i = 0; i < n; i++) {
    const [a, c] = [areaCodes[i], cityCodes[i]];
    area[i] = a === null || a === undefined ? NO_AREA : indexOf(a, areas, areaIndex);
    city[i] = c === null || c === undefined ? NO_CITY : indexOf(c, cities, cityIndex);
  }
  if (areas.length >= NO_AREA || cities.length >= NO_CITY) return undefined;
  const header: StatsHeader = { version: STATS_VERSION, count: n, cities, areas };
  const line = Buffer.from(`${JSON.stringify(header)}\n`);
  return Buffer.concat([line, Buffer.alloc(align8(line.length) - line.length), new Uint8Array(block)]);
}
