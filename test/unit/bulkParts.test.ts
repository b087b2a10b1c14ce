// Bulk parts: an import's staged rows leave as parts of the ordinary layout, each report once and
// newest first, whatever the staged files repeat (a report staged again by a resumed run).
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDb, sqlString } from '../../src/archive/duckdb.js';
import { writeBulkParts, type BulkPart } from '../../src/archive/bulkParts.js';
import { writePartFile } from '../support/parts.js';

let dir: string;
let db: DuckDb;

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'bulk-parts-'));
  db = await DuckDb.open({ tempDir: path.join(dir, 'duckdb') });
});
afterAll(async () => {
  db?.close();
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

describe('writeBulkParts', () => {
  it('writes each staged report once, in closed day parts, newest first, and names each part\'s reports', async () => {
    const day = 86_400_000;
    const from = Date.UTC(2025, 2, 1);
    const step = 600_000; // a report every 10 minutes
    // Reports 1..600, and 400..700 staged again by a second file (the same rows for 400..600).
    const first = path.join(dir, 'stage-1.parquet');
    const again = path.join(dir, 'stage-2.parquet');
    await writePartFile(db, first, 1, 600, from, step);
    await writePartFile(db, again, 400, 301, from + 399 * step, step);

    const parts: { key: string; pkeys: string[]; created: number[]; reports: BulkPart['reports'] }[] = [];
    const count = await writeBulkParts(db, [first, again], { closedBeforeMs: Date.now(), retracted: new Set(), scratch: path.join(dir, 'scratch') }, async ({ key, file, reports }) => {
      const [pkeys, created] = await db.withConnection(async (conn) => (await conn.runAndReadAll(`SELECT pkey, epoch_ms(created_at)::DOUBLE FROM read_parquet(${sqlString(file)})`)).getColumnsJS() as [string[], number[]]);
      parts.push({ key, pkeys, created, reports });
    });

    expect(count).toBe(parts.length);
    // Days 1–5 of March 2025 (700 reports every 10 minutes: 4 days and 20 hours), a part each.
    expect(parts.length).toBe(Math.ceil((700 * step) / day));
    const all = parts.flatMap((p) => p.pkeys);
    expect(all.length).toBe(700);
    expect(new Set(all)).toEqual(new Set(Array.from({ length: 700 }, (_, i) => `partner-${i + 1}`)));
    for (const part of parts) {
      // Newest first, as every part.
      expect(part.created).toEqual([...part.created].sort((a, b) => b - a));
      expect(part.reports.map((r) => r.pkey)).toEqual(part.pkeys);
      expect(part.reports.map((r) => r.createdMs)).toEqual(part.created);
    }
  });
});
