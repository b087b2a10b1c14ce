// Archive parts written in set operations, for a bulk import: the rows arrive as staged Parquet
// files (each a batch of reports, written by writeParquet) and leave as parts of the ordinary
// layout, one per hour or closed day (partKeysOf), in two passes of DuckDB: one sorts the rows
// newest first into files of small row groups, a slice of time at a time (so memory stays
// within the engine's limit), the other copies each part's time range out of them, reading
// only the row groups of that range. No report becomes a JavaScript object: a year
// of millions is a few hundred part writes. (A partitioned COPY of them all would do it in one
// pass, but holds buffers for every part at once: out of memory at a few hundred parts.) Small
// parts, whose own copies would cost more than their rows, are copied a run at a time by one
// partitioned COPY, each part a partition of it (partitionedParts).
import fs from 'node:fs/promises';
import path from 'node:path';
import type { DuckDBConnection } from '@duckdb/node-api';
import { sqlString, type DuckDb } from './duckdb.js';
import { tombstoneSql } from './schema.js';
import { partKeysOf } from '../store/layout.js';
import { mapWeighted } from '../ops/concurrency.js';

/** Rows per row group of the sorted files: a part's range reads a few of them, not the whole of them. */
const SORTED_ROW_GROUP = 10_000;
/** Rows sorted at once. */
const SORT_ROWS = 250_000;
/**
 * Parts written at once, and their rows at most (a part with more is written alone): each has a
 * fixed cost of some tens of milliseconds whatever its size, so small parts (the days of a file
 * spread over a year) go eight at a time, larger ones (a busy year's days) at most four, and a
 * storm's days one or two at a time.
 */
const PARTS_AT_ONCE = 8;
const LARGE_PARTS_AT_ONCE = 4;
const ROWS_AT_ONCE = 200_000;
/** A part of at most this many rows counts as small. */
const SMALL_PART_ROWS = 2_000;
/**
 * Small parts copied by one partitioned COPY. A part's own copy cost some 17 ms whatever its
 * size (a day of the 300,000 reports spread over a year: 822 rows), a run's 5 ms a part.
 */
const PARTITIONED_PARTS = 64;
/** A part's share of ROWS_AT_ONCE: small ones PARTS_AT_ONCE to the bound, larger ones at most LARGE_PARTS_AT_ONCE. */
const weightOf = (rows: number) => (rows <= SMALL_PART_ROWS ? ROWS_AT_ONCE / PARTS_AT_ONCE : Math.max(rows, ROWS_AT_ONCE / LARGE_PARTS_AT_ONCE));

/** Each part key's time range [fromMs, toMs) (the hours mapped to it, end to end) and its rows. */
function rangesOf(byHour: ReadonlyMap<number, string>, rowsOf: ReadonlyMap<number, number>): { key: string; fromMs: number; toMs: number; rows: number }[] {
  const ranges = new Map<string, { key: string; fromMs: number; toMs: number; rows: number }>();
  for (const [hour, key] of byHour) {
    const rows = rowsOf.get(hour) ?? 0;
    const range = ranges.get(key);
    if (!range) ranges.set(key, { key, fromMs: hour, toMs: hour + 3_600_000, rows });
    else {
      range.fromMs = Math.min(range.fromMs, hour);
      range.toMs = Math.max(range.toMs, hour + 3_600_000);
      range.rows += rows;
    }
  }
  return [...ranges.values()];
}

const timestampSql = (ms: number) => `make_timestamptz(${ms}::BIGINT * 1000)`;
const inRangeSql = (fromMs: number, toMs: number) => `created_at >= ${timestampSql(fromMs)} AND created_at < ${timestampSql(toMs)}`;

/** A part's rows: each pkey once, as in every part (a report staged twice is the same report), newest first. */
const PART_ORDER = `QUALIFY row_number() OVER (PARTITION BY pkey ORDER BY received_at DESC) = 1 ORDER BY created_at DESC, pkey DESC`;

/** The small parts' files, copied a run at a time (see partitionedParts). */
export interface PartitionedParts {
  /** Part `i`'s file out of its run's copy; undefined for a part to be copied alone. */
  fileOf(i: number): Promise<string | undefined>;
  /** Once every copy begun (one made ahead too) has settled: none still writes. */
  settled(): Promise<void>;
}

