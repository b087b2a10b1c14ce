// A report retracted while it still waits in the queue: the worker writes it as a tombstone,
// so its personal fields never reach a part, on both backends.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import fs from 'node:fs/promises';
import path from 'node:path';
import { API_KEY, BACKENDS, getJson, keysUnder, postReport, report, startTestService, tempDir, testConfig, testRuntime, pkeyOf } from '../support/env.js';

let emulator: Emulator;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(async () => {
  await emulator.stop();
});

const SECRET = 'Maria Santos 0918-765-4321';
const W = 'start=2026-11-21T00:00:00Z&end=2026-11-21T23:59:59Z';

describe.each(BACKENDS)('a report retracted before it is archived (%s)', (kind) => {
  it('reaches the parts as a tombstone only; answers leave it out, include_retracted shows the tombstone', async () => {
    const peer = kind === 'aws' ? emulator : undefined;
    const rt = await testRuntime(await testConfig(kind, peer), peer);
    const svc = await startTestService(rt, { worker: false, reconcile: false });
    const dir = await tempDir();
    try {
      expect((await postReport(svc.url, report(61, { title: SECRET, text: `tawag ${SECRET}`, image_url: 'https://img.example.org/maria.jpg' }))).status).toBe(201);
      expect((await postReport(svc.url, report(62, { title: 'Baha sa España' }))).status).toBe(201);
      const deleted = await fetch(`${svc.url}/feeds/partner/61`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } });
      expect(deleted.status).toBe(200);

      // The worker takes both from the queue only now.
      while (rt.worker.buffered < 2) if ((await rt.worker.pollOnce(1)) === 0) break;
      expect(rt.worker.buffered).toBe(2);
      await rt.worker.flush();

      const parts = (await keysUnder(rt, 'reports/v1/')).filter((k) => k.endsWith('.parquet'));
      expect(parts.length).toBeGreaterThan(0);
      const rows = await rt.db.withConnection(async (conn) => {
        const files = await Promise.all(
          parts.map(async (key, i) => {
            const file = path.join(dir, `${i}.parquet`);
            await fs.writeFile(file, (await rt.store.get(key))!.body);
            return file;
          }),
        );
        const reader = await conn.runAndReadAll(`SELECT pkey, status, title, text, image_url FROM read_parquet([${files.map((f) => `'${f}'`).join(', ')}]) ORDER BY pkey`);
        return reader.getRowObjectsJS() as { pkey: string; status: string; title: string; text: string; image_url: string | null }[];
      });
      expect(rows).toEqual([
        { pkey: pkeyOf(61), status: 'retracted', title: '', text: '', image_url: null },
        { pkey: pkeyOf(62), status: 'confirmed', title: 'Baha sa España', text: '', image_url: null },
      ]);

      const answer = await getJson(`${svc.url}/reports/archive?${W}&geoformat=geojson`);
      expect(answer.body.result.features.map((f: any) => f.properties.pkey)).toEqual([pkeyOf(62)]);
      const withTombstones = await getJson(`${svc.url}/reports/archive?${W}&geoformat=geojson&include_retracted=true`);
      const tombstone = withTombstones.body.result.features.find((f: any) => f.properties.pkey === pkeyOf(61));
      expect(tombstone.properties).toMatchObject({ status: 'retracted', title: '', text: '', image_url: null });
      expect(JSON.stringify(withTombstones.body)).not.toContain('Maria');
    } finally {
      await svc.stop();
    }
  });
});
