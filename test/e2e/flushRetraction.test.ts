// A copy of an archived report (SQS delivers a message twice at times) flushed while the report
// is retracted and purged: the copy's part lands after the purge marked the report purged, and
// readers hide a purged report by its status alone. The worker reads the retractions again once
// its parts stand, and writes the part again with the report as a tombstone.
import path from 'node:path';
import fs from 'node:fs/promises';
import { gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { parsePartnerReport } from '../../src/partners/partnerReport.js';
import type { IngestRecord } from '../../src/ledger/ledger.js';
import { purgeRetracted } from '../../src/ops/purge.js';
import { readyKeyOf } from '../../src/archive/sidecars/index.js';
import { Worker } from '../../src/worker/worker.js';
import { API_KEY_NAME, keysUnder, pkeyOf, report, testConfig, testRuntime } from '../support/env.js';

const SECRET = 'Juan dela Cruz 0917-123-4567';

describe('a retraction while a copy of the report is flushed', () => {
  it('leaves no part and no ready text holding the report whole, though a purge marked it purged meanwhile', async () => {
    const config = await testConfig('embedded');
    const rt = await testRuntime(config);
    const workers: Worker[] = [];
    let letGo: (() => void) | undefined;
    try {
      await rt.boundaries.seedIfEmpty();
      const posted = report(91, { created_at: '2026-11-23T04:00:00Z', title: SECRET });
      await rt.intake.accept(parsePartnerReport(posted), API_KEY_NAME);
      const options = { flushIntervalSeconds: 0.2, maxBufferedReports: 1000, visibilitySeconds: 30 };
      const deps = { queue: rt.queue, ledger: rt.ledger, boundaries: rt.boundaries, db: rt.db, log: rt.log };
      const first = new Worker({ ...deps, store: rt.store, tmpDir: path.join(config.dataDir, 'tmp', 'first') }, options);
      workers.push(first);
      first.start();
      while (await rt.ledger.isPending(pkeyOf(91))) await new Promise((r) => setTimeout(r, 50));
      await first.stop();

      // The same message once more, as a first delivery.
      const record: IngestRecord = { v: 1, pkey: pkeyOf(91), source: 'partner', post_id: 91, partner: API_KEY_NAME, received_at: new Date().toISOString(), report: parsePartnerReport(posted) };
      await rt.queue.send([JSON.stringify(record)]);
      // The second worker's part waits at its write while the report is retracted and purged.
      let atPart!: () => void;
      const writing = new Promise<void>((resolve) => (atPart = resolve));
      const goOn = new Promise<void>((resolve) => (letGo = resolve));
      let held = false;
      const store = Object.assign(Object.create(rt.store) as typeof rt.store, {
        put: async (key: string, body: Buffer | string) => {
          if (!held && key.startsWith('reports/') && key.endsWith('.parquet')) {
            held = true;
            atPart();
            await goOn;
          }
          return rt.store.put(key, body);
        },
      });
      const second = new Worker({ ...deps, store, tmpDir: path.join(config.dataDir, 'tmp', 'second') }, options);
      workers.push(second);
      second.start();
      await writing;
      expect(await rt.ledger.retract(pkeyOf(91), API_KEY_NAME, 'posted by mistake')).toMatchObject({ found: true, first: true });
      expect(await purgeRetracted(rt)).toMatchObject({ retractions: 1, purged: 1 });
      letGo!();
      while ((await rt.queue.depth()).inFlight > 0) await new Promise((r) => setTimeout(r, 50));
      await second.stop();

      const parts = (await keysUnder(rt, 'reports/v1/year=2026/month=11/day=23/hour=04/')).filter((k) => k.endsWith('.parquet'));
      expect(parts).toHaveLength(2);
      const rows = [];
      const texts: number[] = [];
      for (const key of parts) {
        const file = path.join(config.dataDir, `${path.basename(key)}`);
        await fs.writeFile(file, (await rt.store.get(key))!.body);
        rows.push(...(await rt.db.withConnection(async (conn) => (await conn.runAndReadAll(`SELECT pkey, status, title FROM read_parquet('${file}')`)).getRowObjectsJS())));
        // Its ready texts (each part has them: each was its worker's first in the hour) leave a
        // tombstone out of every section, and hold the report nowhere whole.
        const ready = (await rt.store.get(readyKeyOf(key)))!.body;
        const base = ready.indexOf(0x0a) + 1;
        const index = JSON.parse(ready.subarray(0, base).toString('utf8')) as { hours: Record<string, [number, number]>[]; items: { count: number } };
        texts.push(index.items.count);
        const end = Math.max(0, ...index.hours.flatMap((h) => ['geojson', 'topojson', 'csv', 'arrow'].map((s) => h[s]![1])));
        expect(end === 0 || !gunzipSync(ready.subarray(base, base + end)).includes('Juan')).toBe(true);
        expect(ready.includes('Juan')).toBe(false);
      }
      expect(rows).toEqual([
        { pkey: pkeyOf(91), status: 'retracted', title: '' },
        { pkey: pkeyOf(91), status: 'retracted', title: '' },
      ]);
      expect(texts).toEqual([0, 0]);
    } finally {
      letGo?.();
      for (const w of workers) await w.stop();
      await rt.close();
    }
  }, 60_000);
});
