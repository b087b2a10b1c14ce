// An import's validated records, kept on disk between its two passes: the first writes each
// batch as a Parquet file (its record number, its post_id and the IngestRecord as JSON); the
// second reads them all back in the ledger's key order (post_id, then record number), so the
// ledger's rows are written in the order of its clustered key. Inserted in a file's own order,
// a shuffled file made every row land on a page of its own (8,000 rows/s at a million rows);
// in key order they append. The sorted file (n, post_id, record; row groups of 10,000) is read
// twice in the second pass: by batches for the ledger, and by each batch's new reports, which
// DuckDB stages from their JSON (stageAccepted): no record is parsed in JavaScript there.
import fs from 'node:fs/promises';
import type { DuckDBAppender, DuckDBConnection } from '@duckdb/node-api';
import { sqlString, type DuckDb } from '../archive/duckdb.js';
import type { Tags } from '../boundaries/tagger.js';
import { archiveRowSql } from '../ingest/archiveRow.js';
import type { HeldRecord } from '../ledger/ledger.js';
import { fsyncFile } from '../shared/files.js';
import type { ValidatedBatch } from './validateRecords.js';

/**
 * Writes a batch of validated records (validateRecords.ts) as one Parquet file: each one's
 * place in the file (`first` plus its index in the batch), its post_id and its JSON.
 */
export async function writeValidated(db: DuckDb, first: number, valid: ValidatedBatch['valid'], file: string): Promise<void> {
  await db.withConnection(async (conn) => {
    await conn.run('CREATE TEMP TABLE validated (n BIGINT NOT NULL, post_id BIGINT NOT NULL, record VARCHAR NOT NULL)');
    const appender = await conn.createAppender('validated');
    try {
      const { index, postIds, json } = valid;
      for (let i = 0; i < index.length; i++) {
        appender.appendBigInt(BigInt(first + index[i]!));
        appender.appendBigInt(BigInt(postIds[i]!));
        appender.appendVarchar(json[i]!);
        appender.endRow();
      }
      appender.flushSync();
    } finally {
      appender.closeSync();
    }
    await conn.run(`COPY validated TO ${sqlString(file)} (FORMAT parquet, COMPRESSION zstd)`);
  });
}

/** Sorts the validated files into one, in the ledger's key order (an import is one partner's). */
export async function sortValidated(db: DuckDb, files: readonly string[], out: string): Promise<number> {
  if (files.length === 0) return 0;
  return db.withConnection(async (conn) => {
    // Small row groups: the writer holds one in memory, and the default (122,880 rows of whole
    // reports, some 50 MB at once) failed under the engine's default limit of 256 MB. They also
    // let a batch's staging read only its own rows (stageAccepted, by post_id).
    await conn.run(
      `COPY (SELECT n, post_id, record FROM read_parquet([${files.map(sqlString).join(', ')}]) ORDER BY post_id, n) TO ${sqlString(out)} (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 10000)`,
    );
    const [[count]] = (await conn.runAndReadAll(`SELECT count(*)::DOUBLE FROM read_parquet(${sqlString(out)})`)).getRows() as [[number]];
    return count;
  });
}

/**
 * A sorted file written by a release before the file held each record's post_id beside it (an
 * import stopped in pass 2 and resumed by this one): rewritten with it, in the same order.
 */
export async function addSortedPostIds(db: DuckDb, sorted: string): Promise<void> {
  const rewritten = `${sorted}.post-ids`;
  await db.withConnection((conn) =>
    conn.run(
      `COPY (SELECT n, CAST(json_extract(record, '$.post_id') AS BIGINT) AS post_id, record FROM read_parquet(${sqlString(sorted)}) ORDER BY post_id, n)
        TO ${sqlString(rewritten)} (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 10000)`,
    ),
  );
  await fsyncFile(rewritten);
  await fs.rename(rewritten, sorted);
}

/**
 * A batch of the sorted file: each record's place in the file (`n`, 0-based), what the ledger
 * accepts (its JSON as written, and its identity read from it by DuckDB), and its point.
 */
export interface SortedBatch {
  n: number[];
  records: HeldRecord[];
  lng: number[];
  lat: number[];
}

/** What a record's JSON gives the ledger and the tagger, read by DuckDB rather than parsed here. */
const IDENTITY = JSON.stringify({ pkey: 'VARCHAR', source: 'VARCHAR', partner: 'VARCHAR', post_id: 'DOUBLE', report: { created_at: 'TIMESTAMPTZ', location: { lng: 'DOUBLE', lat: 'DOUBLE' } } });

/**
 * The sorted file's records from row `from` on, `size` at a time: `each` finishes with a batch
 * before the next one is handed to it. The next batch is read meanwhile: each chunk waits on
 * DuckDB's threads (about a quarter of an import's acceptance when read after each batch).
 */
