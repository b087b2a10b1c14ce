// Re-tagging parts in bulk: DuckDB de-duplicates and holds the rows, JavaScript sees only each
// report's point and time and tags it (the tagger is ours), and DuckDB compares the old tags with
// the new and writes the new part by joining the rows to them. A report becomes no JavaScript
// object, and the new tags travel as a small dictionary of distinct tag sets (a few thousand for a
// year) plus one integer a report.
import { LIST, VARCHAR, listValue, type DuckDBConnection } from '@duckdb/node-api';
import { changeLogTextSql } from './changes.js';
import { columnsOf, rowsWithBytesOf, sqlString, type DuckDb } from './duckdb.js';
import { dedupedPartsSql } from './readRows.js';
import { ANSWER_ORDER } from './sql.js';
import { tombstoneSql } from './schema.js';
import { byCodeUnits } from '../shared/byCodeUnits.js';

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
  /** Reports in the parts, the window's and the others (those the new part holds). */
  rows: number;
  cityChanges: number;
  localAreaChanges: number;
  /** "PH-QC -> null": how many reports move that way. */
  moves: Record<string, number>;
  /**
   * Reports whose answered tags change (a mirror syncing with updated_after must see them again):
   * how many, and the text of their change log (changes.ts).
   */
  moved: { count: number; log: Uint8Array };
  /** Whether anything changes (tags or boundary version): false leaves the parts as they are. */
  changed: boolean;
  /** Once a part is written: the reports it answers (its tombstones aside). */
  answered?: number;
}

/**
 * Re-tags the de-duplicated rows of `files` whose created_at is in [fromMs, toMs] with `tag` and
 * `version`, and, unless `dryRun` or nothing changes (and `merge` is false), writes them all (the
 * others as they were) to `out` as one part, newest first, the `retracted` reports as their
 * tombstones.
 */
export async function retagParts(
  db: DuckDb,
  files: readonly string[],
  tag: (lng: number, lat: number) => TagSet,
  version: string,
  window: { fromMs: number; toMs: number; dryRun: boolean },
  out: string,
  retracted: () => Promise<readonly string[]>,
  merge = false,
): Promise<Retagged> {
  return db.withConnection(async (conn) => {
    try {
      // A row's position (its rowid) is its place in retag_ids too: the two are paired by it.
      await conn.run(`CREATE OR REPLACE TEMP TABLE retag_rows AS ${dedupedPartsSql(files)}`);
      const [lng, lat, t] = await columnsOf<[number[], number[], number[]]>(conn, 'SELECT lng, lat, epoch_ms(created_at)::DOUBLE FROM retag_rows ORDER BY rowid');
      const inWindow: number[] = [];
      for (let i = 0; i < lng.length; i++) if (t[i]! >= window.fromMs && t[i]! <= window.toMs) inWindow.push(i);
      // Each distinct tag set once; each report in the window its index in that list (-1: a
      // report outside the window keeps its tags and version).
      const sets: (string | null)[][] = [];
      const setIds = new Map<string, number>();
      const ids = new Int32Array(lng.length).fill(-1);
      // Tagged nearest first, not in the rows' (time) order: consecutive points then test the
      // same few polygons, whose vertices are still in the processor's caches.
      for (const i of spatialOrder(lng, lat, inWindow)) {
        const tags = tag(lng[i]!, lat[i]!);
        const next = TAGS.map((k) => tags[k]);
        const key = next.join('\u0000');
        let id = setIds.get(key);
        if (id === undefined) {
          setIds.set(key, (id = sets.length));
          sets.push(next);
        }
        ids[i] = id;
      }
      await appendSets(conn, sets, ids);
      // The comparison of old and new tags is DuckDB's: JavaScript reads no tag or key.
      const result = { ...(await compare(conn, version)), rows: lng.length };
      if (window.dryRun || (!result.changed && !merge)) return result;
      // Asked for last, just before the part is written: a purge that rewrote these parts since
      // they were read (the copies read still hold the reports whole) is honoured all the same.
      const retractedNow = listValue([...(await retracted())]);
      await conn.run(
        `COPY (SELECT ${tombstoneSql('list_contains($retracted, pkey)')} FROM (SELECT r.* REPLACE (${NEW_TAGS}) FROM ${RETAGGED}) ${ANSWER_ORDER})
         TO ${sqlString(out)} (FORMAT parquet, COMPRESSION zstd)`,
        { version, retracted: retractedNow },
        { version: VARCHAR, retracted: LIST(VARCHAR) },
      );
      const [[answered]] = (
        await conn.runAndReadAll(`SELECT count(*) FILTER (status <> 'retracted' AND NOT list_contains($retracted, pkey))::INTEGER FROM retag_rows`, { retracted: retractedNow }, { retracted: LIST(VARCHAR) })
      ).getRowsJS() as [[number]];
      return { ...result, answered };
    } finally {
      await conn.run('DROP TABLE IF EXISTS retag_rows; DROP TABLE IF EXISTS retag_sets; DROP TABLE IF EXISTS retag_ids');
    }
  });
}

