// A bulk import stages the reports it accepts with DuckDB reading each record's JSON
// (archiveRowSql, stageAccepted); a worker writes the same reports as rows made in JavaScript
// (archiveRowOf, writeParquet). Both must give the same archive rows, column for column.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { sqlString } from '../../src/archive/duckdb.js';
import { writeParquet } from '../../src/archive/partWriter.js';
import type { Tags } from '../../src/boundaries/tagger.js';
import { archiveRowOf } from '../../src/ingest/archiveRow.js';
import type { IngestRecord } from '../../src/ledger/ledger.js';
import { stageAccepted, sortValidated, writeValidated } from '../../src/ops/validatedRecords.js';
import { parsePartnerReport } from '../../src/partners/partnerReport.js';
import { report } from '../support/env.js';
import { scratch } from '../support/scratch.js';

const work = scratch('archive-row-sql-');

/** Reports with what a partner may send: no title or text, quotes, newlines, emoji, U+FFFD, a NUL, long decimals. */
const bodies: Record<string, unknown>[] = [
  report(1),
  report(2, { image_url: 'https://example.org/p/2.jpg' }),
  report(3, { title: 'Baha "hanggang tuhod"\nsa kanto', text: 'Tab\there, backslash \\ and 🌊 ñ' }),
  report(4, { title: 'sent as \ufffd', text: 'nul \u0000 and \u2028 line separator' }),
  report(5, { location: { lng: 121.0412345678901, lat: -0.000001 } }),
  report(Number.MAX_SAFE_INTEGER, { created_at: '2025-06-30T23:59:59.999+08:00' }),
];
const tagSets: Tags[] = [
  { instance_region_code: 'PH-QC', local_area_id: '1380100001', province_code: null, region_code: 'PH-1300000000' },
  { instance_region_code: null, local_area_id: null, province_code: null, region_code: null },
];

describe('archive rows staged from the records\' JSON', () => {
  for (const partner of ['alpha', undefined]) {
    it(`are the rows archiveRowOf makes, column for column (${partner ? 'a partner\'s reports' : 'the operators\''})`, async () => {
      const receivedAt = '2025-07-01T02:03:04.567Z';
      const records = bodies.map((body): IngestRecord => {
        const parsed = parsePartnerReport(body);
        return { v: 1, pkey: `${partner ?? 'partner'}-${parsed.post_id}`, source: 'partner', post_id: parsed.post_id, ...(partner !== undefined && { partner }), received_at: receivedAt, report: parsed };
      });
      const tagsOf = (i: number) => tagSets[i % tagSets.length]!;

      const expected = path.join(work.dir, `expected-${partner}.parquet`);
      await writeParquet(work.db, records.map((r, i) => archiveRowOf(r, tagsOf(i), 'ph-test-1')), expected);

      const valid = records.map(({ received_at: _received, ...record }, n) => ({ n, record }));
      const validated = path.join(work.dir, `valid-${partner}.parquet`);
      const sorted = path.join(work.dir, `sorted-${partner}.parquet`);
      await writeValidated(work.db, 0, { index: valid.map((v) => v.n), postIds: valid.map((v) => v.record.post_id), json: valid.map((v) => JSON.stringify(v.record)) }, validated);
      await sortValidated(work.db, [validated], sorted);
      const postIds = records.map((r) => r.post_id);
      const staged = path.join(work.dir, `staged-${partner}.parquet`);
      await stageAccepted(work.db, sorted, { n: valid.map((v) => v.n), postIds: [Math.min(...postIds), Math.max(...postIds)], tags: valid.map((v) => tagsOf(v.n)) }, { receivedAtMs: Date.parse(receivedAt), version: 'ph-test-1' }, staged);

      const read = (file: string) =>
        work.db.withConnection(async (conn) => ({
          columns: (await conn.runAndReadAll(`DESCRIBE SELECT * FROM read_parquet(${sqlString(file)})`)).getRowsJS().map((r) => [r[0], r[1]]),
          rows: (await conn.runAndReadAll(`SELECT * FROM read_parquet(${sqlString(file)}) ORDER BY pkey`)).getRowObjectsJson(),
        }));
      const want = await read(expected);
      const got = await read(staged);
      expect(got.columns).toEqual(want.columns);
      expect(got.rows).toEqual(want.rows);
      expect(got.rows.length).toBe(bodies.length);
      expect(got.rows.map((r) => r.title)).toContain('sent as \ufffd');

      // Post_ids that leave a record out fail the staging rather than lose the record.
      const short = { n: valid.map((v) => v.n), postIds: [Math.min(...postIds), Math.max(...postIds) - 1] as [number, number], tags: valid.map((v) => tagsOf(v.n)) };
      await expect(stageAccepted(work.db, sorted, short, { receivedAtMs: Date.parse(receivedAt), version: 'ph-test-1' }, staged)).rejects.toThrow(/staging wrote 5 of 6/);
    });
  }
});
