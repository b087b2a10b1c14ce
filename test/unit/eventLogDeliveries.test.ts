// The embedded event log's deliveries of archived reports, indexed by the reports they carry: a
// retraction takes its report out of every delivery still waiting or set aside (and only its
// report), also in a log written before that index existed, which it builds when it opens one.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import type { ArchiveRow } from '../../src/archive/partColumns.js';
import { EventLog } from '../../src/events/eventLog.js';
import { featureOf, type ReportFeature } from '../../src/events/feature.js';
import { tempDir } from '../support/env.js';

const NOW = Date.parse('2026-11-21T00:00:00Z');
const row = (n: number): ArchiveRow =>
  ({
    pkey: `partner-a-${n}`, created_at_ms: NOW, source: 'partner', status: 'confirmed', url: null, image_url: null, disaster_type: 'flood', report_data: null,
    instance_region_code: 'PH-QC', local_area_id: null, province_code: null, region_code: null, title: `report ${n}`, text: '', lng: 121.05, lat: 14.65, post_id: n,
    partner_city: 'Quezon City', received_at_ms: NOW, boundary_version: 'v1',
  }) as ArchiveRow;

/** The reports of each delivery waiting or set aside, by subscription, in the order they were queued. */
function carried(log: EventLog): Record<string, string[][]> {
  const out: Record<string, string[][]> = {};
  // The log's own connection: its deliveries in the order they were queued.
  const db = (log as unknown as { db: Database.Database }).db;
  for (const d of db.prepare('SELECT subscription_id, features FROM deliveries ORDER BY rowid').all() as { subscription_id: string; features: string }[]) {
    (out[d.subscription_id] ??= []).push((JSON.parse(d.features) as ReportFeature[]).map((f) => f.properties.pkey));
  }
  return out;
}

/** Rows of the deliveries' index by report. */
const indexed = (log: EventLog) => ((log as unknown as { db: Database.Database }).db.prepare('SELECT count(*) AS n FROM delivery_reports').get() as { n: number }).n;

async function logWithBacklog(dir: string): Promise<EventLog> {
  const log = new EventLog(dir, () => NOW);
  for (const id of ['sub_a', 'sub_b']) {
    log.addSubscription({ id, url: `https://hooks.example.org/${id}`, secret: 's'.repeat(32), admins: [], localAreas: [], events: ['archived'], createdAt: new Date(NOW).toISOString() });
  }
  // Two flushes: 600 reports (two deliveries a subscription, 500 and 100), then 3.
  await log.archived(Array.from({ length: 600 }, (_, i) => row(i)));
  await log.archived([row(600), row(601), row(602)]);
  // One subscription's receiver gave up on: its first delivery set aside.
  log.setAside(log.deliveries('pending').find((d) => d.subscriptionId === 'sub_b')!.id, 'connect ECONNREFUSED');
  return log;
}

describe("the event log's deliveries of archived reports", () => {
  it('a retraction takes its report out of every delivery waiting or set aside, and a delivery left empty goes', async () => {
    const log = await logWithBacklog(await tempDir());
    const before = carried(log);
    expect(Object.values(before).map((ds) => ds.map((d) => d.length))).toEqual([
      [500, 100, 3],
      [500, 100, 3],
    ]);
    await log.retracted(featureOf(row(7)));
    for (const pkey of ['partner-a-600', 'partner-a-601', 'partner-a-602']) await log.hide(pkey);
    const after = carried(log);
    for (const sub of ['sub_a', 'sub_b']) {
      expect(after[sub]!.map((d) => d.length)).toEqual([499, 100]);
      expect(after[sub]![0]).toEqual(before[sub]![0]!.filter((p) => p !== 'partner-a-7'));
      expect(after[sub]![1]).toEqual(before[sub]![1]);
    }
    // Hidden twice: nothing more goes. The index no longer names it, and names what is left.
    await log.hide('partner-a-7');
    expect(carried(log)).toEqual(after);
    expect(indexed(log)).toBe(2 * (499 + 100));
    log.close();
  });

  it('a log written before its deliveries were indexed by report is indexed as it opens: a retraction still reaches them', async () => {
    const dir = await tempDir();
    (await logWithBacklog(dir)).close();
    // The log as the release before left it: no index of the reports its deliveries carry.
    const raw = new Database(path.join(dir, 'events.sqlite'));
    raw.exec('DROP TRIGGER deliveries_indexed; DROP TABLE delivery_reports; ALTER TABLE deliveries DROP COLUMN retry_from_ms; ALTER TABLE events DROP COLUMN alert_sent_ms');
    raw.pragma('user_version = 2');
    raw.close();
    const log = new EventLog(dir, () => NOW);
    expect(indexed(log)).toBe(2 * 603);
    // A delivery queued as a release that knows nothing of the index writes it: indexed all the same.
    const db = (log as unknown as { db: Database.Database }).db;
    const old = db.prepare("SELECT * FROM deliveries WHERE subscription_id = 'sub_a' ORDER BY rowid DESC LIMIT 1").get() as Record<string, unknown>;
    db.prepare("INSERT INTO deliveries (id, subscription_id, kind, at_ms, features, count, next_attempt_ms, state) VALUES ('queued-by-an-older-release', 'sub_a', 'archived', ?, ?, ?, ?, 'pending')").run(old.at_ms, old.features, old.count, old.next_attempt_ms);
    expect(indexed(log)).toBe(2 * 603 + 3);
    const before = carried(log);
    await log.hide('partner-a-450');
    await log.hide('partner-a-601');
    const after = carried(log);
    for (const sub of ['sub_a', 'sub_b']) {
      expect(after[sub]![0]).toEqual(before[sub]![0]!.filter((p) => p !== 'partner-a-450'));
      expect(after[sub]![2]).toEqual(['partner-a-600', 'partner-a-602']);
    }
    expect(after.sub_a![3]).toEqual(['partner-a-600', 'partner-a-602']);
    log.close();
  });

  it('a process opening a log to index while another holds its write lock waits for it, rather than failing at 2 s', async () => {
    const dir = await tempDir();
    (await logWithBacklog(dir)).close();
    const file = path.join(dir, 'events.sqlite');
    const raw = new Database(file);
    raw.exec('DROP TRIGGER deliveries_indexed; DROP TABLE delivery_reports; ALTER TABLE deliveries DROP COLUMN retry_from_ms; ALTER TABLE events DROP COLUMN alert_sent_ms');
    raw.pragma('user_version = 2');
    raw.close();
    // Another process (a worker's long write, or another process's migration) holds the lock 2.5 s.
    const holder = spawn(process.execPath, [
      '-e',
      `const D = require('better-sqlite3'); const d = new D(${JSON.stringify(file)}); d.exec('BEGIN IMMEDIATE'); console.log('held'); setTimeout(() => { d.exec('COMMIT'); d.close(); }, 2500);`,
    ]);
    const exited = once(holder, 'exit');
    await once(holder.stdout, 'data');
    const log = new EventLog(dir, () => NOW);
    expect(indexed(log)).toBe(2 * 603);
    log.close();
    expect((await exited)[0]).toBe(0);
  });
});
