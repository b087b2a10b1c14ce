// Archive parts written in set operations, for a bulk import: the rows arrive as staged Parquet
// files (each a batch of reports, written by writeParquet) and leave as parts of the ordinary
// layout, one per hour or closed day (partKeysOf), in two passes of DuckDB: one sorts the rows
// newest first into files of small row groups, a slice of time at a time (so memory stays
// within the engine's limit), the other copies each part's time range out of them, reading
// only the row groups of that range. No report becomes a JavaScript object: a year
// of millions is a few hundred part writes. (A partitioned COPY would do it in one pass, but
// holds buffers for every part at once: out of memory at a few hundred parts.)
import fs from 'node:fs/promises';
import path from 'node:path';
import { sqlString, type DuckDb } from './duckdb.js';
import { tombstoneSql } from './schema.js';
import { partKeysOf } from '../store/layout.js';
import { mapLimit } from '../ops/concurrency.js';

/** Rows per row group of the sorted files: a part's range reads a few of them, not the whole of them. */
const SORTED_ROW_GROUP = 10_000;
/** Rows sorted at once. */
const SORT_ROWS = 250_000;

/** Each part key's time range [fromMs, toMs): the hours mapped to it, end to end. */
function rangesOf(byHour: ReadonlyMap<number, string>): { key: string; fromMs: number; toMs: number }[] {
  const ranges = new Map<string, { key: string; fromMs: number; toMs: number }>();
  for (const [hour, key] of byHour) {
    const range = ranges.get(key);
    if (!range) ranges.set(key, { key, fromMs: hour, toMs: hour + 3_600_000 });
    else {
      range.fromMs = Math.min(range.fromMs, hour);
      range.toMs = Math.max(range.toMs, hour + 3_600_000);
    }
  }
  return [...ranges.values()];
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
  /** Parts handed to `publish` at once (one is written while the other is stored). */
  concurrency?: number;
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
      const hours = (await conn.runAndReadAll(`SELECT DISTINCT (epoch_ms(created_at) // 3600000) * 3600000 FROM read_parquet(${sortedFiles})`)).getColumnsJS()[0] as bigint[];
      return rangesOf(partKeysOf(hours.map(Number), options.closedBeforeMs));
    });
    const retracted = options.retracted.size === 0 ? 'false' : `pkey IN (${[...options.retracted].map(sqlString).join(', ')})`;
    // A failure stops what has not started, and is thrown once what has started is done: the
    // scratch directory is removed only when nothing writes into it any more.
    let failure: { err: unknown } | undefined;
    await mapLimit(parts, options.concurrency ?? 2, async ({ key, fromMs, toMs }, i) => {
      if (failure) return;
      const file = path.join(options.scratch, `part-${i}.parquet`);
      try {
        const reports = await db.withConnection(async (conn) => {
          // Each pkey once, as in every part (a report staged twice would be the same report).
          await conn.run(
            `COPY (SELECT ${tombstoneSql(retracted)} FROM read_parquet(${sortedFiles})
                   WHERE created_at >= make_timestamptz(${fromMs}::BIGINT * 1000) AND created_at < make_timestamptz(${toMs}::BIGINT * 1000)
                   QUALIFY row_number() OVER (PARTITION BY pkey ORDER BY received_at DESC) = 1
                   ORDER BY created_at DESC, pkey DESC)
             TO ${sqlString(file)} (FORMAT parquet, COMPRESSION zstd)`,
          );
          const [pkeys, created] = (await conn.runAndReadAll(`SELECT pkey, epoch_ms(created_at)::DOUBLE FROM read_parquet(${sqlString(file)})`)).getColumnsJS() as [string[], number[]];
          return pkeys.map((pkey, n) => ({ pkey, createdMs: created[n]! }));
        });
        await publish({ key, file, reports });
      } catch (err) {
        failure ??= { err };
      } finally {
        await fs.rm(file, { force: true });
      }
    });
    if (failure) throw failure.err;
    return parts.length;
  } finally {
    await fs.rm(options.scratch, { recursive: true, force: true });
  }
}
