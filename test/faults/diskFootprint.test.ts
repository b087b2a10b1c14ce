// What a report costs on the ledger's disk, and a worker that still makes progress when the
// disk is nearly full: a pending report's body is kept once (its queue message reads the
// ledger's record), the record leaves the ledger once the parts hold the report (and a bulk
// job's pages go back to the disk), and a flush that does not fit is retried in smaller steps
// instead of all at once, forever.
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { UnavailableError } from '../../src/shared/errors.js';
import { parsePartnerReport } from '../../src/partners/partnerReport.js';
import { BoundaryRepository } from '../../src/boundaries/repository.js';
import { FileObjectStore } from '../../src/store/fileStore.js';
import type { ObjectStore } from '../../src/store/objectStore.js';
import { acceptHeld, allArchived, API_KEY, getJson, postReport, report, startTestService, testConfig, testRuntime } from '../support/env.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

/** Text that does not compress: its bytes are what a part and its sidecars must hold. */
const noise = (bytes: number) => randomBytes(Math.ceil((bytes * 3) / 4)).toString('base64').slice(0, bytes);

describe("the ledger's footprint", () => {
  it("keeps a pending report's body once, and drops it once the parts hold the report", async () => {
    const config = await testConfig('embedded');
    const svc = await startTestService(await testRuntime(config), { worker: false, reconcile: false });
    cleanups.push(() => svc.stop());
    const texts = new Map<string, string>();
    for (let i = 0; i < 20; i++) {
      const text = noise(3000);
      const res = await postReport(svc.url, report(500 + i, { title: `Baha ${i}`, text }));
      expect(res.status).toBe(201);
      texts.set(res.body.pkey, text);
    }
    // The ledger's own file, opened read-only for each look and closed at once.
    const look = <T,>(sql: string): T => {
      const ledger = new Database(path.join(config.dataDir, 'ledger.sqlite'), { readonly: true, timeout: 5_000 });
      try {
        return ledger.prepare(sql).get() as T;
      } finally {
        ledger.close();
      }
    };
    const sizes = () => look<{ records: number | null; n: number }>('SELECT sum(length(record)) AS records, count(*) AS n FROM pending_records');
    const queued = look<{ n: number }>("SELECT count(*) AS n FROM queue WHERE body <> ''");
    // Each body is in its ledger row; the messages carry none of it.
    expect(queued.n).toBe(0);
    expect(look<{ n: number }>('SELECT count(*) AS n FROM queue').n).toBe(20);
    expect(sizes().records).toBeGreaterThan(20 * 3000);
    expect(sizes().n).toBe(20);

    svc.rt.worker.start();
    cleanups.unshift(() => svc.rt.worker.stop());
    await allArchived(svc.rt);
    // Once archived, the ledger keeps the report's identity, key, time and state, not the report.
    expect(sizes()).toEqual({ records: null, n: 0 });
    expect(look<{ n: number }>('SELECT count(*) AS n FROM reports').n).toBe(20);
    expect(look<{ n: number }>('SELECT count(*) AS n FROM queue').n).toBe(0);
    for (const [pkey, text] of texts) {
      const back = await getJson(`${svc.url}/reports/${pkey}`);
      expect(back.status).toBe(200);
      expect(back.body.result.properties.text).toBe(text);
    }
    // Idempotency and the owner's retraction still hold on the rows without their records.
    expect((await postReport(svc.url, report(500, { text: 'a second version' }))).status).toBe(200);
    expect((await fetch(`${svc.url}/feeds/partner/501`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } })).status).toBe(200);
  });

  it("gives a bulk job's records back to the disk once it has archived them", async () => {
    const config = await testConfig('embedded');
    const svc = await startTestService(await testRuntime(config), { worker: false, reconcile: false });
    cleanups.push(() => svc.stop());
    const bytes = () => {
      const ledger = new Database(path.join(config.dataDir, 'ledger.sqlite'), { readonly: true, timeout: 5_000 });
      try {
        return (ledger.pragma('page_count', { simple: true }) as number) * (ledger.pragma('page_size', { simple: true }) as number);
      } finally {
        ledger.close();
      }
    };
    const empty = bytes();
    const records = Array.from({ length: 8_000 }, (_, i) => {
      const body = report(700_000 + i, { text: noise(1_000) });
      return { v: 1 as const, pkey: `partner-${700_000 + i}`, source: 'partner', post_id: 700_000 + i, received_at: new Date().toISOString(), report: parsePartnerReport(body) };
    });
    await acceptHeld(svc.rt.ledger, records, Date.now() + 60_000);
    const accepted = bytes();
    expect(accepted - empty).toBeGreaterThan(8_000 * 1_000);
    await svc.rt.ledger.markArchived(records.map((r) => r.pkey));
    await svc.rt.ledger.reclaimHeldSpace();
    // What is left is the rows: under a fifth of the records' bytes.
    expect(bytes() - empty).toBeLessThan((accepted - empty) / 5);
    expect(await svc.rt.ledger.lookup('partner-700001')).toMatchObject({ pending: false, state: 'confirmed', post_id: 700_001 });
  });

  it('archives a backlog in smaller flushes when the store cannot take one large write', async () => {
    const config = await testConfig('embedded');
    const real = new FileObjectStore(config.storageUrl.slice('file://'.length));
    // The disk filled up after the first start had published the boundaries.
    await new BoundaryRepository(real, 0).seedIfEmpty();
    // A nearly full disk: a write larger than what is left fails as a full disk fails it.
    const FREE_BYTES = 64 * 1024;
    let refused = 0;
    const store = new Proxy(real, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver) as unknown;
        if (typeof value !== 'function') return value;
        if (['put', 'putIfAbsent'].includes(String(prop))) {
          return async (key: string, body: Buffer | string, ...rest: unknown[]) => {
            if (Buffer.byteLength(body) > FREE_BYTES) {
              refused += 1;
              throw new UnavailableError('storage', 'ENOSPC: no space left on device, write');
            }
            return (value as (...args: unknown[]) => Promise<unknown>).call(target, key, body, ...rest);
          };
        }
        return (value as (...args: unknown[]) => unknown).bind(target);
      },
    }) as ObjectStore;
    const svc = await startTestService(await testRuntime(config, undefined, { store }), { worker: false, reconcile: false });
    cleanups.push(() => svc.stop());
    // 150 reports of one hour: their part and sidecars at once are far larger than what is free.
    for (let i = 0; i < 150; i++) {
      expect((await postReport(svc.url, report(700 + i, { created_at: `2026-11-21T13:${String(i % 60).padStart(2, '0')}:00+08:00`, text: noise(1500) }))).status).toBe(201);
    }
    svc.rt.worker.start();
    cleanups.unshift(() => svc.rt.worker.stop());
    await allArchived(svc.rt, 90_000);
    expect(refused).toBeGreaterThan(0);
    const day = await getJson(`${svc.url}/reports/archive/count?start=2026-11-21T00:00:00%2B0800&end=2026-11-21T23:59:59%2B0800`);
    expect(day.body.result.count).toBe(150);
  }, 120_000);
});