/**
 * The files of small parts (`parts` in time order), each run of up to PARTITIONED_PARTS
 * consecutive ones copied out of `rowsSql` by one partitioned COPY when the first of them asks,
 * the next run's with it. DuckDB does not promise a partition's rows in the query's order, so
 * each run's files are checked: a part whose file is not one, newest first, gets undefined, as
 * does a large part (the caller copies it alone).
 */
export function partitionedParts(db: DuckDb, rowsSql: string, parts: readonly { fromMs: number; toMs: number; rows: number }[], scratch: string): PartitionedParts {
  /** Each small part's run, by its index in `runs`. */
  const runOf = new Map<number, number>();
  const runs: number[][] = [];
  parts.forEach((part, i) => {
    if (part.rows > SMALL_PART_ROWS) return;
    const run = runs[runs.length - 1];
    if (!run || run.length === PARTITIONED_PARTS || run[run.length - 1] !== i - 1) runs.push([i]);
    else run.push(i);
    runOf.set(i, runs.length - 1);
  });
  const copies = new Map<number, Promise<Map<number, string>>>();
  const copy = async (members: number[]): Promise<Map<number, string>> => {
    const dir = path.join(scratch, `run-${members[0]}`);
    // Each row's part: the last of the run that starts at or before it.
    const whens = members.slice(1).map((i) => `WHEN created_at < ${timestampSql(parts[i]!.fromMs)} THEN ${i - 1}`);
    const partSql = `${whens.length === 0 ? members[0] : `CASE ${whens.join(' ')} ELSE ${members[members.length - 1]} END`} AS bulk_part`;
    const from = parts[members[0]!]!.fromMs;
    const to = parts[members[members.length - 1]!]!.toMs;
    return db.withConnection(async (conn) => {
      await conn.run(
        `COPY (SELECT *, ${partSql} FROM (${rowsSql}) WHERE ${inRangeSql(from, to)} ${PART_ORDER})
         TO ${sqlString(dir)} (FORMAT parquet, COMPRESSION zstd, PARTITION_BY (bulk_part))`,
      );
      const files = await wholeSortedFiles(conn, dir);
      // Out of the partition's directory: a reader of `bulk_part=N/` would take N for a column.
      const out = new Map<number, string>();
      for (const [n, file] of files) {
        const plain = path.join(scratch, `part-${n}.parquet`);
        await fs.rename(file, plain);
        out.set(n, plain);
      }
      await fs.rm(dir, { recursive: true, force: true });
      return out;
    });
  };
  const started = (r: number): Promise<Map<number, string>> => {
    let files = copies.get(r);
    if (!files) {
      copies.set(r, (files = copy(runs[r]!)));
      // Handled here too: a copy made ahead may fail with no part left to ask for it.
      files.catch(() => undefined);
    }
    return files;
  };
  return {
    fileOf: async (i) => {
      const r = runOf.get(i);
      if (r === undefined) return undefined;
      const files = started(r);
      // The next run copied while this one's parts are published: a copy runs on one of
      // DuckDB's threads, and the parts waited for it with the other core idle.
      if (r + 1 < runs.length) void started(r + 1);
      return (await files).get(i);
    },
    settled: async () => {
      await Promise.allSettled(copies.values());
    },
  };
}

/**
 * The partitions of a partitioned COPY under `dir` (`bulk_part=N/…`) each written as one file
 * of rows newest first (then by pkey, descending), by part number.
 */
export async function wholeSortedFiles(conn: DuckDBConnection, dir: string): Promise<Map<number, string>> {
  const [numbers, files, counts, sorted] = (
    await conn.runAndReadAll(
      `SELECT bulk_part::INTEGER, any_value(filename), count(DISTINCT filename)::INTEGER, bool_and(in_order)
        FROM (SELECT bulk_part, filename,
                coalesce(lag(created_at) OVER w > created_at OR (lag(created_at) OVER w = created_at AND lag(pkey) OVER w > pkey), true) AS in_order
              FROM read_parquet(${sqlString(path.join(dir, '*', '*.parquet'))}, filename = true, file_row_number = true, hive_partitioning = true)
              WINDOW w AS (PARTITION BY filename ORDER BY file_row_number))
        GROUP BY 1`,
    )
  ).getColumnsJS() as [number[], string[], number[], boolean[]];
  const out = new Map<number, string>();
  numbers.forEach((n, k) => {
    if (counts[k] === 1 && sorted[k]) out.set(n, files[k]!);
  });
  return out;
}

