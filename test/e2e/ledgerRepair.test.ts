// verify --repair: archived reports the ledger does not know are recorded in it from their rows,
// so a partner's repeat of one is a repeat again (not a second copy) and its DELETE finds it.
// The embedded ledger restored from a backup older than the archive (the CLI, beside the running
// service); the S3 ledger missing the idempotency keys of archived reports (as an earlier build
// left them when a crash came between a report's marker and its key).
import fs from 'node:fs/promises';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compact } from '../../src/ops/compact.js';
import { verify, type VerifyResult } from '../../src/ops/verify.js';
import { COMPACTION_LOCK_KEY, hourPrefix, idempotencyKey, parsePkey, RETRACTIONS_PREFIX, retractionName } from '../../src/store/layout.js';
import { withStoreLock } from '../../src/ops/storeLock.js';
import { readyKeyOf, statsKeyOf } from '../../src/archive/sidecars/keys.js';
import type { Config } from '../../src/shared/config.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { runCli } from '../support/cli.js';
import { allArchived, API_KEY, API_KEY_NAME, BACKENDS, eventually, pkeyOf, postReport, report, startTestService, testConfig, testRuntime, type TestService } from '../support/env.js';

const DAY = { fromMs: Date.parse('2026-11-21T00:00:00Z'), toMs: Date.parse('2026-11-21T23:59:59.999Z') };
const NEXT_DAY = { fromMs: Date.parse('2026-11-22T00:00:00Z'), toMs: Date.parse('2026-11-22T23:59:59.999Z') };
const WINDOW = 'start=2026-11-21T00:00:00%2B0000&end=2026-11-21T23:59:59%2B0000&include_retracted=true';

const post = (svc: TestService, id: number, title = `report ${id}`) => postReport(svc.url, report(id, { title }));
const retract = (svc: TestService, id: number) => fetch(`${svc.url}/feeds/partner/${id}`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } });

