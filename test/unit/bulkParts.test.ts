// Bulk parts: an import's staged rows leave as parts of the ordinary layout, each report once and
// newest first, whatever the staged files repeat (a report staged again by a resumed run).
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { sqlString } from '../../src/archive/duckdb.js';
import { partitionedParts, wholeSortedFiles, writeBulkParts, type BulkPart } from '../../src/archive/bulkParts.js';
import { writePartFile } from '../support/parts.js';
import { scratch } from '../support/scratch.js';

const work = scratch('bulk-parts-');

describe('writeBulkParts', () => {
  it('writes each staged report once, in closed day parts, newest first, and names each part\'s reports', async () => {
    const day = 86_400_000;
    const from = Date.UTC(2025, 2, 1);
    const step = 600_000; // a report every 10 minutes
    // Reports 1..600, and 400..700 staged again by a second file (the same rows for 400..600).
    const first = path.join(work.dir, 'stage-1.parquet');
    const again = path.join(work.dir, 'stage-2.parquet');
    await writePartFile(work.db, first, 1, 600, from, step);
    await writePartFile(work.db, again, 400, 301, from + 399 * step, step);

    const parts: Named[] = [];
    const count = await writeBulkParts(work.db, [first, again], { closedBeforeMs: Date.now(), retracted: new Set(), scratch: path.join(work.dir, 'scratch') }, async ({ key, file, reports }) => {
      parts.push({ key, ...(await partRows(file)), reports });
    });

    expect(count).toBe(parts.length);
    // Days 1–5 of March 2025 (700 reports every 10 minutes: 4 days and 20 hours), a part each.
    expect(parts.length).toBe(Math.ceil((700 * step) / day));
    const all = parts.flatMap((p) => p.pkeys);
    expect(all.length).toBe(700);
    expect(new Set(all)).toEqual(new Set(Array.from({ length: 700 }, (_, i) => `partner-${i + 1}`)));
    expectReportsNamed(parts);
  });

  it("names each part's reports when they are listed for a run of parts at a time (more rows than one listing holds)", async () => {
    // 400,000 reports a second apart: five days of up to 86,400, listed in two runs.
    const from = Date.UTC(2025, 3, 1);
    const staged = path.join(work.dir, 'stage-many.parquet');
    await writePartFile(work.db, staged, 1, 400_000, from, 1_000);
    const parts: Named[] = [];
    await writeBulkParts(work.db, [staged], { closedBeforeMs: Date.now(), retracted: new Set(), scratch: path.join(work.dir, 'scratch-many') }, async ({ key, file, reports }) => {
      parts.push({ key, ...(await partRows(file)), reports });
    });
    expect(parts.length).toBe(5);
    expect(parts.reduce((n, p) => n + p.pkeys.length, 0)).toBe(400_000);
    expectReportsNamed(parts);
  });
});

