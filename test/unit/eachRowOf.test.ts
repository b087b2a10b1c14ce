// The rows verify's repair reads back: those of the pkeys asked for, each once (the newest part's
// copy), in batches held one at a time; and each row turned back into the record it was archived
// from (archiveRowOf's inverse), a tombstone as retracted.
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { writeParquet } from '../../src/archive/partWriter.js';
import { eachRowOf } from '../../src/archive/readRows.js';
import { tombstoneRow, type ArchiveRow } from '../../src/archive/schema.js';
import { archivedRecordOf, archiveRowOf } from '../../src/ingest/archiveRow.js';
import type { IngestRecord } from '../../src/ledger/ledger.js';
import { parsePartnerReport } from '../../src/partners/partnerReport.js';
import { report } from '../support/env.js';
import { scratch } from '../support/scratch.js';

const TAGS = { instance_region_code: 'PH-QC', local_area_id: '1374000000', province_code: null, region_code: null };

function recordOf(id: number, overrides: Record<string, unknown> = {}, partner: string | undefined = 'acme'): IngestRecord {
  return {
    v: 1,
    pkey: partner === undefined ? `partner-${id}` : `partner-${partner}-${id}`,
    source: 'partner',
    post_id: id,
    ...(partner !== undefined && { partner }),
    received_at: '2026-11-21T06:00:00.123Z',
    report: parsePartnerReport(report(id, { title: `report ${id}`, text: `text ${id}`, ...overrides }), Date.parse('2026-11-22T00:00:00Z')),
  };
}

const work = scratch('each-row-');
const ROWS = 6_000;
let older: string;
let newer: string;

beforeAll(async () => {
  older = path.join(work.dir, 'part-01JC0000000000000000000000.parquet');
  newer = path.join(work.dir, 'part-01JD0000000000000000000000.parquet');
  const rows = Array.from({ length: ROWS }, (_, i) => archiveRowOf(recordOf(i), TAGS, 'v1'));
  await writeParquet(work.db, rows, older);
  // The newer part holds 3 again (its copy answers) and 7 as a tombstone.
  await writeParquet(work.db, [{ ...rows[3]!, boundary_version: 'v2' }, tombstoneRow(rows[7]!)], newer);
});

describe('eachRowOf', () => {
  it('hands over the rows of the pkeys asked for, each once and as the newest part holds it, a batch at a time', async () => {
    const wanted = ['partner-acme-3', 'partner-acme-7', 'partner-acme-11', 'partner-acme-12', 'partner-acme-20', 'partner-nobody-1'];
    const batches: ArchiveRow[][] = [];
    await eachRowOf(work.db, [older, newer], wanted, 2, async (rows) => {
      batches.push(rows);
    });
    const got = batches.flat();
    expect(got.map((r) => r.pkey).sort()).toEqual(wanted.slice(0, 5).sort());
    expect(got.find((r) => r.pkey === 'partner-acme-3')!.boundary_version).toBe('v2');
    expect(got.find((r) => r.pkey === 'partner-acme-7')!.status).toBe('retracted');
    // Many: a batch at a time, each of the size asked for give or take a chunk of DuckDB's (2,048 rows).
    const many: number[] = [];
    await eachRowOf(work.db, [older, newer], Array.from({ length: 5_000 }, (_, i) => `partner-acme-${i}`), 1_000, async (rows) => {
      many.push(rows.length);
    });
    expect(many.reduce((a, b) => a + b, 0)).toBe(5_000);
    expect(many.length).toBeGreaterThan(1);
    expect(Math.max(...many)).toBeLessThan(1_000 + 2_048);
    await eachRowOf(work.db, [older, newer], [], 2, async () => {
      throw new Error('no rows were asked for');
    });
  });

  it('gives back, from a row, the record it was archived from; a tombstone retracted; a row of no partner or no key name keeps its pkey\'s', async () => {
    const got: ArchiveRow[] = [];
    await eachRowOf(work.db, [older, newer], ['partner-acme-5', 'partner-acme-7'], 10, async (rows) => {
      got.push(...rows);
    });
    const five = got.find((r) => r.pkey === 'partner-acme-5')!;
    expect(archivedRecordOf(five)).toEqual({ record: recordOf(5), retracted: false });
    expect(archivedRecordOf(got.find((r) => r.pkey === 'partner-acme-7')!)).toMatchObject({
      record: { pkey: 'partner-acme-7', partner: 'acme', report: { title: null, text: null, image_url: null, post_id: 7 } },
      retracted: true,
    });
    // Without a title, text or image, as the feed took it.
    const bare = recordOf(9, { title: undefined, text: undefined }, undefined);
    expect(archivedRecordOf(archiveRowOf(bare, TAGS, 'v1'))).toEqual({ record: bare, retracted: false });
    // A row from before the key_name column: its partner from its pkey.
    expect(archivedRecordOf({ ...archiveRowOf(recordOf(4), TAGS, 'v1'), key_name: null }).record.partner).toBe('acme');
  });
});
