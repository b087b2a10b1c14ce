// An import's validated records, kept on disk between its two passes: the first writes each
// batch as a Parquet file (its record number, its post_id and the IngestRecord as JSON); the
// second reads them all back in the ledger's key order (post_id, then record number), so the
// ledger's rows are written in the order of its clustered key. Inserted in a file's own order,
// a shuffled file made every row land on a page of its own (8,000 rows/s at a million rows);
// in key order they append.
import { sqlString, type DuckDb } from '../archive/duckdb.js';
import type { IngestRecord } from '../ledger/ledger.js';

/** A validated record: where it was in the file (0-based) and what the ledger is to accept. */
export interface ValidatedRecord {
  n: number;
  record: Omit<IngestRecord, 'received_at'>;
}

/** Writes a batch of validated records as one Parquet file. */
export async function writeValidated(db: DuckDb, records: readonly ValidatedRecord[], file: string): Promise<void> {
  await db.withConnection(async (conn) => {
    await conn.run('CREATE TEMP TABLE validated (n BIGINT NOT NULL, post_id BIGINT NOT NULL, record VARCHAR NOT NULL)');
    const appender = await conn.createAppender('validated');
    try {
      for (const { n, record } of records) {
        appender.appendBigInt(BigInt(n));
        appender.appendBigInt(BigInt(record.post_id));
        appender.appendVarchar(JSON.stringify(record));
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
    // reports, some 50 MB at once) failed under the engine's default limit of 256 MB.
    await conn.run(
      `COPY (SELECT n, record FROM read_parquet([${files.map(sqlString).join(', ')}]) ORDER BY post_id, n) TO ${sqlString(out)} (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 10000)`,
    );
    const [[count]] = (await conn.runAndReadAll(`SELECT count(*)::DOUBLE FROM read_parquet(${sqlString(out)})`)).getRows() as [[number]];
    return count;
  });
}

/**
 * The sorted file's records from row `from` on, `size` at a time: `each` finishes with a batch
 * before the next one is handed to it. The next batch is read meanwhile: each chunk waits on
 * DuckDB's threads (about a quarter of an import's acceptance when read after each batch).
 */
export async function eachSortedBatch(
  db: DuckDb,
  sorted: string,
  from: number,
  size: number,
  each: (batch: ValidatedRecord[]) => Promise<void>,
): Promise<void> {
  await db.withConnection(async (conn) => {
    const result = await conn.stream(`SELECT n, record FROM read_parquet(${sqlString(sorted)}) OFFSET ${Math.max(0, Math.trunc(from))}`);
    /** Rows read and not yet handed on. */
    let left: ValidatedRecord[] = [];
    const read = async (): Promise<ValidatedRecord[]> => {
      while (left.length < size) {
        const chunk = await result.fetchChunk();
        if (!chunk || chunk.rowCount === 0) break;
        const [ns, records] = chunk.getColumns() as [bigint[], string[]];
        for (let i = 0; i < ns.length; i++) left.push({ n: Number(ns[i]), record: JSON.parse(records[i]!) as ValidatedRecord['record'] });
      }
      const batch = left.length <= size ? left : left.slice(0, size);
      left = left.length <= size ? [] : left.slice(size);
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
        if (batch.length === 0) return;
        next = ahead();
        await each(batch);
      }
    } finally {
      // A read still under way (each failed) ends before the connection is given back.
      await next.catch(() => undefined);
    }
  });
}