describe('small parts, a run of them copied at once', () => {
  const HOUR = 3_600_000;
  const from = Date.UTC(2025, 4, 1);

  it('are each one file of the run, newest first, with the columns of a part copied alone; a large part is left to its caller', async () => {
    // Three hours of 100 reports each, then one of 3,000 (a large part), then another small one.
    const staged = path.join(work.dir, 'run-rows.parquet');
    await writePartFile(work.db, staged, 1, 300, from, 36_000);
    const large = path.join(work.dir, 'run-large.parquet');
    await writePartFile(work.db, large, 301, 3_000, from + 3 * HOUR, 1_200);
    const last = path.join(work.dir, 'run-last.parquet');
    await writePartFile(work.db, last, 3_301, 50, from + 4 * HOUR, 60_000);
    const parts = [0, 1, 2, 3, 4].map((h) => ({ fromMs: from + h * HOUR, toMs: from + (h + 1) * HOUR, rows: h === 3 ? 3_000 : 100 }));
    const rowsSql = `SELECT * FROM read_parquet([${[staged, large, last].map(sqlString).join(', ')}])`;
    const scratch = path.join(work.dir, 'run-scratch');
    await fs.mkdir(scratch, { recursive: true });
    const copied = partitionedParts(work.db, rowsSql, parts, scratch);
    const files = await Promise.all(parts.map((_, i) => copied.fileOf(i)));
    expect(files[3]).toBeUndefined();
    for (const i of [0, 1, 2, 4]) {
      const rows = await partRows(files[i]!);
      expect(rows.created.every((ms) => ms >= parts[i]!.fromMs && ms < parts[i]!.toMs)).toBe(true);
      expect(rows.created).toEqual([...rows.created].sort((a, b) => b - a));
      expect(rows.pkeys).toHaveLength(i === 4 ? 50 : 100);
    }
    // The same columns as a part copied alone: the partition column is not written.
    const alone = path.join(scratch, 'alone.parquet');
    await work.db.withConnection((conn) => conn.run(`COPY (${rowsSql} WHERE created_at < make_timestamptz(${from + HOUR}::BIGINT * 1000)) TO ${sqlString(alone)} (FORMAT parquet)`));
    expect(await columnsOf(files[0]!)).toEqual(await columnsOf(alone));
  });

  it('are copied a run ahead: asking for the first run makes the second too, not the third, and settled waits for both', async () => {
    // 130 hours of 5 reports: runs of 64, 64 and 2 small parts.
    const staged = path.join(work.dir, 'ahead-rows.parquet');
    await writePartFile(work.db, staged, 1, 650, from, 720_000);
    const parts = Array.from({ length: 130 }, (_, h) => ({ fromMs: from + h * HOUR, toMs: from + (h + 1) * HOUR, rows: 5 }));
    const scratch = path.join(work.dir, 'ahead-scratch');
    await fs.mkdir(scratch, { recursive: true });
    const copied = partitionedParts(work.db, `SELECT * FROM read_parquet(${sqlString(staged)})`, parts, scratch);
    const first = copied.fileOf(0);
    await copied.settled();
    const files = new Set(await fs.readdir(scratch));
    expect(await first).toBe(path.join(scratch, 'part-0.parquet'));
    expect(files.has('part-63.parquet') && files.has('part-64.parquet') && files.has('part-127.parquet')).toBe(true);
    expect(files.has('part-128.parquet')).toBe(false);
    expect((await partRows(path.join(scratch, 'part-100.parquet'))).pkeys).toHaveLength(5);
  });

  it('are not taken from a partition whose rows are out of order, or that came out as several files', async () => {
    const run = path.join(work.dir, 'checked-run');
    const rows = path.join(work.dir, 'checked-rows.parquet');
    await writePartFile(work.db, rows, 1, 200, from, 60_000);
    const write = (part: number, file: string, order: string) =>
      work.db.withConnection(async (conn) => {
        await fs.mkdir(path.join(run, `bulk_part=${part}`), { recursive: true });
        await conn.run(`COPY (SELECT * FROM read_parquet(${sqlString(rows)}) ORDER BY ${order}) TO ${sqlString(path.join(run, `bulk_part=${part}`, file))} (FORMAT parquet)`);
      });
    await write(0, 'data_0.parquet', 'created_at DESC, pkey DESC');
    await write(1, 'data_0.parquet', 'created_at ASC');
    await write(2, 'data_0.parquet', 'created_at DESC');
    await write(2, 'data_1.parquet', 'created_at DESC');
    const found = await work.db.withConnection((conn) => wholeSortedFiles(conn, run));
    expect([...found.keys()]).toEqual([0]);
    expect(found.get(0)).toBe(path.join(run, 'bulk_part=0', 'data_0.parquet'));
  });
});

async function columnsOf(file: string): Promise<unknown[][]> {
  return work.db.withConnection(async (conn) => (await conn.runAndReadAll(`DESCRIBE SELECT * FROM read_parquet(${sqlString(file)}, hive_partitioning = false)`)).getRowsJS());
}

type Named = { key: string; pkeys: string[]; created: number[]; reports: BulkPart['reports'] };

async function partRows(file: string): Promise<{ pkeys: string[]; created: number[] }> {
  const [pkeys, created] = await work.db.withConnection(async (conn) => (await conn.runAndReadAll(`SELECT pkey, epoch_ms(created_at)::DOUBLE FROM read_parquet(${sqlString(file)})`)).getColumnsJS() as [string[], number[]]);
  return { pkeys, created };
}

/** Each part newest first, as every part, and its reports named as it holds them. */
function expectReportsNamed(parts: readonly Named[]): void {
  for (const part of parts) {
    expect(part.created).toEqual([...part.created].sort((a, b) => b - a));
    expect(part.reports.map((r) => r.pkey)).toEqual(part.pkeys);
    expect(part.reports.map((r) => r.createdMs)).toEqual(part.created);
  }
}
