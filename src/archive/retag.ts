// Re-tagging parts in bulk: DuckDB de-duplicates and holds the rows, JavaScript sees only each
// report's point and tags (the tagger is ours), and DuckDB writes the new part by joining the
// rows to their new tags. A report becomes no JavaScript object, and the tags travel as a small
// dictionary of distinct tag sets (a few thousand for a year) plus one integer a report.
import { type DuckDBConnection } from '@duckdb/node-api';
import { sqlString, type DuckDb } from './duckdb.js';
import { dedupedPartsSql } from './readRows.js';

/** A report's tags as the tagger gives them (the archive's tag columns). */
export interface TagSet {
  instance_region_code: string | null;
  local_area_id: string | null;
  province_code: string | null;
  region_code: string | null;
}

const TAGS = ['instance_region_code', 'local_area_id', 'province_code', 'region_code'] as const;

export interface Retagged {
  /** Reports in the window (those re-tagged). */
  reports: number;
  cityChanges: number;
  localAreaChanges: number;
  /** "PH-QC -> null": how many reports move that way. */
  moves: Record<string, number>;
  /** Reports whose answered tags change (a mirror syncing with updated_after must see them again). */
  moved: { pkey: string; createdMs: number }[];
  /** Whether anything changes (tags or boundary version): false leaves the parts as they are. */
  changed: boolean;
}

/**
 * Re-tags the de-duplicated rows of `files` whose created_at is in [fromMs, toMs] with `tag` and
 * `version`, and, unless `dryRun` or nothing changes, writes them all (the others as they were)
 * to `out` as one part, newest first.
 */
export async function retagParts(
  db: DuckDb,
  files: readonly string[],
  tag: (lng: number, lat: number) => TagSet,
  version: string,
  window: { fromMs: number; toMs: number; dryRun: boolean },
  out: string,
): Promise<Retagged> {
  return db.withConnection(async (conn) => {
    try {
      await conn.run(`CREATE OR REPLACE TEMP TABLE retag_rows AS SELECT (row_number() OVER ()) - 1 AS i, * FROM (${dedupedPartsSql(files)})`);
      const columns = (
        await conn.runAndReadAll(`SELECT lng, lat, epoch_ms(created_at)::DOUBLE AS t, pkey, ${TAGS.join(', ')}, boundary_version FROM retag_rows ORDER BY i`)
      ).getColumnsJS() as [number[], number[], number[], string[], (string | null)[], (string | null)[], (string | null)[], (string | null)[], string[]];
      const [lng, lat, t, pkey, city, area, province, region, versions] = columns;
      const result: Retagged = { reports: 0, cityChanges: 0, localAreaChanges: 0, moves: {}, moved: [], changed: false };
      // Each distinct (tags, version) once; each report its index in that list.
      const sets: (string | null)[][] = [];
      const setIds = new Map<string, number>();
      const ids = new Int32Array(lng.length);
      const inWindow: number[] = [];
      for (let i = 0; i < lng.length; i++) if (t[i]! >= window.fromMs && t[i]! <= window.toMs) inWindow.push(i);
      // Tagged nearest first, not in the rows' (time) order: consecutive points then test the
      // same few polygons, whose vertices are still in the processor's caches.
      const tagged: TagSet[] = new Array<TagSet>(lng.length);
      for (const i of spatialOrder(lng, lat, inWindow)) tagged[i] = tag(lng[i]!, lat[i]!);
      for (let i = 0; i < lng.length; i++) {
        const old = [city[i]!, area[i]!, province[i]!, region[i]!];
        let next: (string | null)[];
        const tags = tagged[i];
        if (tags) {
          next = [...TAGS.map((k) => tags[k]), version];
          result.reports += 1;
          if (next[0] !== old[0]) {
            result.cityChanges += 1;
            const move = `${old[0] ?? 'null'} -> ${next[0] ?? 'null'}`;
            result.moves[move] = (result.moves[move] ?? 0) + 1;
          }
          if (next[1] !== old[1]) result.localAreaChanges += 1;
          const retagged = next.slice(0, 4).some((v, k) => v !== old[k]);
          if (retagged) result.moved.push({ pkey: pkey[i]!, createdMs: t[i]! });
          if (retagged || version !== versions[i]) result.changed = true;
        } else next = [...old, versions[i]!];
        const key = next.join('\u0000');
        let id = setIds.get(key);
        if (id === undefined) {
          setIds.set(key, (id = sets.length));
          sets.push(next);
        }
        ids[i] = id;
      }
      if (window.dryRun || !result.changed) return result;
      await writeRetagged(conn, sets, ids, out);
      return result;
    } finally {
      await conn.run('DROP TABLE IF EXISTS retag_rows; DROP TABLE IF EXISTS retag_sets; DROP TABLE IF EXISTS retag_ids');
    }
  });
}