/** Each archived report's pkey, status and title, once per copy the answer holds. */
async function answered(svc: TestService): Promise<[string, string, string][]> {
  const res = await fetch(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson`);
  expect(res.status).toBe(200);
  const features = ((await res.json()) as { result: { features: unknown[] } }).result.features as { properties: { pkey: string; status: string; title: string } }[];
  return features.map((f): [string, string, string] => [f.properties.pkey, f.properties.status, f.properties.title]).sort((a, b) => a[0].localeCompare(b[0]));
}

/** The created_at of each copy of a report that answers over both days hold (one Feature a line). */
async function timesOf(svc: TestService, id: number): Promise<string[]> {
  const res = await fetch(`${svc.url}/reports/archive?start=2026-11-21T00:00:00Z&end=2026-11-22T23:59:59Z&include_retracted=true&format=ndjson`);
  expect(res.status).toBe(200);
  const rows = (await res.text()).split('\n').filter(Boolean).map((line) => (JSON.parse(line) as { properties: { pkey: string; created_at: string } }).properties);
  return rows.filter((r) => r.pkey === pkeyOf(id)).map((r) => new Date(r.created_at).toISOString()).sort();
}

describe.each(BACKENDS)('verify --repair on the %s backend', (kind) => {
  let emulator: Emulator | undefined;
  let config: Config;
  let svc: TestService;
  beforeAll(async () => {
    if (kind === 'aws') emulator = await startEmulator();
    config = await testConfig(kind, emulator);
    svc = await startTestService(await testRuntime(config, emulator));
  });
  afterAll(async () => {
    await svc?.stop();
    await emulator?.stop();
  });

  const ledgerFile = () => path.join(config.dataDir, 'ledger.sqlite');
  /** The embedded ledger restored from `backup`, the service stopped meanwhile. */
  async function restore(backup: string): Promise<void> {
    await svc.stop();
    for (const suffix of ['', '-wal', '-shm']) await fs.rm(`${ledgerFile()}${suffix}`, { force: true });
    await fs.copyFile(backup, ledgerFile());
    svc = await startTestService(await testRuntime(config, emulator));
  }

  /**
   * Report `id` posted dated `createdAt` and archived, then lost by the ledger (restored from a
   * backup made before it on the embedded backend, its key deleted on S3); returns how to lose it again.
   */
  async function postedThenLost(id: number, createdAt: string): Promise<() => Promise<void>> {
    const backup = path.join(config.dataDir, `ledger-backup-before-${id}.sqlite`);
    if (kind === 'embedded') await new Database(ledgerFile()).backup(backup);
    expect((await postReport(svc.url, report(id, { created_at: createdAt }))).status).toBe(201);
    await allArchived(svc.rt);
    const forget = async () => {
      if (kind === 'embedded') await restore(backup);
      else await svc.rt.store.delete([idempotencyKey(parsePkey(pkeyOf(id))!)]);
    };
    await forget();
    return forget;
  }

  it('records the archived reports the ledger lost: a repeat is a repeat again, a DELETE finds its report, a tombstone stays retracted', async () => {
    for (const id of [1, 2, 3]) expect((await post(svc, id)).status).toBe(201);
    await allArchived(svc.rt);
    const backup = path.join(config.dataDir, 'ledger-backup.sqlite');
    if (kind === 'embedded') await new Database(ledgerFile()).backup(backup);
    for (const id of [4, 5, 6]) expect((await post(svc, id)).status).toBe(201);
    // Dated half an hour ahead, as the feed allows (up to an hour).
    const ahead = new Date(Date.now() + 30 * 60_000).toISOString();
    if (kind === 'embedded') expect((await postReport(svc.url, report(7, { created_at: ahead }))).status).toBe(201);
    expect((await retract(svc, 5)).status).toBe(200);
    await allArchived(svc.rt);
    // The retraction purged from the parts: 5 is a tombstone there.
    await compact(svc.rt, { ...DAY, closedBeforeMs: Date.now() });
    const lost = [4, 5, 6].map((id) => pkeyOf(id));

    // The ledger restored from the backup made before 4, 5 and 6 (and 5's retraction).
    if (kind === 'embedded') await restore(backup);
    else {
      await svc.rt.store.delete(lost.map((pkey) => idempotencyKey(parsePkey(pkey)!)));
    }
    const found = await verify(svc.rt, DAY);
    expect(found).toMatchObject({ unexpected: lost, adopted: 0, missing: [], ok: true });

    let repaired: VerifyResult;
    if (kind === 'embedded') {
      // From the CLI, beside the running service.
      const cli = await runCli(['verify', '--repair', '--from', '2026-11-21', '--to', '2026-11-21', '--json'], { DATA_DIR: config.dataDir, API_KEYS: API_KEY });
      expect(cli.stderr).not.toMatch(/error/i);
      expect(cli.code).toBe(0);
      repaired = JSON.parse(cli.stdout) as VerifyResult;
      // Without --to, up to the latest report the feed takes: the one dated ahead is repaired too.
      const ahead = await runCli(['verify', '--repair', '--from', new Date(Date.now() - 86_400_000).toISOString().slice(0, 10), '--json'], { DATA_DIR: config.dataDir, API_KEYS: API_KEY });
      expect(ahead.code).toBe(0);
      expect(JSON.parse(ahead.stdout)).toMatchObject({ unexpected: [pkeyOf(7)], adopted: 1 });
      expect((await postReport(svc.url, report(7, { created_at: new Date().toISOString() }))).status).toBe(200);
    } else {
      repaired = await verify(svc.rt, { ...DAY, repair: true });
    }
    expect(repaired).toMatchObject({ unexpected: lost, adopted: 3, notAdopted: [], ok: true });

    // A partner's repeat is a repeat: no second copy; its DELETE finds the report; the tombstone is retracted.
    const again = await post(svc, 4, 'a later version');
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ created: false, pkey: pkeyOf(4) });
    expect((await retract(svc, 6)).status).toBe(200);
    expect(await svc.rt.ledger.lookup(pkeyOf(5))).toMatchObject({ state: 'retracted', pending: false, partner: API_KEY_NAME });
    expect(await svc.rt.ledger.lookup(pkeyOf(4))).toMatchObject({ state: 'confirmed', pending: false, partner: API_KEY_NAME, post_id: 4 });
    await allArchived(svc.rt);
    await compact(svc.rt, { ...DAY, closedBeforeMs: Date.now() });
    expect(await answered(svc)).toEqual([
      [pkeyOf(1), 'confirmed', 'report 1'],
      [pkeyOf(2), 'confirmed', 'report 2'],
      [pkeyOf(3), 'confirmed', 'report 3'],
      [pkeyOf(4), 'confirmed', 'report 4'],
      [pkeyOf(5), 'retracted', ''],
      [pkeyOf(6), 'retracted', ''],
    ]);
    expect(await verify(svc.rt, DAY)).toMatchObject({ unexpected: [], missing: [], duplicatedInStorage: 0, ok: true });
    // A second repair finds nothing to record.
    expect(await verify(svc.rt, { ...DAY, repair: true })).toMatchObject({ unexpected: [], adopted: 0 });
  });

  it('a copy alone in its part: the repair retires the part with its sidecars, and the day keeps the rest', async () => {
    const alone = 21;
    // An hour no other report of this suite is in, left uncompacted: its one part holds this report alone.
    await postedThenLost(alone, '2026-11-21T20:30:00Z');
    const hourParts = async () => {
      const keys: string[] = [];
      for await (const o of svc.rt.store.list({ prefix: hourPrefix(Date.parse('2026-11-21T20:00:00Z')) })) keys.push(o.key);
      return keys;
    };
    const [part] = await hourParts();
    expect(part).toBeDefined();
    expect(await svc.rt.store.head(readyKeyOf(part!))).toBeDefined();
    expect((await postReport(svc.url, report(alone, { created_at: '2026-11-22T20:30:00Z' }))).status).toBe(201);
    await allArchived(svc.rt);
    expect(await timesOf(svc, alone)).toEqual(['2026-11-21T20:30:00.000Z', '2026-11-22T20:30:00.000Z']);

    const dayBefore = await answered(svc);
    expect(await verify(svc.rt, { fromMs: DAY.fromMs, toMs: NEXT_DAY.toMs, repair: true })).toMatchObject({ merged: [pkeyOf(alone)], notMerged: [], ok: true });
    expect(await timesOf(svc, alone)).toEqual(['2026-11-22T20:30:00.000Z']);
    expect(await answered(svc)).toEqual(dayBefore.filter(([pkey]) => pkey !== pkeyOf(alone)));
    expect(await hourParts()).toEqual([]);
    expect(await svc.rt.store.head(readyKeyOf(part!))).toBeUndefined();
    expect(await svc.rt.store.head(statsKeyOf(part!))).toBeUndefined();
    expect(await verify(svc.rt, { fromMs: DAY.fromMs, toMs: NEXT_DAY.toMs })).toMatchObject({ atAnotherTime: [], missing: [], ok: true });
  });

  it('a retracted report merged is not announced again, though the event log no longer knows of its retraction', async () => {
    const gone = 51;
    await postedThenLost(gone, '2026-11-21T22:40:00Z');
    expect((await postReport(svc.url, report(gone, { created_at: '2026-11-22T22:40:00Z' }))).status).toBe(201);
    await allArchived(svc.rt);
    const announced = (await svc.rt.feed.archivedReport(pkeyOf(gone)))!;
    expect(announced.feature.properties.created_at).toBe('2026-11-21T22:40:00.000Z');
    expect((await retract(svc, gone)).status).toBe(200);
    // The log's retention has passed: neither the report's events nor (embedded) its retraction's are kept.
    await svc.rt.feed.prune(0);
    // Embedded, the log then holds what a retraction whose announcement failed leaves: the first copy's event alone.
    svc.rt.events?.record('archived', [announced.feature]);
    const seqBefore = await svc.rt.feed.lastSeq(true);
    const both = { fromMs: DAY.fromMs, toMs: NEXT_DAY.toMs };
    expect(await verify(svc.rt, { ...both, repair: true })).toMatchObject({ merged: [pkeyOf(gone)], notMerged: [] });
    expect((await svc.rt.feed.since(seqBefore)).filter((e) => e.pkey === pkeyOf(gone))).toEqual([]);
  });

  it('finds a retracted report the event log still shows (a log restored from before the retraction, or an announcement lost); the repair announces the retraction', async () => {
    const id = 61;
    expect((await post(svc, id, 'to be retracted')).status).toBe(201);
    await allArchived(svc.rt);
    const announced = (await svc.rt.feed.archivedReport(pkeyOf(id)))!;
    if (kind === 'embedded') {
      expect((await retract(svc, id)).status).toBe(200);
      // events.sqlite restored from a backup taken before the retraction: the archived event is
      // back, the retraction's is not.
      const events = new Database(path.join(config.dataDir, 'events.sqlite'));
      try {
        events.prepare('DELETE FROM events WHERE key = ?').run(`retracted:${pkeyOf(id)}`);
      } finally {
        events.close();
      }
      svc.rt.events!.record('archived', [announced.feature]);
    } else {
      // The retraction recorded, its announcement never made (the process stopped between them).
      const { ObjectLedger } = await import('../../src/ledger/objectLedger.js');
      expect((await new ObjectLedger(svc.rt.store, svc.rt.queue).retract(pkeyOf(id), API_KEY_NAME, 'lost announcement')).found).toBe(true);
    }
    const cap = () => fetch(`${svc.url}/reports/${pkeyOf(id)}.cap`).then((res) => res.status);
    const replayed = async () => (await svc.rt.feed.since(0)).filter((e) => e.pkey === pkeyOf(id)).map((e) => [e.kind, e.feature.properties.title]);
    expect(await replayed()).toContainEqual(['archived', 'to be retracted']);
    // Not looked for while it may still be on its way to the log.
    expect((await verify(svc.rt, DAY)).retractionsShown).toEqual([]);
    const found = await verify(svc.rt, { ...DAY, announceSettleMs: 0 });
    expect(found).toMatchObject({ retractionsShown: [pkeyOf(id)], ok: false });
    expect(await verify(svc.rt, { ...DAY, repair: true, announceSettleMs: 0 })).toMatchObject({ retractionsShown: [pkeyOf(id)], retractionsAnnounced: 1, ok: true });
    expect(await cap()).toBe(410);
    // The stream replays its retraction, never its fields again.
    expect(new Set((await replayed()).map((e) => JSON.stringify(e)))).toEqual(new Set([JSON.stringify(['retracted', ''])]));
    expect(await verify(svc.rt, { ...DAY, announceSettleMs: 0 })).toMatchObject({ retractionsShown: [], ok: true });
  });

  it('a report the ledger lost after both its copies were archived is found on two days too; a repair beside a running compaction merges nothing and says so, the next one merges', async () => {
    const twice = 41;
    const forget = await postedThenLost(twice, '2026-11-21T21:10:00Z');
    expect((await postReport(svc.url, report(twice, { created_at: '2026-11-22T21:10:00Z' }))).status).toBe(201);
    await allArchived(svc.rt);
    // Lost again: the ledger knows neither copy.
    await forget();
    const both = { fromMs: DAY.fromMs, toMs: NEXT_DAY.toMs };
    expect(await verify(svc.rt, both)).toMatchObject({ unexpected: [pkeyOf(twice)], atAnotherTime: [pkeyOf(twice)], ok: false });

    // A compaction holds the archive: the repair records the report, merges nothing, and says why.
    let release!: () => void;
    const holding = withStoreLock({ store: svc.rt.store, key: COMPACTION_LOCK_KEY, what: 'compaction', log: svc.rt.log, errors: { running: (m) => new Error(m), lost: (m) => new Error(m) } }, () => new Promise<void>((resolve) => (release = resolve)));
    try {
      await eventually(async () => (await svc.rt.store.head(COMPACTION_LOCK_KEY)) ?? undefined, 15_000, 'the compaction lock');
      const blocked = await verify(svc.rt, { ...both, repair: true });
      expect(blocked).toMatchObject({ adopted: 1, merged: [], notMerged: [pkeyOf(twice)], mergeLockedOut: expect.stringMatching(/running/), ok: false });
    } finally {
      release();
      await holding;
    }
    expect(await timesOf(svc, twice)).toEqual(['2026-11-21T21:10:00.000Z', '2026-11-22T21:10:00.000Z']);
    // The next run: the copy the repair recorded (the newest) stays.
    expect(await verify(svc.rt, { ...both, repair: true })).toMatchObject({ merged: [pkeyOf(twice)], notMerged: [], ok: true });
    expect(await timesOf(svc, twice)).toEqual(['2026-11-22T21:10:00.000Z']);
    expect(await svc.rt.ledger.lookup(pkeyOf(twice))).toMatchObject({ createdMs: Date.parse('2026-11-22T21:10:00Z') });
  });

  it('finds a report archived on two days, and a tombstone whose retraction the ledger lacks; the repair records the retraction', async () => {
    const retained = 12;
    const reposted = 11;
    expect((await post(svc, retained)).status).toBe(201);
    await allArchived(svc.rt);
    const backup = path.join(config.dataDir, 'ledger-backup-2.sqlite');
    if (kind === 'embedded') await new Database(ledgerFile()).backup(backup);
    expect((await post(svc, reposted)).status).toBe(201);
    expect((await retract(svc, retained)).status).toBe(200);
    await allArchived(svc.rt);
    await compact(svc.rt, { ...DAY, closedBeforeMs: Date.now() });
    // The ledger loses 11 and 12's retraction: restored from before both (embedded), or their objects gone (S3).
    if (kind === 'embedded') await restore(backup);
    else {
      await svc.rt.store.delete([idempotencyKey(parsePkey(pkeyOf(reposted))!)]);
      const { createdMs } = (await svc.rt.ledger.lookup(pkeyOf(retained)))!;
      await svc.rt.store.delete([RETRACTIONS_PREFIX + retractionName(createdMs, pkeyOf(retained))]);
    }
    expect(await svc.rt.ledger.lookup(pkeyOf(retained))).toMatchObject({ state: 'confirmed' });
    // 11 posted again, dated the next day, before any repair: the ledger takes it as new, and the archive holds it on both days.
    expect((await postReport(svc.url, report(reposted, { created_at: '2026-11-22T10:00:00+08:00' }))).status).toBe(201);
    await allArchived(svc.rt);

    // The day it was archived first: the ledger dates it the next day (another block's read).
    expect(await verify(svc.rt, DAY)).toMatchObject({ atAnotherTime: [pkeyOf(reposted)], retractionsOnlyArchived: [pkeyOf(retained)], retractionsRecorded: 0, unexpected: [], missing: [], ok: false });
    // Both days: the archive holds it on two.
    expect(await verify(svc.rt, { fromMs: DAY.fromMs, toMs: NEXT_DAY.toMs })).toMatchObject({ atAnotherTime: [pkeyOf(reposted)], ok: false });
    // The day the ledger gives it alone holds one copy, on its day.
    expect(await verify(svc.rt, NEXT_DAY)).toMatchObject({ atAnotherTime: [], ok: true });
    if (kind === 'embedded') {
      const cli = await runCli(['verify', '--from', '2026-11-21', '--to', '2026-11-22'], { DATA_DIR: config.dataDir, API_KEYS: API_KEY });
      expect(cli.code).toBe(1);
      expect(cli.stdout).toContain(`archived on another day than the ledger's, or on several (answers show each): 1 (verify --repair keeps the copy on the ledger's day) (${pkeyOf(reposted)})`);
      expect(cli.stdout).toContain('REPORTS ARCHIVED AT ANOTHER TIME');
    }

    // The event log announced the first copy: the re-post was a repeat to it.
    const kept = '2026-11-22T02:00:00.000Z';
    const announced = async () => (await svc.rt.feed.archivedReport(pkeyOf(reposted)))?.feature.properties.created_at;
    expect(await announced()).toMatch(/^2026-11-21T/);
    const seqBefore = await svc.rt.feed.lastSeq(true);
    const mergedFrom = Date.now();
    const repaired = await verify(svc.rt, { ...DAY, repair: true });
    expect(repaired).toMatchObject({ retractionsOnlyArchived: [pkeyOf(retained)], retractionsRecorded: 1 });
    // 11's copy on the first day is taken out; the one on the ledger's day stays, and mirrors are told of it.
    expect(repaired).toMatchObject({ atAnotherTime: [pkeyOf(reposted)], merged: [pkeyOf(reposted)], notMerged: [], ok: true });
    expect(await timesOf(svc, reposted)).toEqual(['2026-11-22T02:00:00.000Z']);
    expect(await verify(svc.rt, { fromMs: DAY.fromMs, toMs: NEXT_DAY.toMs })).toMatchObject({ atAnotherTime: [], duplicatedInStorage: 0, ok: true });
    expect(await svc.rt.changes.written(mergedFrom, Date.now() + 1)).toContainEqual({ pkey: pkeyOf(reposted), createdMs: Date.parse('2026-11-22T02:00:00Z') });
    // The event log announces the kept copy: CAP and the stream's followers get it, not the copy taken out.
    expect(await announced()).toBe(kept);
    const since = (await svc.rt.feed.since(seqBefore)).filter((e) => e.pkey === pkeyOf(reposted));
    expect(since.map((e) => [e.kind, e.feature.properties.created_at])).toEqual([['archived', kept]]);
    // Its neighbours on the first day are as they were.
    expect((await answered(svc)).map(([pkey]) => pkey)).toContain(pkeyOf(retained));
    // On S3 its unpurged marker (no purge ran) still held the partner's retraction: recorded as the partner asked it.
    expect(await svc.rt.ledger.lookup(pkeyOf(retained))).toMatchObject({ state: 'retracted', retraction: { by: kind === 'aws' ? API_KEY_NAME : 'ops:repair' } });
    // Recorded purged: no purge rewrites its parts, and a partner's repeat is told it was retracted.
    const unpurged = [];
    for await (const r of svc.rt.ledger.retractions({ unpurgedOnly: true })) unpurged.push(r.pkey);
    expect(unpurged).not.toContain(pkeyOf(retained));
    const again = await post(svc, retained, 'posted again');
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ created: false, retracted: true });
    expect(await verify(svc.rt, DAY)).toMatchObject({ retractionsOnlyArchived: [], retractionsRecorded: 0 });
  });
});