/** Rows of the sorted files whose reports are listed at once (see reportLists). */
const LISTED_ROWS = 250_000;

/**
 * The reports of each part (`parts` in time order, their ranges apart), for its change log:
 * listed by one query for a run of parts of about LISTED_ROWS rows, when the first of them asks,
 * and dropped once the last of them has its list. Read back from each part, they were a query
 * per part, which for a small part cost as much as writing it (docs/performance.md, "Backfills").
 * The same reports as the part holds, in its order: its pkeys, each with its time.
 */
function reportLists(db: DuckDb, sortedFiles: string, parts: readonly { key: string; fromMs: number; toMs: number; rows: number }[]): (part: number) => Promise<BulkPart['reports']> {
  // Each part's run: consecutive parts, cut once a run holds LISTED_ROWS rows.
  const runOf: number[] = [];
  const runs: { first: number; last: number; left: number }[] = [];
  let rows = Infinity;
  parts.forEach((part, i) => {
    if (rows >= LISTED_ROWS) {
      runs.push({ first: i, last: i, left: 0 });
      rows = 0;
    }
    const run = runs[runs.length - 1]!;
    run.last = i;
    run.left += 1;
    rows += part.rows;
    runOf.push(runs.length - 1);
  });
  const listed = new Map<number, Promise<BulkPart['reports'][]>>();
  const list = async (r: number): Promise<BulkPart['reports'][]> => {
    const { first, last } = runs[r]!;
    const [pkeys, created] = await db.withConnection(
      async (conn) =>
        (
          await conn.runAndReadAll(
            `SELECT DISTINCT pkey, epoch_ms(created_at)::DOUBLE FROM read_parquet(${sortedFiles})
              WHERE created_at >= ${timestampSql(parts[first]!.fromMs)} AND created_at < ${timestampSql(parts[last]!.toMs)}
              ORDER BY created_at DESC, pkey DESC`,
          )
        ).getColumnsJS() as [string[], number[]],
    );
    const lists = Array.from({ length: last - first + 1 }, (): BulkPart['reports'] => []);
    pkeys.forEach((pkey, n) => {
      const ms = created[n]!;
      // The last part of the run that starts at or before ms.
      let lo = first;
      let hi = last;
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if (parts[mid]!.fromMs <= ms) lo = mid;
        else hi = mid - 1;
      }
      // A row between the parts' ranges would be in no part: its report would be lost.
      if (ms < parts[lo]!.fromMs || ms >= parts[lo]!.toMs) throw new Error(`bulk parts: a staged report (${pkey}) falls in no part`);
      lists[lo - first]!.push({ pkey, createdMs: ms });
    });
    return lists;
  };
  return async (i) => {
    const r = runOf[i]!;
    let lists = listed.get(r);
    if (!lists) listed.set(r, (lists = list(r)));
    try {
      return (await lists)[i - runs[r]!.first]!;
    } finally {
      if (--runs[r]!.left === 0) listed.delete(r);
    }
  };
}

/** A part ready to publish: its key, its local file and the reports it holds. */
export interface BulkPart {
  key: string;
  file: string;
  reports: { pkey: string; createdMs: number }[];
}

export interface BulkPartsOptions {
  /** Hours (and days) ending after this are still written to by the worker: they get hourly parts. */
  closedBeforeMs: number;
  /** Reports retracted since they were accepted: written as their tombstones. */
  retracted: ReadonlySet<string>;
  /** A scratch directory of this call's own (emptied by it when done). */
  scratch: string;
}

/**
 * Writes the rows of `staged` as parts and hands each to `publish` (which stores it, with its
 * sidecars, and records its reports as archived) before its file is deleted. Returns how many
 * parts were written.
 */