/** The rows with their new tag set (s.*: null columns outside the window), a row's id at its position. */
const RETAGGED = 'retag_rows r POSITIONAL JOIN retag_ids x LEFT JOIN retag_sets s ON s.id = x.id';
/** A row's tags and version after re-tagging, under the columns' own names. */
const NEW_TAGS = [...TAGS.map((c) => `CASE WHEN s.id IS NULL THEN r.${c} ELSE s.${c} END AS ${c}`), `CASE WHEN s.id IS NULL THEN r.boundary_version ELSE $version END AS boundary_version`].join(', ');

async function appendSets(conn: DuckDBConnection, sets: (string | null)[][], ids: Int32Array): Promise<void> {
  await conn.run(`CREATE OR REPLACE TEMP TABLE retag_sets (id INTEGER, ${TAGS.map((c) => `${c} VARCHAR`).join(', ')})`);
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
  // A row's set at the row's position (POSITIONAL JOIN pairs it with retag_rows' row there).
  await conn.run('CREATE OR REPLACE TEMP TABLE retag_ids (id INTEGER)');
  const idAppender = await conn.createAppender('retag_ids');
  try {
    for (const id of ids) {
      if (id < 0) idAppender.appendNull();
      else idAppender.appendInteger(id);
      idAppender.endRow();
    }
    idAppender.flushSync();
  } finally {
    idAppender.closeSync();
  }
}

/** Counts what re-tagging changes, and names the reports whose answered tags move. */
async function compare(conn: DuckDBConnection, version: string): Promise<Omit<Retagged, 'rows'>> {
  const differs = TAGS.map((c) => `r.${c} IS DISTINCT FROM s.${c}`).join(' OR ');
  const bind = { version };
  const [summary] = (
    await conn.runAndReadAll(
      `SELECT count(s.id)::INTEGER, count(*) FILTER (r.instance_region_code IS DISTINCT FROM s.instance_region_code AND s.id IS NOT NULL)::INTEGER,
              count(*) FILTER (r.local_area_id IS DISTINCT FROM s.local_area_id AND s.id IS NOT NULL)::INTEGER,
              count(*) FILTER (s.id IS NOT NULL AND (${differs} OR r.boundary_version IS DISTINCT FROM $version))::INTEGER
         FROM ${RETAGGED}`,
      bind,
    )
  ).getRowsJS() as [[number, number, number, number]];
  const [reports, cityChanges, localAreaChanges, changedRows] = summary!;
  const moves: Record<string, number> = {};
  // Every pair of old and new city, the unchanged ones too (a few hundred at most), and the moves
  // picked out here: with the comparison in its WHERE, DuckDB joined the rows to the tag sets on
  // it, not on the sets' ids, and took hundreds of milliseconds a day.
  const pairs = (
    await conn.runAndReadAll(`SELECT r.instance_region_code, s.instance_region_code, count(*)::INTEGER FROM ${RETAGGED} WHERE s.id IS NOT NULL GROUP BY ALL`)
  ).getRowsJS() as [string | null, string | null, number][];
  const moveRows = pairs.filter(([from, to]) => from !== to).sort((a, b) => b[2] - a[2] || byCodeUnits(String(a[0]), String(b[0])) || byCodeUnits(String(a[1]), String(b[1])));
  for (const [from, to, n] of moveRows) moves[`${from ?? 'null'} -> ${to ?? 'null'}`] = n;
  const [[count, log]] = (await rowsWithBytesOf(conn, changeLogTextSql(`(SELECT r.pkey, r.created_at, CASE WHEN r.instance_region_code IS DISTINCT FROM s.instance_region_code THEN r.instance_region_code END AS moved_from FROM ${RETAGGED} WHERE s.id IS NOT NULL AND (${differs}))`))) as [[number, Uint8Array]];
  return { reports, cityChanges, localAreaChanges, moves, moved: { count, log }, changed: changedRows > 0 };
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