export async function eachSortedBatch(db: DuckDb, sorted: string, from: number, size: number, each: (batch: SortedBatch) => Promise<void>): Promise<void> {
  await db.withConnection(async (conn) => {
    const result = await conn.stream(
      `SELECT n::DOUBLE, record, j.pkey, j.source, j.partner, j.post_id, epoch_ms(j.report.created_at)::DOUBLE, j.report.location.lng, j.report.location.lat
        FROM (SELECT n, record, from_json(record, ${sqlString(IDENTITY)}) AS j FROM read_parquet(${sqlString(sorted)}) OFFSET ${Math.max(0, Math.trunc(from))})`,
    );
    /** Rows read and not yet handed on. */
    let left: SortedBatch = { n: [], records: [], lng: [], lat: [] };
    const read = async (): Promise<SortedBatch> => {
      while (left.n.length < size) {
        const chunk = await result.fetchChunk();
        if (!chunk || chunk.rowCount === 0) break;
        const [ns, jsons, pkeys, sources, partners, postIds, created, lngs, lats] = chunk.getColumns() as [number[], string[], string[], string[], (string | null)[], number[], number[], number[], number[]];
        for (let i = 0; i < ns.length; i++) {
          const partner = partners[i];
          left.n.push(ns[i]!);
          left.records.push({ pkey: pkeys[i]!, source: sources[i]!, ...(partner !== null && partner !== undefined && { partner }), post_id: postIds[i]!, created_at_ms: created[i]!, json: jsons[i]! });
          left.lng.push(lngs[i]!);
          left.lat.push(lats[i]!);
        }
      }
      if (left.n.length <= size) {
        const batch = left;
        left = { n: [], records: [], lng: [], lat: [] };
        return batch;
      }
      const batch = { n: left.n.slice(0, size), records: left.records.slice(0, size), lng: left.lng.slice(0, size), lat: left.lat.slice(0, size) };
      left = { n: left.n.slice(size), records: left.records.slice(size), lng: left.lng.slice(size), lat: left.lat.slice(size) };
      return batch;
    };
    // Handled from the start: a read that fails while `each` runs is thrown when it is awaited.
    const ahead = () => {
      const reading = read();
      reading.catch(() => undefined);
      return reading;
    };
    let next = ahead();
    try {
      for (;;) {
        const batch = await next;
        if (batch.n.length === 0) return;
        next = ahead();
        await each(batch);
      }
    } finally {
      // A read still under way (each failed) ends before the connection is given back.
      await next.catch(() => undefined);
    }
  });
}

/**
 * Stages the accepted records `n` of the sorted file (each with its Tags), received at
 * `receivedAtMs` and tagged under `version`, as one Parquet file of archive rows: DuckDB reads
 * each one's JSON (archiveRowSql), only the row groups of their post_ids (`postIds`: the lowest
 * and the highest).
 */
export async function stageAccepted(
  db: DuckDb,
  sorted: string,
  accepted: { n: readonly number[]; postIds: readonly [number, number]; tags: readonly Tags[] },
  batch: { receivedAtMs: number; version: string },
  out: string,
): Promise<void> {
  await db.withConnection(async (conn) => {
    // The batch's records by number, each naming its tag set: a batch has a few hundred.
    const sets = new Map<string, number>();
    const setOf = accepted.tags.map(({ instance_region_code, local_area_id, province_code, region_code }) => {
      const key = JSON.stringify([instance_region_code, local_area_id, province_code, region_code]);
      let id = sets.get(key);
      if (id === undefined) sets.set(key, (id = sets.size));
      return id;
    });
    await conn.run('CREATE OR REPLACE TEMP TABLE staged_n (n BIGINT NOT NULL, tag_set INTEGER NOT NULL)');
    await conn.run('CREATE OR REPLACE TEMP TABLE tag_sets (tag_set INTEGER NOT NULL, instance_region_code VARCHAR, local_area_id VARCHAR, province_code VARCHAR, region_code VARCHAR)');
    try {
      await appendRows(conn, 'staged_n', accepted.n.length, (a, i) => {
        a.appendBigInt(BigInt(accepted.n[i]!));
        a.appendInteger(setOf[i]!);
      });
      const keys = [...sets.keys()];
      await appendRows(conn, 'tag_sets', keys.length, (a, i) => {
        a.appendInteger(i);
        for (const code of JSON.parse(keys[i]!) as (string | null)[]) {
          if (code === null) a.appendNull();
          else a.appendVarchar(code);
        }
      });
      const [low, high] = accepted.postIds;
      const from = `read_parquet(${sqlString(sorted)}) JOIN staged_n USING (n) JOIN tag_sets USING (tag_set) WHERE post_id BETWEEN ${low} AND ${high}`;
      const written = (await conn.run(`COPY (${archiveRowSql({ from, ...batch })}) TO ${sqlString(out)} (FORMAT parquet, COMPRESSION zstd)`)).rowsChanged;
      // A record outside the post_ids given would be left out, and never archived.
      if (written !== accepted.n.length) throw new Error(`staging wrote ${written} of ${accepted.n.length} accepted records`);
    } finally {
      await conn.run('DROP TABLE IF EXISTS staged_n; DROP TABLE IF EXISTS tag_sets');
    }
  });
}

/** Appends `count` rows to `table`, each by `row`. */
async function appendRows(conn: DuckDBConnection, table: string, count: number, row: (appender: DuckDBAppender, i: number) => void): Promise<void> {
  const appender = await conn.createAppender(table);
  try {
    for (let i = 0; i < count; i++) {
      row(appender, i);
      appender.endRow();
    }
    appender.flushSync();
  } finally {
    appender.closeSync();
  }
}
