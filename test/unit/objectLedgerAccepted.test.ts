// verify on AWS lists the ledger's keys for each window it checks. A key is written when its
// report is accepted, and a report is dated at most an hour after it is received, so keys
// written well before a window cannot hold a report of it: they are listed, not read (the
// scheduled verify of the last three days read every key in the bucket, every day).
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { IngestRecord } from '../../src/ledger/ledger.js';
import { ObjectLedger } from '../../src/ledger/objectLedger.js';
import { parsePartnerReport } from '../../src/partners/partnerReport.js';
import { SqliteQueue } from '../../src/queue/sqliteQueue.js';
import { openLedgerDb } from '../../src/sqlite/database.js';
import { FileObjectStore } from '../../src/store/fileStore.js';
import { idempotencyKey, pendingKey } from '../../src/store/layout.js';
import { report, tempDir } from '../support/env.js';

const HOUR = 3_600_000;

describe('the ledger on the object store, listing what it accepted', () => {
  it('reads only the keys written late enough to hold a report of the window', async () => {
    const root = await tempDir('flood-ledger-');
    const store = new FileObjectStore(root);
    const ledger = new ObjectLedger(store, new SqliteQueue(openLedgerDb(await tempDir()), 5));
    const now = Date.now();
    const record = (id: number, createdMs: number): IngestRecord => ({
      v: 1, pkey: `partner-${id}`, source: 'partner', post_id: id, received_at: new Date(now).toISOString(),
      report: parsePartnerReport(report(id, { created_at: new Date(createdMs).toISOString() }), now),
    });
    // A report accepted ten days ago (its key's time set back so), and a live one.
    await ledger.accept(record(1, now - 10 * 24 * HOUR - HOUR));
    await ledger.accept(record(2, now - HOUR));
    const tenDaysAgo = new Date(now - 10 * 24 * HOUR);
    await fs.utimes(path.join(root, 'ingest/keys/partner/1.json'), tenDaysAgo, tenDaysAgo);
    let gets = 0;
    const counted = Object.assign(Object.create(store) as FileObjectStore, { get: (key: string) => (gets++, store.get(key)) });
    const reader = new ObjectLedger(counted, new SqliteQueue(openLedgerDb(await tempDir()), 5));
    const listed = async (fromMs: number, toMs: number) => {
      const out: string[] = [];
      for await (const page of reader.accepted(fromMs, toMs)) out.push(...page.map((r) => r.pkey));
      return out.sort();
    };
    // A window from before both keys were written reads both.
    expect(await listed(now - 31 * 24 * HOUR, now)).toEqual(['partner-1', 'partner-2']);
    expect(gets).toBe(2);
    // The scheduled verify's last three days: the key written ten days ago is listed, not read.
    gets = 0;
    expect(await listed(now - 3 * 24 * HOUR, now)).toEqual(['partner-2']);
    expect(gets).toBe(1);
  });

  it('gives a window of more keys than it reads at once a page at a time, every report once, the pending ones told', async () => {
    const store = new FileObjectStore(await tempDir('flood-ledger-'));
    const now = Date.now();
    // Written as acceptance leaves them: a key each, a marker while pending (every third).
    await Promise.all(
      Array.from({ length: 4_500 }, async (_, i) => {
        const record: IngestRecord = {
          v: 1, pkey: `partner-${i}`, source: 'partner', post_id: i, received_at: new Date(now).toISOString(),
          report: parsePartnerReport(report(i, { created_at: new Date(now - HOUR - i * 500).toISOString() }), now),
        };
        await store.put(idempotencyKey({ source: 'partner', post_id: i }), JSON.stringify(record));
        if (i % 3 === 0) await store.put(pendingKey({ source: 'partner', post_id: i }), JSON.stringify(record));
      }),
    );
    const ledger = new ObjectLedger(store, new SqliteQueue(openLedgerDb(await tempDir()), 5));
    const sizes: number[] = [];
    const found = new Map<string, { createdMs: number; pending: boolean }>();
    for await (const page of ledger.accepted(now - 2 * HOUR, now)) {
      sizes.push(page.length);
      for (const r of page) found.set(r.pkey, { createdMs: r.createdMs, pending: r.pending });
    }
    expect(sizes.length).toBeGreaterThan(1);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(4_500);
    expect(found.size).toBe(4_500);
    for (let i = 0; i < 4_500; i++) expect(found.get(`partner-${i}`)).toEqual({ createdMs: now - HOUR - i * 500, pending: i % 3 === 0 });
  });
});
