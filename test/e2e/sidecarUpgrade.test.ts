// Ready texts of an older version (v6: members not joinable, GeoJSON joined by newlines): never read, so their days are answered
// by DuckDB, the same bytes; compaction writes today's (reading only the first bytes of what is
// stored to know) and deletes the old object, on either backend.
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storePartPublisher } from '../../src/archive/partPublisher.js';
import { readyKeyOf, storedIndex } from '../../src/archive/sidecars/index.js';
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

describe.each(BACKENDS)('a part whose ready texts are of an older version (%s)', (kind) => {
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

  it('gets today\'s from compaction, every answer unchanged meanwhile, the old object deleted, and once only', async () => {
    const key = readyKeyOf(partKey);
    const today = (await svc.rt.store.get(key))!.body;
    const index = (await storedIndex(svc.rt.store, key))!;
    // Compared as text: vitest compares Buffers byte by byte, slowly.
    const texts = (await Promise.all(['geojson', 'csv'].map(pull))).map(String);
    const rows = await rowsOf(await pull('parquet'), 'today.parquet');
    expect(rows).toHaveLength(2_000);

    // The part as a release before today's version left it: ready texts under ready/v6/ alone.
    const v6 = key.replace(/^ready\/v7\//, 'ready/v6/');
    expect(v6).not.toBe(key);
    const eol = today.indexOf(10);
    await svc.rt.store.put(v6, Buffer.concat([Buffer.from(`${JSON.stringify({ ...index, version: 6 })}\n`), today.subarray(eol + 1)]));
    await svc.rt.store.delete([key]);
    expect(await storedIndex(svc.rt.store, v6)).toBeUndefined();
    // Not read: DuckDB answers, the same bytes.
    expect((await Promise.all(['geojson', 'csv'].map(pull))).map(String)).toEqual(texts);
    expect(await rowsOf(await pull('parquet'), 'older.parquet')).toEqual(rows);

    const result = await compact(svc.rt, { fromMs: DAY_MS, toMs: DAY_MS + 86_399_999, closedBeforeMs: Date.now() });
    expect(result.daysCompacted).toBe(0);
    expect((await svc.rt.store.get(key))?.body.equals(today)).toBe(true);
    expect(await svc.rt.store.head(v6)).toBeUndefined();
    expect((await Promise.all(['geojson', 'csv'].map(pull))).map(String)).toEqual(texts);
    expect(await rowsOf(await pull('parquet'), 'after.parquet')).toEqual(rows);

    // A second pass finds today's there and rewrites nothing.
    const etag = (await svc.rt.store.head(key))!.etag;
    await compact(svc.rt, { fromMs: DAY_MS, toMs: DAY_MS + 86_399_999, closedBeforeMs: Date.now() });
    expect((await svc.rt.store.head(key))!.etag).toBe(etag);
  }, 60_000);
});