/**
 * The rows `rows` ordered along a Z-order (Morton) curve over their points' bounding box: nearby
 * points come close together. Each key is its cell's Morton code above the row's position in
 * `rows`, in one double, so a typed array's numeric sort orders them.
 */
export function spatialOrder(lng: readonly number[], lat: readonly number[], rows: readonly number[]): number[] {
  const n = rows.length;
  if (n < 3) return [...rows];
  let [minX, minY, maxX, maxY] = [Infinity, Infinity, -Infinity, -Infinity];
  for (const i of rows) {
    const [x, y] = [lng[i]!, lat[i]!];
    if (x < minX) minX = x;
    if (x > maxX) maxX = x;
    if (y < minY) minY = y;
    if (y > maxY) maxY = y;
  }
  // 53 bits a double: the position's bits, the rest (at most 16 an axis) for the cell.
  const positionBits = Math.ceil(Math.log2(n));
  const axisBits = Math.min(16, Math.floor((53 - positionBits) / 2));
  const cells = 2 ** axisBits;
  const scaleX = maxX > minX ? cells / (maxX - minX) : 0;
  const scaleY = maxY > minY ? cells / (maxY - minY) : 0;
  const keys = new Float64Array(n);
  for (let k = 0; k < n; k++) {
    const i = rows[k]!;
    // Out of range (NaN included) goes to a cell at the edge: the order is only a hint.
    const cx = Math.min(cells - 1, Math.max(0, Math.floor((lng[i]! - minX) * scaleX))) || 0;
    const cy = Math.min(cells - 1, Math.max(0, Math.floor((lat[i]! - minY) * scaleY))) || 0;
    keys[k] = (spread(cx) + 2 * spread(cy)) * 2 ** positionBits + k;
  }
  keys.sort();
  const order = new Array<number>(n);
  for (let k = 0; k < n; k++) order[k] = rows[keys[k]! % 2 ** positionBits]!;
  return order;
}

/** A 16-bit value's bits spread to the even bits of 32. */
function spread(v: number): number {
  v = (v | (v << 8)) & 0x00ff00ff;
  v = (v | (v << 4)) & 0x0f0f0f0f;
  v = (v | (v << 2)) & 0x33333333;
  v = (v | (v << 1)) & 0x55555555;
  return v >>> 0;
}

async function writeRetagged(conn: DuckDBConnection, sets: (string | null)[][], ids: Int32Array, out: string): Promise<void> {
  await conn.run(`CREATE OR REPLACE TEMP TABLE retag_sets (id INTEGER, ${TAGS.map((c) => `${c} VARCHAR`).join(', ')}, boundary_version VARCHAR)`);
  const setAppender = await conn.createAppender('retag_sets');
  try {
    sets.forEach((s, id) => {
      setAppender.appendInteger(id);
      for (const v of s) {
        if (v === null) setAppender.appendNull();
        else setAppender.appendVarchar(v);
      }
      setAppender.endRow();
    });
    setAppender.flushSync();
  } finally {
    setAppender.closeSync();
  }
  await conn.run('CREATE OR REPLACE TEMP TABLE retag_ids (i BIGINT, id INTEGER)');
  const idAppender = await conn.createAppender('retag_ids');
  try {
    for (let i = 0; i < ids.length; i++) {
      idAppender.appendBigInt(BigInt(i));
      idAppender.appendInteger(ids[i]!);
      idAppender.endRow();
    }
    idAppender.flushSync();
  } finally {
    idAppender.closeSync();
  }
  const replaced = [...TAGS, 'boundary_version'].map((c) => `s.${c} AS ${c}`).join(', ');
  await conn.run(
    `COPY (SELECT r.* EXCLUDE (i) REPLACE (${replaced}) FROM retag_rows r JOIN retag_ids x ON x.i = r.i JOIN retag_sets s ON s.id = x.id
           ORDER BY created_at DESC, pkey DESC)
     TO ${sqlString(out)} (FORMAT parquet, COMPRESSION zstd)`,
  );
}
