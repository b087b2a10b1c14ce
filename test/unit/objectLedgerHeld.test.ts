// An import stopped between a report's pending marker and its idempotency key (killed, or the
// store stalled past its timeouts) leaves the marker alone. Resumed, it archives that report
// itself as a held repeat and deletes the marker: the key must be written first, from the
// marker, or the report is archived with no key (a later import accepts it again).
import { describe, expect, it } from 'vitest';
import type { IngestRecord } from '../../src/ledger/ledger.js';
import { ObjectLedger } from '../../src/ledger/objectLedger.js';
import { parsePartnerReport } from '../../src/partners/partnerReport.js';
import { SqliteQueue } from '../../src/queue/sqliteQueue.js';
import { openLedgerDb } from '../../src/sqlite/database.js';
import { FileObjectStore } from '../../src/store/fileStore.js';
import { idempotencyKey, pendingKey } from '../../src/store/layout.js';
import { acceptHeld, report, tempDir } from '../support/env.js';

describe('the ledger on the object store, an import resumed after a stop between marker and key', () => {
  it('writes the key of a held report from its marker before the import archives it; the report is a repeat from then on', async () => {
    const store = new FileObjectStore(await tempDir('flood-ledger-'));
    const queue = new SqliteQueue(openLedgerDb(await tempDir()), 5);
    const now = Date.now();
    const record = (id: number, title: string): IngestRecord => ({
      v: 1, pkey: `partner-${id}`, source: 'partner', post_id: id, received_at: new Date(now).toISOString(),
      report: parsePartnerReport(report(id, { title, created_at: new Date(now - 3_600_000).toISOString() }), now),
    });
    // The first run: report 2's key is never written (the run dies there).
    const stopped = Object.assign(Object.create(store) as FileObjectStore, {
      putIfAbsent: async (...args: Parameters<FileObjectStore['putIfAbsent']>) => {
        if (args[0] === idempotencyKey({ source: 'partner', post_id: 2 })) throw new Error('killed between the marker and the key');
        return store.putIfAbsent(...args);
      },
    });
    const holdUntil = now + 600_000;
    await expect(acceptHeld(new ObjectLedger(stopped, queue), [record(1, 'first'), record(2, 'first')], holdUntil)).rejects.toThrow(/killed/);
    expect(await store.head(pendingKey({ source: 'partner', post_id: 2 }))).toBeDefined();
    expect(await store.head(idempotencyKey({ source: 'partner', post_id: 2 }))).toBeUndefined();

    // The resumed run: both held repeats, to archive; report 2's key now stands, with its first version.
    const ledger = new ObjectLedger(store, queue);
    const resumed = await acceptHeld(ledger, [record(1, 'second'), record(2, 'second')], holdUntil);
    expect(resumed.map((r) => [r.pkey, r.created, 'held' in r && r.held?.report.title])).toEqual([
      ['partner-1', false, 'first'],
      ['partner-2', false, 'first'],
    ]);
    const key = await store.get(idempotencyKey({ source: 'partner', post_id: 2 }));
    expect(JSON.parse(key!.body.toString('utf8'))).toMatchObject({ pkey: 'partner-2', report: { title: 'first' } });

    // Archived by the import (the markers go): a later import of the same report is a repeat, not a new report.
    await ledger.markArchived(['partner-1', 'partner-2']);
    const again = await acceptHeld(ledger, [record(2, 'third')], holdUntil);
    expect(again).toEqual([{ created: false, pkey: 'partner-2' }]);
    expect(await ledger.lookup('partner-2')).toMatchObject({ pkey: 'partner-2' });
  });
});
