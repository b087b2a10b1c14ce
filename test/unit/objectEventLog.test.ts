// The event log on the object store (the AWS backend), on a real file store with a clock the test
// moves: what CAP reads of it (the last day's archived reports, and which were retracted) stays
// within the day it covers, however long the process runs.
import { describe, expect, it } from 'vitest';
import { featureOf } from '../../src/events/feature.js';
import { ANNOUNCING_PREFIX, EVENT_LOG_PREFIX, ObjectEventLog } from '../../src/events/objectEventLog.js';
import { announcingRetractions } from '../../src/events/retractions.js';
import type { IngestRecord } from '../../src/ledger/ledger.js';
import { ObjectLedger } from '../../src/ledger/objectLedger.js';
import { parsePartnerReport } from '../../src/partners/partnerReport.js';
import { SqliteQueue } from '../../src/queue/sqliteQueue.js';
import { openLedgerDb } from '../../src/sqlite/database.js';
import type { ArchiveRow } from '../../src/archive/partColumns.js';
import { FileObjectStore } from '../../src/store/fileStore.js';
import type { ObjectStore } from '../../src/store/objectStore.js';
import { report, tempDir } from '../support/env.js';

const HOUR = 3_600_000;
const row = (n: number) =>
  ({
    pkey: `partner-${n}`, created_at_ms: Date.parse('2026-11-21T05:00:00Z'), source: 'partner', status: 'confirmed', url: null, image_url: null,
    disaster_type: 'flood', report_data: null, instance_region_code: 'PH-QC', local_area_id: null, title: '', text: '', lng: 121.05, lat: 14.65,
    post_id: n, partner_city: 'Quezon City', received_at_ms: Date.parse('2026-11-21T05:00:00Z'), boundary_version: 'v',
  }) as ArchiveRow;

/** Two processes' logs on one bucket, with a clock that stands still: neither lists again by itself. */
async function twoProcesses() {
  const now = Date.parse('2026-11-21T06:00:00Z');
  const store = new FileObjectStore(await tempDir('flood-eventlog-'));
  return { store, logs: [new ObjectEventLog(store, () => now), new ObjectEventLog(store, () => now)] as const };
}

