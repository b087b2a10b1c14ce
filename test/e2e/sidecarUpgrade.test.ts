// Sidecars written before they held the answer-form Parquet section: compaction rewrites them
// with it (reading only their first bytes to know), so their days' Parquet answers become
// spliced row groups; their texts and every answer stay as they were, on either backend.
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storePartPublisher } from '../../src/archive/partPublisher.js';
import { readyKeyOf, storedIndex, type ReadyIndex } from '../../src/archive/sidecars/index.js';
import { compact } from '../../src/ops/compact.js';
import { newDayPartKey } from '../../src/store/layout.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { writePartFile } from '../support/parts.js';
import { BACKENDS, startTestService, testConfig, testRuntime, type TestService } from '../support/env.js';

const UA = { 'User-Agent': 'sidecar-upgrade-tests/1.0' };
const DAY_MS = Date.parse('2026-11-12T00:00:00Z');
const WINDOW = 'start=2026-11-12T00:00:00Z&end=2026-11-12T23:59:59.999Z';

let emulator: Emulator;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(async () => {
  await emulator.stop();
});

describe.each(BACKENDS)('a sidecar without its Parquet section (%s)', (kind) => {
  let svc: TestService;
  let partKey: string;
  beforeAll(async () => {
    svc = await startTestService(await testRuntime(await testConfig(kind, kind === 'aws' ? emulator : undefined), kind === 'aws' ? emulator : undefined), { worker: false, reconcile: false });
    const file = path.join(svc.rt.config.dataDir, 'day.parquet');
    await writePartFile(svc.rt.db, file, 0, 2_000, DAY_MS, 40_000);
    partKey = newDayPartKey(DAY_MS);
    await storePartPublisher(svc.rt).publish(partKey, file);
    await fs.rm(file);
  }, 60_000);
  afterAll(async () => {
    await svc?.stop();
  });

  async function pull(format: string): Promise<Buffer> {
    const res = await fetch(`${svc.url}/reports/archive?${WINDOW}&format=${format}`, { headers: UA });
    expect(res.status).toBe(200);
    return Buffer.from(await res.arrayBuffer());
  }

  /** pkey, created_at and geometry of every row of a Parquet answer, in order. */
  async function rowsOf(parquet: Buffer, name: string): Promise<string[]> {
    const file = path.join(svc.rt.config.dataDir, name);
    await fs.writeFile(file, parquet);
    return svc.rt.db.withConnection(async (conn) => {
      // The WKB bytes as they are stored (not DuckDB's GEOMETRY, which the answer's `geo` metadata would give).
      await conn.run('SET enable_geoparquet_conversion = false');
      return (await conn.runAndReadAll(`SELECT pkey || ' ' || epoch_us(created_at) || ' ' || hex(geometry) AS r FROM read_parquet('${file}')`)).getRowsJS().map((r) => String(r[0]));
    });
  }

  it('gets it from compaction, its texts unchanged, and once only', async () => {
    const key = readyKeyOf(partKey);
    // The sidecar as releases before the section wrote it: the index without `parquet`, the body without the section (its last part).
    const stored = (await svc.rt.store.get(key))!.body;
    const eol = stored.indexOf(10);
    const { parquet, ...older } = JSON.parse(stored.subarray(0, eol).toString('utf8')) as ReadyIndex;
    expect(parquet).toBeDefined();
    await svc.rt.store.put(key, Buffer.concat([Buffer.from(`${JSON.stringify(older)}\n`), stored.subarray(eol + 1, eol + 1 + parquet![0])]));
    expect((await storedIndex(svc.rt.store, key))?.parquet).toBeUndefined();

    // Compared as text: vitest compares Buffers byte by byte, slowly.
    const texts = (await Promise.all(['geojson', 'csv'].map(pull))).map(String);
    const rowsBefore = await rowsOf(await pull('parquet'), 'before.parquet');
    expect(rowsBefore).toHaveLength(2_000);

    const result = await compact(svc.rt, { fromMs: DAY_MS, toMs: DAY_MS + 86_399_999, closedBeforeMs: Date.now() });
    expect(result.daysCompacted).toBe(0);
    const index = await storedIndex(svc.rt.store, key);
    expect(index?.parquet).toBeDefined();
    expect(index?.hours).toEqual(older.hours);
    // The section is the answer-form Parquet of the part: a Parquet file of its 2,000 rows.
    const upgraded = (await svc.rt.store.get(key))!.body;
    const base = upgraded.indexOf(10) + 1;
    const section = upgraded.subarray(base + index!.parquet![0], base + index!.parquet![1]);
    expect(await rowsOf(section, 'section.parquet')).toEqual(rowsBefore);

    expect((await Promise.all(['geojson', 'csv'].map(pull))).map(String)).toEqual(texts);
    expect(await rowsOf(await pull('parquet'), 'after.parquet')).toEqual(rowsBefore);

    // A second pass finds the section there and rewrites nothing.
    const etag = (await svc.rt.store.head(key))!.etag;
    await compact(svc.rt, { fromMs: DAY_MS, toMs: DAY_MS + 86_399_999, closedBeforeMs: Date.now() });
    expect((await svc.rt.store.head(key))!.etag).toBe(etag);
  }, 60_000);
});
