// Archive parts written in set operations, for a bulk import: the rows arrive as staged Parquet
// files (each a batch of reports, written by writeParquet) and leave as parts of the ordinary
// layout, one per hour or closed day (partKeysOf), in two passes of DuckDB over the files: one
// spreads the rows over their parts (a partitioned COPY, bounded in memory by DuckDB's limit
// and spilling to its temp directory), the other sorts each part newest first, as every part
// is. No report becomes a JavaScript object: a year of millions is a few hundred part writes.
import fs from 'node:fs/promises';
import path from 'node:path';
import { sqlString, type DuckDb } from './duckdb.js';
import { tombstoneSql } from './schema.js';
import { partKeysOf } from '../store/layout.js';
import { mapLimit } from '../ops/concurrency.js';

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
  const source = `read_parquet([${staged.map(sqlString).join(', ')}])`;
  const spread = path.join(options.scratch, 'spread');
  await fs.rm(options.scratch, { recursive: true, force: true });
  await fs.mkdir(options.scratch, { recursive: true });
  try {
    const keys = await db.withConnection(async (conn) => {
      const hours = (await conn.runAndReadAll(`SELECT DISTINCT (epoch_ms(created_at) // 3600000) * 3600000 AS hour FROM ${source}`)).getColumnsJS()[0] as bigint[];
      const byHour = partKeysOf(hours.map(Number), options.closedBeforeMs);
      const keys = [...new Set(byHour.values())];
      const indexOf = new Map(keys.map((k, i) => [k, i]));
      // The hour → part map as a VALUES list: a few hundred to a few thousand rows.
      const values = [...byHour].map(([hour, key]) => `(${hour}, ${indexOf.get(key)})`).join(', ');
      await conn.run(
        `COPY (SELECT s.*, k.part AS bulk_part FROM ${source} s JOIN (VALUES ${values}) k(hour, part) ON k.hour = (epoch_ms(s.created_at) // 3600000) * 3600000)
         TO ${sqlString(spread)} (FORMAT parquet, PARTITION_BY (bulk_part), COMPRESSION zstd)`,
      );
      return keys;
    });
    const retracted = options.retracted.size === 0 ? 'false' : `pkey IN (${[...options.retracted].map(sqlString).join(', ')})`;
    await mapLimit(keys, options.concurrency ?? 2, async (key, i) => {
      const file = path.join(options.scratch, `part-${i}.parquet`);
      try {
        const reports = await db.withConnection(async (conn) => {
          // Each pkey once (a resumed import may have staged a report twice), newest first.
          await conn.run(
            `COPY (SELECT ${tombstoneSql(retracted)} FROM read_parquet(${sqlString(path.join(spread, `bulk_part=${i}`, '*.parquet'))}, hive_partitioning = false)
                   QUALIFY row_number() OVER (PARTITION BY pkey ORDER BY received_at DESC) = 1
                   ORDER BY created_at DESC, pkey DESC)
             TO ${sqlString(file)} (FORMAT parquet, COMPRESSION zstd)`,
          );
          const [pkeys, created] = (await conn.runAndReadAll(`SELECT pkey, epoch_ms(created_at)::DOUBLE FROM read_parquet(${sqlString(file)})`)).getColumnsJS() as [string[], number[]];
          return pkeys.map((pkey, n) => ({ pkey, createdMs: created[n]! }));
        });
        await publish({ key, file, reports });
      } finally {
        await fs.rm(file, { force: true });
      }
    });
    return keys.length;
  } finally {
    await fs.rm(options.scratch, { recursive: true, force: true });
  }
}
