// An import's validated records between its passes: written a batch at a time, sorted into the
// ledger's key order, and read back in batches (the next read while the caller works on one).
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { IngestRecord } from '../../src/ledger/ledger.js';
import { eachSortedBatch, sortValidated, writeValidated, type SortedBatch } from '../../src/ops/validatedRecords.js';
import { random } from '../support/randomReports.js';
import { scratch } from '../support/scratch.js';

describe("an import's validated records", () => {
  const work = scratch('validated-');
  let sorted: string;
  /** The records written, n the place in the file, post_ids shuffled. */
  const written: { n: number; record: Omit<IngestRecord, 'received_at'> }[] = [];

  beforeAll(async () => {
    const next = random(5);
    for (let n = 0; n < 5_000; n++) {
      // Some post_ids twice (a file's repeats): sorted by post_id, then by place in the file.
      const postId = Math.floor(next() * 4_000);
      const report = { post_id: postId, created_at: new Date(Date.UTC(2025, 0, 1) + n * 61_000).toISOString(), title: `ünï ${n}`, location: { lng: 120 + n / 7_000, lat: 14 + n / 9_000 } };
      // Every third one of no partner (the operators' own).
      const partner = n % 3 === 0 ? {} : { partner: 'a' };
      written.push({ n, record: { v: 1, pkey: `partner:a:${postId}`, source: 'partner', post_id: postId, ...partner, report } as unknown as Omit<IngestRecord, 'received_at'> });
    }
    const files: string[] = [];
    for (let i = 0; i < 5; i++) {
      files.push(path.join(work.dir, `valid-${i}.parquet`));
      const batch = written.slice(i * 1_000, (i + 1) * 1_000);
      await writeValidated(work.db, i * 1_000, { index: batch.map((_, k) => k), postIds: batch.map((w) => w.record.post_id), json: batch.map((w) => JSON.stringify(w.record)) }, files[i]!);
    }
    sorted = path.join(work.dir, 'sorted.parquet');
    expect(await sortValidated(work.db, files, sorted)).toBe(5_000);
  });

  /** What a batch holds of each record, in the ledger's key order. */
  const inKeyOrder = () =>
    [...written]
      .sort((a, b) => a.record.post_id - b.record.post_id || a.n - b.n)
      .map(({ n, record }) => ({
        n,
        record: { pkey: record.pkey, source: record.source, ...(record.partner !== undefined && { partner: record.partner }), post_id: record.post_id, created_at_ms: Date.parse(record.report.created_at), json: JSON.stringify(record) },
        lng: record.report.location.lng,
        lat: record.report.location.lat,
      }));
  const rowsOf = (batch: SortedBatch) => batch.n.map((n, i) => ({ n, record: batch.records[i], lng: batch.lng[i], lat: batch.lat[i] }));

  it('come back in key order, each once, in batches of the size asked for, from any row on', async () => {
    for (const from of [0, 1_234]) {
      const batches: SortedBatch[] = [];
      // Batches across the engine's chunks (2,048 rows): a chunk's rest starts the next batch.
      await eachSortedBatch(work.db, sorted, from, 700, async (batch) => {
        batches.push(batch);
        await new Promise((resolve) => setTimeout(resolve, 1));
      });
      expect(batches.map((b) => b.n.length)).toEqual([...Array(Math.floor((5_000 - from) / 700)).fill(700), (5_000 - from) % 700].filter((n) => n > 0));
      // Each record's JSON as written, and its identity, time and point read from it.
      expect(batches.flatMap(rowsOf)).toEqual(inKeyOrder().slice(from));
    }
  });

  it("stops at a batch that fails, with that batch's error", async () => {
    const seen: number[] = [];
    const failing = eachSortedBatch(work.db, sorted, 0, 1_000, async (batch) => {
      seen.push(batch.n.length);
      if (seen.length === 2) throw new Error('the ledger refused');
    });
    await expect(failing).rejects.toThrow('the ledger refused');
    expect(seen).toEqual([1_000, 1_000]);
    // The connection was given back: the file reads again.
    let rows = 0;
    await eachSortedBatch(work.db, sorted, 4_000, 1_000, async (batch) => void (rows += batch.n.length));
    expect(rows).toBe(1_000);
  });
});
