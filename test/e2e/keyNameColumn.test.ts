// The name of the key that accepted a report is a column of the parts (`key_name`), on both
// backends; parts written before the column existed stay readable next to newer ones: every
// answer format, counts, stats and pages read the mix, compaction carries the names over (null
// for the older rows), and pyarrow reads the mixed layout with the documented schema.
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listWindowParts } from '../../src/archive/partListing.js';
import { storePartPublisher } from '../../src/archive/partPublisher.js';
import { sqlString } from '../../src/archive/duckdb.js';
import { compact } from '../../src/ops/compact.js';
import { newPartKey } from '../../src/store/layout.js';
import type { Runtime } from '../../src/main/runtime.js';
import { HAS_PYARROW, PYARROW_MISSING, python } from '../support/clients.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { allArchived, API_KEY, BACKENDS, getJson, OTHER_KEY, postReport, report, startTestService, testConfig, testRuntime, type TestService } from '../support/env.js';

let emulator: Emulator;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(async () => {
  await emulator.stop();
});

const DAY = { fromMs: Date.parse('2026-11-20T00:00:00Z'), toMs: Date.parse('2026-11-20T23:59:59.999Z') };
const WINDOW = 'start=2026-11-20T00:00:00Z&end=2026-11-20T23:59:59.999Z';
const UA = { 'User-Agent': 'flood-tests/1.0' };

/** pkey → key_name of every row of the day's parts, each file read as it is. */
async function keyNames(rt: Runtime): Promise<Record<string, string | null>[]> {
  const out: Record<string, string | null>[] = [];
  for (const partition of await listWindowParts(rt.store, DAY.fromMs, DAY.toMs)) {
    for (const part of partition.parts) {
      const file = await rt.cache.localFile(part);
      out.push(
        await rt.db.withConnection(async (conn) => {
          const rows = (await conn.runAndReadAll(`SELECT * FROM read_parquet(${sqlString(file)}) ORDER BY pkey`)).getRowObjectsJS();
          return Object.fromEntries(rows.map((r) => [String(r.pkey), 'key_name' in r ? (r.key_name as string | null) : 'absent']));
        }),
      );
    }
  }
  return out;
}

/**
 * A part as the release before `key_name` wrote it: the same rows without that column,
 * published in an earlier hour of the day than the newer parts (so a window reads a newer
 * part first, then this one).
 */
async function publishOlderPart(rt: Runtime, dir: string): Promise<void> {
  const file = path.join(dir, 'older.parquet');
  await rt.db.withConnection((conn) =>
    conn.run(
      `COPY (SELECT 'partner-' || i AS pkey, TIMESTAMPTZ '2026-11-20 03:00:00+00' + to_minutes(i) AS created_at, 'partner' AS source,
                    'confirmed' AS status, NULL::VARCHAR AS url, NULL::VARCHAR AS image_url, 'flood' AS disaster_type, NULL::JSON AS report_data,
                    'PH-QC' AS instance_region_code, NULL::VARCHAR AS local_area_id, 'older ' || i AS title, '' AS text,
                    121.0497::DOUBLE AS lng, 14.6516::DOUBLE AS lat, i::BIGINT AS post_id, 'Quezon City' AS partner_city,
                    TIMESTAMPTZ '2026-11-20 03:30:00+00' AS received_at, 'v0' AS boundary_version
             FROM range(1, 4) t(i) ORDER BY created_at DESC, pkey DESC)
       TO ${sqlString(file)} (FORMAT parquet, COMPRESSION zstd)`,
    ),
  );
  await storePartPublisher(rt).publish(newPartKey(Date.parse('2026-11-20T03:00:00Z')), file);
}

