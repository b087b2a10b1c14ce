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
      for (let i = 0; i < lng.length; i++) {
        const old = [city[i]!, area[i]!, province[i]!, region[i]!];
        let next: (string | null)[];
        if (t[i]! >= window.fromMs && t[i]! <= window.toMs) {
          const tags = tag(lng[i]!, lat[i]!);
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