export async function writeBulkParts(db: DuckDb, staged: readonly string[], options: BulkPartsOptions, publish: (part: BulkPart) => Promise<void>): Promise<number> {
  if (staged.length === 0) return 0;
  const sorted = path.join(options.scratch, 'sorted');
  await fs.rm(options.scratch, { recursive: true, force: true });
  await fs.mkdir(sorted, { recursive: true });
  const sortedFiles = sqlString(path.join(sorted, '*.parquet'));
  try {
    const parts = await db.withConnection(async (conn) => {
      const source = `read_parquet([${staged.map(sqlString).join(', ')}])`;
      // Sorted a slice of time at a time, each of about SORT_ROWS rows (cut at quantiles, so a
      // storm's week is cut as finely as the quiet months): the whole of a year's rows in one
      // sort ran out of the engine's memory.
      const [[rows]] = (await conn.runAndReadAll(`SELECT count(*)::DOUBLE FROM ${source}`)).getRows() as [[number]];
      const slices = Math.max(1, Math.ceil(rows / SORT_ROWS));
      const cuts = slices === 1 ? [] : (((await conn.runAndReadAll(`SELECT quantile_disc(epoch_ms(created_at), [${Array.from({ length: slices - 1 }, (_, i) => (i + 1) / slices).join(', ')}])::DOUBLE[] FROM ${source}`)).getRows()[0]![0] as { items: number[] }).items);
      const edges = [-Infinity, ...new Set(cuts), Infinity];
      for (let i = 0; i + 1 < edges.length; i++) {
        const from = Number.isFinite(edges[i]!) ? `epoch_ms(created_at) >= ${edges[i]}` : 'true';
        const to = Number.isFinite(edges[i + 1]!) ? `epoch_ms(created_at) < ${edges[i + 1]}` : 'true';
        await conn.run(
          `COPY (SELECT * FROM ${source} WHERE ${from} AND ${to} ORDER BY created_at DESC, pkey DESC)
           TO ${sqlString(path.join(sorted, `${i}.parquet`))} (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE ${SORTED_ROW_GROUP})`,
        );
      }
      const [hours, counts] = (await conn.runAndReadAll(`SELECT (epoch_ms(created_at) // 3600000) * 3600000, count(*)::DOUBLE FROM read_parquet(${sortedFiles}) GROUP BY 1`)).getColumnsJS() as [bigint[], number[]];
      const rowsOf = new Map(hours.map((hour, i) => [Number(hour), counts[i]!]));
      return rangesOf(partKeysOf(rowsOf.keys(), options.closedBeforeMs), rowsOf);
    });
    parts.sort((a, b) => a.fromMs - b.fromMs);
    const reportsOf = reportLists(db, sortedFiles, parts);
    const retracted = options.retracted.size === 0 ? 'false' : `pkey IN (${[...options.retracted].map(sqlString).join(', ')})`;
    const rowsSql = `SELECT ${tombstoneSql(retracted)} FROM read_parquet(${sortedFiles})`;
    const copied = partitionedParts(db, rowsSql, parts, options.scratch);
    // The scratch directory is removed only once nothing writes into it any more (mapWeighted
    // settles when what has started is done; the runs made ahead, once they have settled).
    try {
      await mapWeighted(parts, { limit: PARTS_AT_ONCE, budget: ROWS_AT_ONCE, weight: (part) => weightOf(part.rows) }, async ({ key, fromMs, toMs }, i) => {
        // A small part comes out of its run's partitioned COPY; a large one (or one whose file is not whole) is copied alone.
        const fromRun = await copied.fileOf(i);
        const file = fromRun ?? path.join(options.scratch, `part-${i}.parquet`);
        try {
          if (fromRun === undefined) {
            await db.withConnection((conn) => conn.run(`COPY (${rowsSql} WHERE ${inRangeSql(fromMs, toMs)} ${PART_ORDER}) TO ${sqlString(file)} (FORMAT parquet, COMPRESSION zstd)`));
          }
          await publish({ key, file, reports: await reportsOf(i) });
        } finally {
          await fs.rm(file, { force: true });
        }
      });
    } finally {
      await copied.settled();
    }
    return parts.length;
  } finally {
    await fs.rm(options.scratch, { recursive: true, force: true });
  }
}