describe.each(BACKENDS)('key_name in the parts (%s)', (kind) => {
  let svc: TestService;
  let dir: string;
  beforeAll(async () => {
    const config = await testConfig(kind, kind === 'aws' ? emulator : undefined, { API_KEYS: `alpha:${API_KEY},beta:${OTHER_KEY}` });
    svc = await startTestService(await testRuntime(config, kind === 'aws' ? emulator : undefined));
    dir = path.join(config.dataDir, 'older-parts');
    await fs.mkdir(dir, { recursive: true });
  });
  afterAll(async () => {
    await svc?.stop();
  });

  /** What every reader of the day answers, each a list of pkeys (or a count). */
  async function answers() {
    const lines: Record<string, string[]> = {};
    for (const q of ['format=ndjson', 'format=csv', 'format=ndjson&include_retracted=true', 'format=ndjson&admin=PH-QC', 'format=ndjson&bbox=120,14,122,15']) {
      const res = await fetch(`${svc.url}/reports/archive?${q}&${WINDOW}`, { headers: UA });
      expect([q, res.status]).toEqual([q, 200]);
      const text = (await res.text()).trim().split('\n');
      lines[q] = (q.startsWith('format=csv') ? text.slice(1).map((l) => l.split(',')[0]!.replace(/"/g, '')) : text.map((l) => JSON.parse(l).properties.pkey as string)).sort();
    }
    const arrow = await fetch(`${svc.url}/reports/archive?format=arrow&${WINDOW}`, { headers: UA });
    expect(arrow.status).toBe(200);
    await arrow.arrayBuffer();
    const count = await getJson(`${svc.url}/reports/archive/count?${WINDOW}`);
    const stats = await getJson(`${svc.url}/reports/archive/stats?${WINDOW}&interval=day`);
    const parquet = await fetch(`${svc.url}/reports/archive?format=parquet&${WINDOW}`, { headers: UA });
    expect(parquet.status).toBe(200);
    const parquetFile = path.join(dir, `answer-${Date.now()}.parquet`);
    await fs.writeFile(parquetFile, Buffer.from(await parquet.arrayBuffer()));
    const parquetRows = await svc.rt.db.withConnection(async (conn) => Number((await conn.runAndReadAll(`SELECT count(*) AS n FROM read_parquet(${sqlString(parquetFile)})`)).getRowsJS()[0]![0]));
    const paged: string[] = [];
    for (let url: string | undefined = `${svc.url}/reports/archive?format=geojson&limit=2&${WINDOW}`; url; ) {
      const res = await fetch(url, { headers: UA });
      expect(res.status).toBe(200);
      paged.push(...((await res.json()) as any).features.map((f: any) => f.properties.pkey));
      url = /<([^>]+)>; rel="next"/.exec(res.headers.get('link') ?? '')?.[1];
    }
    return { lines, count: count.body.result?.count, total: stats.body.result?.total, parquetRows, paged: paged.sort() };
  }

  it('each part records the name of the key that accepted its reports; parts without the column read alongside, and compaction keeps the names', async () => {
    await publishOlderPart(svc.rt, dir);
    // Two flushes into one later hour: that hour has two parts, so reads de-duplicate the day.
    for (const round of [[[11, API_KEY], [12, API_KEY]], [[13, OTHER_KEY]]] as const) {
      for (const [id, key] of round) expect((await postReport(svc.url, report(id, { created_at: `2026-11-20T05:${id}:00Z` }), { key })).status).toBe(201);
      await allArchived(svc.rt);
    }

    expect(await keyNames(svc.rt)).toEqual([
      { 'partner-1': 'absent', 'partner-2': 'absent', 'partner-3': 'absent' },
      { 'partner-alpha-11': 'alpha', 'partner-alpha-12': 'alpha' },
      { 'partner-beta-13': 'beta' },
    ]);
    const all = ['partner-1', 'partner-2', 'partner-3', 'partner-alpha-11', 'partner-alpha-12', 'partner-beta-13'];
    const expected = { lines: Object.fromEntries(['format=ndjson', 'format=csv', 'format=ndjson&include_retracted=true', 'format=ndjson&admin=PH-QC', 'format=ndjson&bbox=120,14,122,15'].map((q) => [q, all])), count: 6, total: 6, parquetRows: 6, paged: all };
    expect(await answers()).toEqual(expected);
    // The tags added since (province and region) are null in the older rows, in every shape.
    const older = async () => {
      const res = await fetch(`${svc.url}/reports/archive?format=ndjson&${WINDOW}`, { headers: UA });
      const tags = (await res.text()).trim().split('\n').map((l) => JSON.parse(l).properties).find((p) => p.pkey === 'partner-1').tags;
      const csv = (await (await fetch(`${svc.url}/reports/archive?format=csv&${WINDOW}`, { headers: UA })).text()).trim().split('\n');
      const header = csv[0]!.split(',');
      const row = csv.find((l) => l.startsWith('"partner-1"'))!.split(',');
      return { tags, csv: [row[header.indexOf('province_code')], row[header.indexOf('region_code')]] };
    };
    const olderTags = { tags: { instance_region_code: 'PH-QC', local_area_id: null, province_code: null, region_code: null }, csv: ['', ''] };
    expect(await older()).toEqual(olderTags);

    // Compaction merges both kinds into one part with the column: null where no name was known.
    expect((await compact(svc.rt, { ...DAY, closedBeforeMs: Date.now() })).daysCompacted).toBe(1);
    expect(await keyNames(svc.rt)).toEqual([{ 'partner-1': null, 'partner-2': null, 'partner-3': null, 'partner-alpha-11': 'alpha', 'partner-alpha-12': 'alpha', 'partner-beta-13': 'beta' }]);
    expect(await answers()).toEqual(expected);
    expect(await older()).toEqual(olderTags);
  });
});

describe('a layout mixing parts with and without key_name, read by researchers', () => {
  let svc: TestService;
  let dir: string;
  beforeAll(async () => {
    const config = await testConfig('embedded', undefined, { API_KEYS: `alpha:${API_KEY}` });
    svc = await startTestService(await testRuntime(config));
    dir = path.join(config.dataDir, 'older-parts');
    await fs.mkdir(dir, { recursive: true });
    await publishOlderPart(svc.rt, dir);
    expect((await postReport(svc.url, report(21, { created_at: '2026-11-20T05:21:00Z' }))).status).toBe(201);
    await allArchived(svc.rt);
  });
  afterAll(async () => {
    await svc?.stop();
  });

  it.skipIf(!HAS_PYARROW)('pyarrow reads it as one table with the documented schema (key_name null in the older parts)', async () => {
    const out = await python(
      `
import json, sys
import pandas as pd, pyarrow as pa, pyarrow.dataset as ds, pyarrow.parquet as pq
root = sys.argv[1]
# The README's recipe: the union of the parts' schemas, then the partition columns.
found = ds.dataset(root, format='parquet', partitioning='hive')
schema = pa.unify_schemas([pq.read_schema(f) for f in found.files] + [found.partitioning.schema])
frame = pd.read_parquet(root, schema=schema)
print(json.dumps(sorted([[p, None if pd.isna(k) else k] for p, k in zip(frame['pkey'], frame['key_name'])])))
`,
      path.join(svc.rt.config.storageUrl.slice('file://'.length), 'reports', 'v1'),
    );
    expect(out).toEqual([['partner-1', null], ['partner-2', null], ['partner-3', null], ['partner-alpha-21', 'alpha']]);
  });
});

if (!HAS_PYARROW) console.warn(PYARROW_MISSING);
