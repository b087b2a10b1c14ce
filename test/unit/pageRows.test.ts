// A page of an hour not yet compacted picks its reports on a few columns first, then reads only
// those rows whole. It must be exactly the first rows of the whole window's answer: each report
// once, the copy in the newest part (a reprocessed report answers with its new tags, a report
// retracted since answers as retracted), every filter and cursor applied after de-duplication
// where the whole answer applies it. Compared with DuckDB's whole answer on random windows.
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ArchiveRow } from '../../src/archive/partColumns.js';
import { writeParquet } from '../../src/archive/partWriter.js';
import type { WindowQuery } from '../../src/archive/query.js';
import { ANSWER_ORDER, filteredRows, ITEM_SQL } from '../../src/archive/sql.js';
import { CITIES, random, randomFilter, randomReports } from '../support/randomReports.js';
import { scratch } from '../support/scratch.js';

const FROM = Date.UTC(2025, 6, 14, 3);
const SPAN = 3_600_000;
const WINDOWS = 120;

const work = scratch('page-rows-');
let rows: ArchiveRow[];
const parts: string[] = [];

/** A part name as the store gives it: a ULID, so the newest part sorts last. */
const partName = (i: number) => `part-01J${String(i).padStart(23, '0')}.parquet`;

beforeAll(async () => {
  const next = random(31);
  rows = randomReports(next, 900, FROM, SPAN);
  // Three overlapping parts of the hour (at-least-once delivery): later parts repeat some
  // reports of earlier ones with other tags or a retraction, as reprocessing and purges do.
  const copies: ArchiveRow[][] = [[], [], []];
  for (const row of rows) {
    const first = Math.floor(next() * 3);
    copies[first]!.push(row);
    for (let p = first + 1; p < 3; p++) {
      if (next() < 0.35) {
        const city = next() < 0.2 ? null : CITIES[Math.floor(next() * CITIES.length)]!;
        copies[p]!.push({ ...row, instance_region_code: city, boundary_version: `v${p}`, status: next() < 0.1 ? 'retracted' : row.status });
      }
    }
  }
  for (let p = 0; p < 3; p++) {
    const file = path.join(work.dir, partName(p));
    await writeParquet(work.db, copies[p]!, file);
    parts.push(file);
  }
}, 60_000);

async function answer(query: WindowQuery, limit: number | undefined): Promise<string[]> {
  const bound = filteredRows(parts, query, false, limit);
  return work.db.withConnection(async (conn) => {
    const reader = await conn.runAndReadAll(`SELECT ${ITEM_SQL.geojson} FROM ${bound.sql} ${ANSWER_ORDER}`, bound.values, bound.types);
    return reader.getRowsJS().map((r) => r[0] as string);
  });
}

describe('a page of overlapping parts', () => {
  it('is the first rows of the whole answer, each report once as its newest copy says', async () => {
    const next = random(32);
    let pagesWithDuplicates = 0;
    for (let w = 0; w < WINDOWS; w++) {
      const query: WindowQuery = { ...randomFilter(next, rows, FROM, SPAN), includeRetracted: next() < 0.3 };
      if (next() < 0.3) {
        const pick = rows[Math.floor(next() * rows.length)]!;
        query.after = { createdMs: pick.created_at_ms, pkey: pick.pkey, receivedBeforeMs: FROM + SPAN * 2 };
      }
      if (next() < 0.3) query.retracted = rows.filter(() => next() < 0.05).map((r) => ({ pkey: r.pkey, createdMs: r.created_at_ms }));
      const limit = 1 + Math.floor(next() * 60);
      const whole = await answer(query, undefined);
      const page = await answer(query, limit);
      expect(page, `window ${w}: ${JSON.stringify(query)} limit ${limit}`).toEqual(whole.slice(0, limit));
      const keys = page.map((item) => (JSON.parse(item) as { properties: { pkey: string } }).properties.pkey);
      expect(new Set(keys).size).toBe(keys.length);
      if (page.some((item) => !item.includes('"boundary_version":"v0"'))) pagesWithDuplicates++;
    }
    // The windows did reach reports whose newest copy is not their first.
    expect(pagesWithDuplicates).toBeGreaterThan(WINDOWS / 4);
  }, 120_000);
});
