// The store as researchers read it in place (DuckDB, pyarrow, pandas): every
// part, hourly or compacted, holds exactly the documented columns, so the
// Hive-partitioned layout reads as one table whatever compaction did.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { listWindowParts } from '../../src/archive/partListing.js';
import { compact } from '../../src/ops/compact.js';
import { HAS_PYARROW, PYARROW_MISSING, python } from '../support/clients.js';
import { allArchived, postReport, report, startTestService, testConfig, testRuntime, type TestService, pkeyOf } from '../support/env.js';

/** docs/architecture.md, "The store's layout": the columns of every part, in order. */
const DOCUMENTED = [
  'pkey', 'created_at', 'source', 'status', 'url', 'image_url', 'disaster_type', 'report_data', 'instance_region_code',
  'local_area_id', 'province_code', 'region_code', 'title', 'text', 'lng', 'lat', 'post_id', 'partner_city', 'received_at', 'boundary_version', 'key_name',
];
const DAY_A = { fromMs: Date.parse('2026-11-20T00:00:00Z'), toMs: Date.parse('2026-11-20T23:59:59.999Z') };
const DAY_B = { fromMs: Date.parse('2026-11-21T00:00:00Z'), toMs: Date.parse('2026-11-21T23:59:59.999Z') };

let svc: TestService;
let storeDir: string;
const TOTAL = 40;

beforeAll(async () => {
  svc = await startTestService(await testRuntime(await testConfig('embedded')));
  storeDir = svc.rt.config.storageUrl.slice('file://'.length);
  // Two flushes into the same hours of two days (Nov 20 at 03:xx and 17:xx, Nov 21 at 05:xx and 09:xx), so each hour has two parts.
  const hours = ['2026-11-20T03', '2026-11-20T17', '2026-11-21T05', '2026-11-21T09'];
  for (const round of [0, 1]) {
    for (let i = 0; i < TOTAL / 2; i++) {
      const id = 100 + round * 100 + i;
      const created = `${hours[i % 4]}:${String(10 + round * 20 + (i % 10)).padStart(2, '0')}:00Z`;
      expect((await postReport(svc.url, report(id, { created_at: created, title: `r${id}` }))).status).toBe(201);
    }
    await allArchived(svc.rt);
  }
  // Nov 20 closed: one hour=all file; Nov 21 still open: its closed hours merged hour by hour.
  expect((await compact(svc.rt, { ...DAY_A, closedBeforeMs: Date.now() })).daysCompacted).toBe(1);
  expect((await compact(svc.rt, { ...DAY_B, closedBeforeMs: DAY_B.toMs - 3_600_000 })).hoursCompacted).toBe(2);
  const parts = await listWindowParts(svc.rt.store, DAY_A.fromMs, DAY_B.toMs);
  expect(parts.map((p) => [p.wholeDay, p.parts.length])).toEqual([[true, 1], [false, 1], [false, 1]]);
});
afterAll(async () => {
  await svc?.stop();
});

describe('the store after compaction', () => {
  it('every part holds exactly the documented columns (DuckDB, reading each file as it is)', async () => {
    const db = await DuckDBInstance.create(':memory:');
    const conn = await db.connect();
    try {
      const files = (await conn.runAndReadAll(`SELECT file FROM glob('${storeDir}/reports/v1/**/*.parquet') ORDER BY file`)).getRowObjectsJS().map((r) => String(r.file));
      expect(files.some((f) => f.includes('/hour=all/'))).toBe(true);
      expect(files.length).toBe(3);
      for (const file of files) {
        const columns = (await conn.runAndReadAll(`SELECT name FROM parquet_schema('${file}') WHERE num_children IS NULL`)).getRowObjectsJS().map((r) => String(r.name));
        expect(columns, path.relative(storeDir, file)).toEqual(DOCUMENTED);
      }
      // And the layout reads as one table, partition columns from the paths.
      const whole = (await conn.runAndReadAll(`SELECT count(*)::INTEGER AS n, count(DISTINCT pkey)::INTEGER AS k FROM read_parquet('${storeDir}/reports/v1/**/*.parquet')`)).getRowObjectsJS();
      expect(whole).toEqual([{ n: TOTAL, k: TOTAL }]);
    } finally {
      conn.closeSync();
      db.closeSync();
    }
  });

  it.skipIf(!HAS_PYARROW)('pyarrow.dataset and pandas read the Hive layout as one table', async () => {
    const out = await python(
      `
import json, sys
import pyarrow.dataset as ds, pandas as pd
root = sys.argv[1]
table = ds.dataset(root, format='parquet', partitioning='hive').to_table()
frame = pd.read_parquet(root)
print(json.dumps({'rows': table.num_rows, 'columns': table.column_names, 'pandas_rows': len(frame),
  'pkeys': sorted(frame['pkey'].tolist()), 'hours': sorted(set(str(h) for h in frame['hour']))}))
`,
      path.join(storeDir, 'reports', 'v1'),
    );
    expect(out.rows).toBe(TOTAL);
    expect(out.pandas_rows).toBe(TOTAL);
    // The documented columns, then the partition columns the paths give.
    expect(out.columns).toEqual([...DOCUMENTED, 'year', 'month', 'day', 'hour']);
    expect(out.pkeys).toEqual(Array.from({ length: TOTAL }, (_, i) => pkeyOf(100 + Math.floor(i / 20) * 100 + (i % 20))).sort());
    expect(out.hours).toEqual(['05', '09', 'all']);
  });
});

if (!HAS_PYARROW) console.warn(PYARROW_MISSING);