describe('the event log on the object store', () => {
  it('keeps what CAP reads to the last 25 hours: archived reports and retractions alike', async () => {
    let now = Date.parse('2026-11-21T06:00:00Z');
    const log = new ObjectEventLog(new FileObjectStore(await tempDir('flood-eventlog-')), () => now);
    await log.archived([row(1), row(2)]);
    await log.retracted(featureOf(row(2)));
    expect((await log.archivedReport('partner-1'))?.pkey).toBe('partner-1');
    expect(await log.archivedReport('partner-2')).toBeUndefined();
    expect(await log.wasRetracted('partner-2')).toBe(true);
    // A day and two hours later, in the same process: both have left what CAP covers.
    now += 26 * HOUR;
    await log.archived([row(3)]);
    expect(await log.archivedReport('partner-1')).toBeUndefined();
    expect(await log.wasRetracted('partner-2')).toBe(false);
    expect((await log.archivedReport('partner-3'))?.pkey).toBe('partner-3');
  });

  it("gives the alert a retraction cancels the same from the process that retracted and from one started after it; none for a report retracted before it was archived", async () => {
    const now = Date.parse('2026-11-21T06:00:00Z');
    const store = new FileObjectStore(await tempDir('flood-eventlog-'));
    const log = new ObjectEventLog(store, () => now);
    await log.archived([row(1), row(2)]);
    const alertSentMs = (await log.archivedReport('partner-1'))!.at_ms;
    await log.retracted(featureOf(row(1)));
    await log.retracted(featureOf(row(5)));
    const window = [Date.parse('2026-11-20T06:00:00Z'), Date.parse('2026-11-21T07:00:00Z'), 1000] as const;
    const cancelled = await log.cancelledBetween(...window);
    expect(cancelled).toEqual([{ pkey: 'partner-1', alertSentMs, retractedMs: now }]);
    expect(await new ObjectEventLog(store, () => now).cancelledBetween(...window)).toEqual(cancelled);
    // By city: the report's own, not another's.
    expect(await log.cancelledBetween(...window, ['PH-QC'])).toEqual(cancelled);
    expect(await log.cancelledBetween(...window, ['PH-PG'])).toEqual([]);
  });

  it('announces no copy of a report another process has just retracted, though its marks were listed before the retraction', async () => {
    // A repair and an API process: the repair's marks are not listed again.
    const { store, logs: [repairing, api] } = await twoProcesses();
    await repairing.archived([row(1)]);
    await repairing.since(0);
    await api.retracted(featureOf(row(1)));
    const batches = async () => {
      const keys: string[] = [];
      for await (const info of store.list({ prefix: EVENT_LOG_PREFIX })) keys.push(info.key);
      return keys;
    };
    const before = await batches();
    const seq = await api.lastSeq(true);
    await repairing.superseded([{ ...row(1), title: 'the copy kept' }, row(2)]);
    // One batch, of the report not retracted alone (readers would hide the other by its mark, webhooks already sending it would not).
    const added = (await batches()).filter((k) => !before.includes(k));
    expect(added).toHaveLength(1);
    const batch = JSON.parse((await store.get(added[0]!))!.body.toString('utf8')) as { kind: string; features: { properties: { pkey: string } }[] };
    expect([batch.kind, batch.features.map((f) => f.properties.pkey)]).toEqual(['archived', ['partner-2']]);
    await api.lastSeq(true);
    expect((await api.since(seq)).map((e) => [e.kind, e.pkey])).toEqual([['archived', 'partner-2']]);
  });

  it("gives the newest id as of now when asked fresh: another process's batch, not yet listed here", async () => {
    // Two API processes.
    const { logs: [here, there] } = await twoProcesses();
    await there.archived([row(1)]);
    const seen = await here.lastSeq();
    await there.archived([row(2)]);
    const newer = await there.lastSeq();
    expect(newer).toBeGreaterThan(seen);
    // Within its listing's 250 ms, this process still answers what it saw; asked fresh, the other's batch.
    expect(await here.lastSeq()).toBe(seen);
    expect(await here.lastSeq(true)).toBe(newer);
    expect((await here.since(seen)).map((e) => e.pkey)).toEqual(['partner-2']);
  });

  it('leaves out the archived events of retracted reports, wherever they lie, and reads on past them', async () => {
    const store = new FileObjectStore(await tempDir('flood-eventlog-'));
    const log = new ObjectEventLog(store);
    await log.archived([row(1)]);
    await log.retracted(featureOf(row(1)));
    // Retracted while pending; then a flush that read the retractions before records it.
    await log.retracted(featureOf(row(2)));
    await log.archived([row(2)]);
    await log.archived([row(3)]);
    const seen = (events: { kind: string; pkey: string }[]) => events.map((e) => `${e.kind} ${e.pkey}`);
    for (const reader of [log, new ObjectEventLog(store)]) {
      expect(seen(await reader.since(0, 10))).toEqual(['retracted partner-1', 'retracted partner-2', 'archived partner-3']);
      // A reader one event at a time gets each in turn, never an empty answer before the end.
      const one: string[] = [];
      for (let after = 0, next = await reader.since(after, 1); next.length > 0; after = next[0]!.seq, next = await reader.since(after, 1)) one.push(...seen(next));
      expect(one).toEqual(['retracted partner-1', 'retracted partner-2', 'archived partner-3']);
    }
  });

  it('announces a retraction once: a repeat days later (a partner or an operator retracting again) is not a new event', async () => {
    const dir = await tempDir('flood-eventlog-');
    const store = new FileObjectStore(dir);
    let now = Date.now();
    const log = new ObjectEventLog(store, () => now);
    const ledger = announcingRetractions(new ObjectLedger(store, new SqliteQueue(openLedgerDb(dir), 5)), log, undefined, () => now);
    const record: IngestRecord = {
      v: 1, pkey: 'partner-alpha-7', source: 'partner', post_id: 7, partner: 'alpha', received_at: new Date().toISOString(),
      report: parsePartnerReport(report(7, { created_at: '2026-11-21T05:00:00Z' }), Date.now()),
    };
    expect((await ledger.accept(record)).created).toBe(true);
    const retracted = async () => (await log.since(0, 100)).filter((e) => e.kind === 'retracted').length;
    expect((await ledger.retract('partner-alpha-7', 'alpha', 'posted twice')).found).toBe(true);
    expect(await retracted()).toBe(1);
    // At once (the log has it), and 27 hours later (past the log's index of retractions).
    expect(await ledger.retract('partner-alpha-7', 'alpha', 'posted twice')).toMatchObject({ found: true, first: false });
    now += 27 * HOUR;
    expect(await ledger.retract('partner-alpha-7', 'ops', 'again')).toMatchObject({ found: true, first: false });
    expect(await retracted()).toBe(1);
  });

  it('announces a retraction once when two processes retract it at once (a DELETE repeated on another API task); one whose announcement failed, or whose announcer died, is announced by a repeat', async () => {
    const dir = await tempDir('flood-eventlog-');
    const files = new FileObjectStore(dir);
    // The log's next batch refused once when `failNext` is set (S3 unreachable for a moment).
    let failNext = false;
    const store = new Proxy(files, {
      get(target, name) {
        const value = Reflect.get(target, name, target) as unknown;
        if (name !== 'putIfAbsent') return typeof value === 'function' ? value.bind(target) : value;
        return async (key: string, ...rest: unknown[]) => {
          if (failNext && key.startsWith(EVENT_LOG_PREFIX)) {
            failNext = false;
            throw new Error('the store is unreachable');
          }
          return (value as (...a: unknown[]) => Promise<boolean>).apply(target, [key, ...rest]);
        };
      },
    }) as ObjectStore;
    let now = Date.now();
    const queue = new SqliteQueue(openLedgerDb(dir), 5);
    const [a, b] = [0, 1].map(() => announcingRetractions(new ObjectLedger(store, queue), new ObjectEventLog(store, () => now), undefined, () => now));
    const accept = async (n: number) => {
      const record: IngestRecord = {
        v: 1, pkey: `partner-alpha-${n}`, source: 'partner', post_id: n, partner: 'alpha', received_at: new Date().toISOString(),
        report: parsePartnerReport(report(n, { created_at: '2026-11-21T05:00:00Z' }), Date.now()),
      };
      expect((await a!.accept(record)).created).toBe(true);
      return record.pkey;
    };
    /** Each retracted report's events, as a process started now reads the log. */
    const announced = async () => (await new ObjectEventLog(files, () => now).since(0, 1000)).filter((e) => e.kind === 'retracted').map((e) => e.pkey).sort();

    const raced: string[] = [];
    for (let n = 1; n <= 8; n++) {
      const pkey = await accept(n);
      raced.push(pkey);
      const answers = await Promise.all([a!.retract(pkey, 'alpha', 'posted twice'), b!.retract(pkey, 'alpha', 'posted twice')]);
      expect(answers.map((r) => r.found)).toEqual([true, true]);
    }
    expect(await announced()).toEqual(raced.sort());

    // The log unreachable as the first retraction is announced: it fails (a 503), and the
    // partner's repeat, on the other process at once, announces it.
    const failed = await accept(20);
    failNext = true;
    await expect(a!.retract(failed, 'alpha', 'wrong place')).rejects.toThrow(/unreachable/);
    expect(await b!.retract(failed, 'alpha', 'wrong place')).toMatchObject({ found: true, first: false });
    expect((await announced()).filter((p) => p === failed)).toEqual([failed]);

    // A process that died between its claim and its event: a repeat announces once the claim is stale.
    const orphan = await accept(30);
    expect(await a!.retract(orphan, 'alpha', 'again')).toMatchObject({ found: true, first: true });
    const events = (await announced()).filter((p) => p === orphan);
    expect(events).toEqual([orphan]);
    // (Its event taken out, its claim left: as a process killed before it appended leaves them.)
    const [batch] = (await new ObjectEventLog(files, () => now).since(0, 1000)).filter((e) => e.pkey === orphan && e.kind === 'retracted');
    await files.delete([`${EVENT_LOG_PREFIX}${String(Math.floor(batch!.seq / 1000)).padStart(12, '0')}.json`]);
    expect(await files.head(`${ANNOUNCING_PREFIX}${orphan}`)).toBeDefined();
    const [c] = [announcingRetractions(new ObjectLedger(store, queue), new ObjectEventLog(store, () => now), undefined, () => now)];
    await c!.retract(orphan, 'alpha', 'again');
    expect((await announced()).filter((p) => p === orphan)).toEqual([]);
    now += 31_000;
    await c!.retract(orphan, 'alpha', 'again');
    expect((await announced()).filter((p) => p === orphan)).toEqual([orphan]);
  });
});
