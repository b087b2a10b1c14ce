// The embedded ledger: one SQLite database that every process on DATA_DIR shares, and the
// upgrade of a DATA_DIR written by the release that kept ingest files and a journal.
import { afterEach, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { crc32 } from 'node:zlib';
import Database from 'better-sqlite3';
import type { Config } from '../../src/shared/config.js';
import { parsePartnerReport } from '../../src/partners/partnerReport.js';
import { MIGRATIONS, openLedgerDb, reportByPkeySql } from '../../src/sqlite/database.js';
import { DEAD_LETTER_RETRY_MS, SqliteLedger } from '../../src/ledger/sqliteLedger.js';
import { SqliteQueue } from '../../src/queue/sqliteQueue.js';
import {
  acceptHeld,
  heldRecords,
  acceptedPkeys,
  allArchived,
  API_KEY,
  eventually,
  getJson,
  pendingCount,
  pkeyOf,
  postAccepted,
  postReport,
  report,
  startTestService,
  tempDir,
  testConfig,
  testRuntime,
} from '../support/env.js';

const MAIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../dist/src/main/flood-archive.cjs');
const WINDOW = 'start=2026-11-01T00:00:00%2B0000&end=2026-11-30T23:59:59%2B0000&geoformat=geojson';
const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
});

/** A ledger as a release before the migration that has `marker` left it: every migration before that one run. */
function ledgerBefore(dataDir: string, marker: string): Database.Database {
  const db = new Database(path.join(dataDir, 'ledger.sqlite'));
  const version = MIGRATIONS.findIndex((sql) => sql.includes(marker));
  db.transaction(() => {
    for (const sql of MIGRATIONS.slice(0, version)) db.exec(sql);
  })();
  db.pragma(`user_version = ${version}`);
  return db;
}

function start(role: string, env: Record<string, string>): { output: () => string } {
  const child = spawn(process.execPath, [MAIN, role], { env: { PATH: process.env.PATH ?? '', TZ: 'UTC', LOG_LEVEL: 'warn', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  return { output: () => out };
}

async function archived(url: string): Promise<{ pkey: string; title: string }[]> {
  const res = await getJson(`${url}/reports/archive?${WINDOW}`);
  return res.body.result.features.map((f: any) => ({ pkey: f.properties.pkey, title: f.properties.title }));
}

describe('the SQLite ledger shared by processes', () => {
  it('an API and a worker started apart on one DATA_DIR share the queue: a post is archived on the flush, not by reconciliation', async () => {
    const dataDir = await tempDir();
    // Reconciliation would take minutes: only the shared queue can bring the report in time.
    const env = { DATA_DIR: dataDir, PORT: '0', API_KEYS: API_KEY, FLUSH_INTERVAL_SECONDS: '0.5' };
    const api = start('serve', env);
    const url = await eventually(async () => /listening on (http:\/\/\S+)/.exec(api.output())?.[1], 20_000, 'the API listening');
    start('worker', env);
    // Sent again on a 503 (nothing accepted), as a partner does: the worker's start-up may hold the
    // ledger's write lock past an acceptance's wait on a busy host.
    expect((await postAccepted(url, report(1, { title: 'apart' }))).status).toBe(201);
    expect((await postAccepted(url, report(1, { title: 'again' }))).status).toBe(200);
    const got = await eventually(async () => {
      const rows = await archived(url);
      return rows.length > 0 ? rows : undefined;
    }, 15_000, 'the report archived by the separate worker');
    expect(got).toEqual([{ pkey: pkeyOf(1), title: 'apart' }]);
  });

  it('a worker hides each message it receives for QUEUE_VISIBILITY_SECONDS while its flush waits', async () => {
    const config = await testConfig('embedded', undefined, { FLUSH_INTERVAL_SECONDS: '5', QUEUE_VISIBILITY_SECONDS: '10' });
    const svc = await startTestService(await testRuntime(config), { reconcile: false });
    const db = new Database(path.join(config.dataDir, 'ledger.sqlite'), { readonly: true });
    try {
      const posted = Date.now();
      // Sent again on a 503, as a partner does: on a busy host an acceptance can pass its deadline.
      expect((await postAccepted(svc.url, report(5))).status).toBe(201);
      // Received at once, then held for up to the 5 s flush interval: hidden until 10 s after its receipt (40 s by default).
      const row = await eventually(async () => {
        const got = db.prepare('SELECT receive_count, visible_at_ms FROM queue WHERE pkey = ?').get(pkeyOf(5)) as { receive_count: number; visible_at_ms: number } | undefined;
        return got?.receive_count === 1 ? { ...got, seenAt: Date.now() } : undefined;
      }, 4_000, 'the message received');
      expect(row.visible_at_ms).toBeGreaterThanOrEqual(posted + 10_000);
      expect(row.visible_at_ms).toBeLessThanOrEqual(row.seenAt + 10_000);
    } finally {
      db.close();
      await svc.stop();
    }
  });

  it('a message of a report archived since it was sent is done: a receive drops it, never dead-letters it', async () => {
    const rt = await testRuntime(await testConfig('embedded'));
    try {
      const record = (id: number) => ({ v: 1 as const, pkey: `partner-${id}`, source: 'partner', post_id: id, received_at: new Date().toISOString(), report: parsePartnerReport(report(id)) });
      await rt.ledger.accept(record(1));
      await rt.ledger.accept(record(2));
      // Report 1 archived by a flush whose delete of the message was lost (a crash, a power cut).
      await rt.ledger.markArchived(['partner-1']);
      const got = await rt.queue.receive({ maxMessages: 10, waitSeconds: 0, visibilitySeconds: 30 });
      expect(got.map((m) => (JSON.parse(m.body) as { pkey: string }).pkey)).toEqual(['partner-2']);
      expect(await rt.queue.depth()).toMatchObject({ visible: 0, inFlight: 1 });
    } finally {
      await rt.close();
    }
  });

  it('closes its commit thread\'s connection before close() resolves: the file then has no other connection', async () => {
    const dir = await tempDir();
    const db = openLedgerDb(dir);
    const ledger = new SqliteLedger(db, new SqliteQueue(db, 5));
    // An acceptance starts the commit thread, with its own connection to the file.
    expect((await ledger.accept({ v: 1, pkey: 'partner-1', source: 'partner', post_id: 1, received_at: new Date().toISOString(), report: parsePartnerReport(report(1)) })).created).toBe(true);
    await ledger.close();
    // Leaving WAL mode takes the only connection to the file: with another still open it stays
    // 'wal' (and a process ending now leaves the write-ahead log beside the ledger).
    const probe = new Database(path.join(dir, 'ledger.sqlite'));
    try {
      expect(probe.pragma('journal_mode = DELETE', { simple: true })).toBe('delete');
    } finally {
      probe.close();
    }
  });

  it("a flush's bookkeeping takes the write lock in short turns: an acceptance commits while thousands of reports are being marked archived", async () => {
    const config = await testConfig('embedded');
    const rt = await testRuntime(config);
    try {
      const records = Array.from({ length: 20_000 }, (_, i) => {
        const r = parsePartnerReport(report(i + 1));
        return { v: 1 as const, pkey: `partner-${i + 1}`, source: 'partner', post_id: i + 1, received_at: new Date().toISOString(), report: r };
      });
      for (let i = 0; i < records.length; i += 2_000) await Promise.all(records.slice(i, i + 2_000).map((r) => rt.ledger.accept(r)));
      const done: string[] = [];
      const marking = rt.ledger.markArchived(records.map((r) => r.pkey)).then(() => done.push('marked'));
      const late = parsePartnerReport(report(30_000));
      const accepting = rt.ledger
        .accept({ v: 1, pkey: 'partner-30000', source: 'partner', post_id: 30_000, received_at: new Date().toISOString(), report: late })
        .then((r) => done.push(r.created ? 'accepted' : 'duplicate'));
      await Promise.all([marking, accepting]);
      // Behind one transaction of 20,000 rows the acceptance would have waited for all of them.
      expect(done).toEqual(['accepted', 'marked']);
      expect(await rt.ledger.isPending('partner-1')).toBe(false);
      expect(await rt.ledger.isPending('partner-20000')).toBe(false);
      expect(await rt.ledger.isPending('partner-30000')).toBe(true);
    } finally {
      await rt.close();
    }
  });

  it("an acceptance takes the write lock in a gap of a few milliseconds between another connection's long turns, as a bulk import leaves them", async () => {
    const rt = await testRuntime(await testConfig('embedded'));
    const other = new Database(path.join(rt.config.dataDir, 'ledger.sqlite'));
    const record = (id: number) => ({ v: 1 as const, pkey: `partner-${id}`, source: 'partner', post_id: id, received_at: new Date().toISOString(), report: parsePartnerReport(report(id)) });
    try {
      await rt.ledger.accept(record(1));
      // Another connection holds the lock 95 ms at a time, leaving it free 3 ms between: SQLite's
      // busy handler, sleeping ever longer between tries, misses those gaps until its timeout.
      let turns = true;
      const turning = (async () => {
        while (turns) {
          other.exec('BEGIN IMMEDIATE');
          await new Promise((r) => setTimeout(r, 95));
          other.exec('COMMIT');
          await new Promise((r) => setTimeout(r, 3));
        }
      })();
      const accepted = await rt.ledger.accept(record(2)).finally(() => (turns = false));
      await turning;
      expect(accepted).toEqual({ created: true, pkey: 'partner-2' });
      expect(await rt.ledger.isPending('partner-2')).toBe(true);
    } finally {
      other.close();
      await rt.close();
    }
  });
});

describe("a bulk import's held records", () => {
  const record = (id: number, title: string) => ({ v: 1 as const, pkey: `partner-${id}`, source: 'partner', post_id: id, received_at: new Date().toISOString(), report: parsePartnerReport(report(id, { title })) });
  /** What the ledger file holds: the batch rows, and the records kept one by one. */
  const tables = (dataDir: string) => {
    const db = new Database(path.join(dataDir, 'ledger.sqlite'), { readonly: true });
    try {
      const { n: batches } = db.prepare('SELECT count(*) AS n FROM held_batches').get() as { n: number };
      const { n: records } = db.prepare('SELECT count(*) AS n FROM pending_records').get() as { n: number };
      return { batches, records };
    } finally {
      db.close();
    }
  };

  it('keeps them a batch to a row, reads each back for lookups and repeats, and drops the batch once none of its reports is held', async () => {
    const rt = await testRuntime(await testConfig('embedded'));
    try {
      const holdUntil = Date.now() + 60_000;
      const receivedAt = '2026-11-21T06:07:08.009Z';
      const unicode = record(2, 'ünïcödé 🌊');
      const outcomes = await rt.ledger.acceptHeld(heldRecords([record(1, 'first'), unicode, record(1, 'a second version')]), receivedAt, holdUntil);
      // The repeat in the same call gets the first version back, from the batch being gathered.
      expect(outcomes).toMatchObject([{ created: true }, { created: true }, { created: false, pkey: 'partner-1', held: { report: { title: 'first' } } }]);
      expect(tables(rt.config.dataDir)).toEqual({ batches: 1, records: 0 });
      // A partner's lookup of a held report, and a resumed import's repeat, read it from its batch.
      // Each record kept whole, the batch's received_at written into it.
      expect((await rt.ledger.lookup('partner-2'))!.record).toEqual({ ...unicode, received_at: receivedAt });
      expect(await rt.ledger.lookup('partner-2')).toMatchObject({ pending: true, record: { report: { title: 'ünïcödé 🌊' } } });
      expect(await rt.ledger.get({ source: 'partner', post_id: 1 })).toMatchObject({ pending: true, record: { report: { title: 'first' } } });
      const [again] = await acceptHeld(rt.ledger, [record(2, 'later')], holdUntil);
      expect(again).toMatchObject({ created: false, held: { report: { title: 'ünïcödé 🌊' } } });

      await rt.ledger.markArchived(['partner-1']);
      expect(tables(rt.config.dataDir)).toEqual({ batches: 1, records: 0 });
      await rt.ledger.markArchived(['partner-2']);
      expect(tables(rt.config.dataDir)).toEqual({ batches: 0, records: 0 });
      expect(await rt.ledger.lookup('partner-2')).toMatchObject({ pending: false });
    } finally {
      await rt.close();
    }
  });

  it("commits them in turns on the ledger's commit thread: an acceptance in the same process commits between the turns", async () => {
    const rt = await testRuntime(await testConfig('embedded'));
    try {
      const records = Array.from({ length: 40_000 }, (_, i) => record(1_000 + i, `t${i}`));
      const done: string[] = [];
      const holding = acceptHeld(rt.ledger, records, Date.now() + 60_000).then((outcomes) => {
        done.push('held');
        return outcomes;
      });
      // Sent once the thread is at its turns: the acceptance's batch is the thread's next message.
      await eventually(async () => tables(rt.config.dataDir).batches > 0 || undefined, 10_000, 'the first turn committed');
      const accepting = rt.ledger.accept(record(90_000, 'live')).then((r) => done.push(r.created ? 'accepted' : 'duplicate'));
      const [outcomes] = await Promise.all([holding, accepting]);
      // A thread that ran the import's turns back to back would have answered the acceptance after all of them.
      expect(done).toEqual(['accepted', 'held']);
      expect(outcomes.every((o) => o.created)).toBe(true);
      expect(tables(rt.config.dataDir).batches).toBeGreaterThan(1);
      expect(await rt.ledger.lookup('partner-90000')).toMatchObject({ pending: true, record: { report: { title: 'live' } } });
      expect(await rt.ledger.lookup('partner-40999')).toMatchObject({ pending: true, record: { report: { title: 't39999' } } });
    } finally {
      await rt.close();
    }
  });

  it('an import resumed after a crash between its last marks and the drop of its batches drops them when it marks its reports again', async () => {
    const rt = await testRuntime(await testConfig('embedded'));
    try {
      const records = Array.from({ length: 5_001 }, (_, i) => record(100 + i, `t${i}`));
      await acceptHeld(rt.ledger, records, Date.now() + 60_000);
      // The marks committed, the process killed before the drop.
      const db = new Database(path.join(rt.config.dataDir, 'ledger.sqlite'));
      try {
        db.prepare("UPDATE reports SET state = 'archived', held_batch = NULL, held_offset = NULL, held_length = NULL WHERE held_batch IS NOT NULL").run();
      } finally {
        db.close();
      }
      expect(tables(rt.config.dataDir).batches).toBeGreaterThan(0);
      await rt.ledger.markArchived(records.map((r) => r.pkey));
      expect(tables(rt.config.dataDir)).toEqual({ batches: 0, records: 0 });
    } finally {
      await rt.close();
    }
  });

  it("an import's marks of held reports and of reports posted live before it: every record goes, from its batch or its own row", async () => {
    const rt = await testRuntime(await testConfig('embedded'));
    try {
      // Posted live before the import, which finds them accepted and archives them with its own.
      for (let id = 1; id <= 20; id++) await rt.ledger.accept(record(id, `live ${id}`));
      const held = Array.from({ length: 6_000 }, (_, i) => record(100 + i, `t${i}`));
      await acceptHeld(rt.ledger, held, Date.now() + 60_000);
      expect(tables(rt.config.dataDir)).toMatchObject({ records: 20 });
      const pkeys = [...held.map((r) => r.pkey), ...Array.from({ length: 20 }, (_, i) => `partner-${i + 1}`)].sort();
      await rt.ledger.markArchived(pkeys);
      expect(tables(rt.config.dataDir)).toEqual({ batches: 0, records: 0 });
      expect(await rt.ledger.lookup('partner-7')).toMatchObject({ pending: false });
      expect(await rt.ledger.lookup('partner-5099')).toMatchObject({ pending: false });
    } finally {
      await rt.close();
    }
  });

  it('a report whose message was dead-lettered (a worker crashing in a loop) is sent again once its dead letter is an hour old, and buried once at a time', async () => {
    const rt = await testRuntime(await testConfig('embedded'));
    try {
      await rt.ledger.accept(record(31, 'thirty-one'));
      const receiveAll = () => rt.queue.receive({ maxMessages: 10, waitSeconds: 0, visibilitySeconds: 0 });
      const deadLetter = async () => {
        for (let i = 0; i < 10 && (await receiveAll()).length > 0; i++);
      };
      const db = new Database(path.join(rt.config.dataDir, 'ledger.sqlite'));
      const buried = () => db.prepare("SELECT count(*) AS n FROM dead_letters WHERE pkey = 'partner-31'").get() as { n: number };
      try {
        await deadLetter();
        expect(buried().n).toBe(1);
        // Fresh: left to the operators (and to a later run), not sent again at once.
        expect(await rt.ledger.requeueStale(Date.now() + 1)).toBe(0);
        db.prepare("UPDATE dead_letters SET dead_lettered_at_ms = ? WHERE pkey = 'partner-31'").run(Date.now() - DEAD_LETTER_RETRY_MS - 1);
        expect(await rt.ledger.requeueStale(Date.now() + 1)).toBe(1);
        const [again] = await receiveAll();
        expect((JSON.parse(again!.body) as { pkey: string; redelivery?: boolean })).toMatchObject({ pkey: 'partner-31', redelivery: true });
        // Dead-lettered again: its new dead letter takes the old one's place.
        await deadLetter();
        expect(buried().n).toBe(1);
      } finally {
        db.close();
      }
    } finally {
      await rt.close();
    }
  });

  it('an import never resumed: once the hold ends, reconciliation queues each record from its batch and keeps it as a live post\'s', async () => {
    const rt = await testRuntime(await testConfig('embedded'));
    try {
      await acceptHeld(rt.ledger, [record(11, 'eleven'), record(12, 'twelve')], Date.now() + 300);
      await new Promise((r) => setTimeout(r, 400));
      expect(await rt.ledger.requeueStale(Date.now())).toBe(2);
      expect(tables(rt.config.dataDir)).toEqual({ batches: 0, records: 2 });
      const got = await rt.queue.receive({ maxMessages: 10, waitSeconds: 0, visibilitySeconds: 30 });
      expect(got.map((m) => (JSON.parse(m.body) as { report: { title: string } }).report.title).sort()).toEqual(['eleven', 'twelve']);
      expect(await rt.ledger.lookup('partner-12')).toMatchObject({ pending: true, record: { report: { title: 'twelve' } } });
      await rt.ledger.markArchived(['partner-11', 'partner-12']);
      expect(tables(rt.config.dataDir)).toEqual({ batches: 0, records: 0 });
    } finally {
      await rt.close();
    }
  });
});

/** Writes the ingest files and journal of the release before the SQLite ledger into `config`'s store. */
async function writeLegacyLayout(config: Config): Promise<string> {
  const root = config.storageUrl.slice('file://'.length);
  const record = (id: number, title: string) =>
    JSON.stringify({ v: 1, pkey: `partner-${id}`, source: 'partner', post_id: id, received_at: '2026-11-21T06:00:00.000Z', report: parsePartnerReport(report(id, { title }), Date.parse('2026-11-21T06:00:00Z')) });
  const write = async (key: string, body: string | Buffer) => {
    await fs.mkdir(path.dirname(path.join(root, key)), { recursive: true });
    await fs.writeFile(path.join(root, key), body);
  };
  // 1: archived (its key alone). 2: pending (key and marker). 3: pending, its key lost in a
  // crash (marker alone). 4: a marker torn while its acceptance was under way (never answered).
  await write('ingest/keys/partner/1.json', record(1, 'one'));
  await write('ingest/keys/partner/2.json', record(2, 'two'));
  await write('ingest/pending/partner/2.json', record(2, 'two'));
  await write('ingest/pending/partner/3.json', record(3, 'three'));
  await write('ingest/pending/partner/4.json', '{"v":1,"pkey":"partn');
  // 5: accepted just before a power loss: its files are gone, the journal kept them.
  const entry = (key: string, body: string) => {
    const bytes = Buffer.from(body);
    return Buffer.concat([Buffer.from(`${JSON.stringify({ k: key, n: bytes.length, c: crc32(bytes), t: Date.now() })}\n`), bytes, Buffer.from('\n')]);
  };
  await write('+journal/boot-1_1_0_00000001.wal', Buffer.concat([entry('ingest/pending/partner/5.json', record(5, 'five')), entry('ingest/keys/partner/5.json', record(5, 'five')), Buffer.alloc(64)]));
  return root;
}

describe('upgrading a DATA_DIR of the release with ingest files and a journal', () => {
  it('keeps every accepted report accepted once, queues what was pending, and removes the old files', async () => {
    const config = await testConfig('embedded');
    const root = await writeLegacyLayout(config);

    const rt = await testRuntime(config);
    expect(await acceptedPkeys(rt)).toEqual(['partner-1', 'partner-2', 'partner-3', 'partner-5']);
    expect(await pendingCount(rt)).toBe(3);
    await expect(fs.access(path.join(root, 'ingest/keys'))).rejects.toThrow();
    await expect(fs.access(path.join(root, 'ingest/pending'))).rejects.toThrow();
    await expect(fs.access(path.join(root, '+journal'))).rejects.toThrow();

    const svc = await startTestService(rt);
    await allArchived(rt);
    expect((await archived(svc.url)).sort((a, b) => a.pkey.localeCompare(b.pkey))).toEqual([
      { pkey: 'partner-2', title: 'two' },
      { pkey: 'partner-3', title: 'three' },
      { pkey: 'partner-5', title: 'five' },
    ]);
    // Those records name no partner (keys had no names then): they are found again as reports of none.
    for (const id of [1, 2, 3, 5]) expect(await rt.intake.accept(parsePartnerReport(report(id, { title: 'later' })))).toEqual({ created: false, pkey: `partner-${id}` });
    expect(await rt.intake.accept(parsePartnerReport(report(4)))).toEqual({ created: true, pkey: 'partner-4' });
    await svc.stop();

    // A second start finds nothing to import and changes nothing.
    const again = await testRuntime(config);
    expect(await acceptedPkeys(again)).toEqual(['partner-1', 'partner-2', 'partner-3', 'partner-4', 'partner-5']);
    await again.close();
  });

  it("gives those reports to the data dir's one key: its retries answer 'already exists', it may retract them", async () => {
    const config = await testConfig('embedded', undefined, { API_KEYS: API_KEY });
    await writeLegacyLayout(config);
    const svc = await startTestService(await testRuntime(config));
    try {
      await allArchived(svc.rt);
      for (const id of [1, 2, 3, 5]) {
        const again = await postReport(svc.url, report(id, { title: 'later' }));
        expect(again.status, `post_id ${id}`).toBe(200);
        expect(again.body).toMatchObject({ created: false, pkey: `partner-${id}` });
      }
      // 4 was never answered: it is the partner's new report.
      expect((await postReport(svc.url, report(4))).body).toMatchObject({ created: true, pkey: pkeyOf(4) });
      const retracted = await fetch(`${svc.url}/feeds/partner/2`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } });
      expect(retracted.status).toBe(200);
      expect(await retracted.json()).toMatchObject({ pkey: 'partner-2', retracted: true });
      await allArchived(svc.rt);
      expect((await archived(svc.url)).map((r) => r.pkey).sort()).toEqual(['partner-3', 'partner-5', pkeyOf(4)].sort());
    } finally {
      await svc.stop();
    }
  });

  it("moves a ledger's pending records to their own table, and keeps none of its archived reports'", async () => {
    const config = await testConfig('embedded');
    // The ledger as the release before left it: every row with its record, an archived one's trimmed.
    const before = ledgerBefore(config.dataDir, 'CREATE TABLE pending_records');
    const record = (id: number, title: string) => ({ v: 1, pkey: `partner-${id}`, source: 'partner', post_id: id, received_at: '2026-11-21T06:00:00.000Z', report: parsePartnerReport(report(id, { title }), Date.parse('2026-11-21T06:00:00Z')) });
    const insert = before.prepare(`INSERT INTO reports (source, partner, post_id, pkey, created_at_ms, record, state, accepted_at_ms, enqueued_at_ms) VALUES ('partner', '', ?, ?, ?, ?, ?, ?, ?)`);
    const pending = record(9001, 'still pending');
    insert.run(9001, pending.pkey, Date.parse(pending.report.created_at), JSON.stringify(pending), 'pending', Date.now(), Date.now());
    before.prepare("INSERT INTO queue (body, pkey, sent_at_ms, visible_at_ms) VALUES ('', ?, ?, ?)").run(pending.pkey, Date.now(), Date.now());
    const { title: _t, text: _x, ...trimmed } = record(9002, 'archived').report;
    insert.run(9002, 'partner-9002', Date.parse(trimmed.created_at), JSON.stringify({ ...record(9002, ''), report: trimmed }), 'archived', Date.now(), Date.now());
    before.close();

    const rt = await testRuntime(config);
    expect(await rt.ledger.lookup('partner-9001')).toMatchObject({ pending: true, record: { report: { title: 'still pending' } } });
    const archived9002 = await rt.ledger.lookup('partner-9002');
    expect(archived9002).toMatchObject({ pending: false, state: 'confirmed', post_id: 9002, createdMs: Date.parse(trimmed.created_at) });
    expect(archived9002!.record).toBeUndefined();
    // The pending report's message still reads its record: the worker archives it.
    const svc = await startTestService(rt);
    await allArchived(rt);
    expect((await getJson(`${svc.url}/reports/partner-9001`)).body.result.properties.title).toBe('still pending');
    await svc.stop();
    const after = new Database(path.join(config.dataDir, 'ledger.sqlite'), { readonly: true });
    try {
      expect((after.prepare('PRAGMA table_info(reports)').all() as { name: string }[]).map((c) => c.name)).not.toContain('record');
      expect(after.prepare('SELECT count(*) AS n FROM pending_records').get()).toEqual({ n: 0 });
    } finally {
      after.close();
    }
  });

  it("stores a report's pkey only where its identity does not name it: every key found as before, an older report's still refused to another", async () => {
    const config = await testConfig('embedded');
    // The ledger as the release before left it: each row with its pkey.
    const before = ledgerBefore(config.dataDir, 'CREATE TABLE reports_keyed');
    const insert = before.prepare(`INSERT INTO reports (source, partner, post_id, pkey, created_at_ms, state, accepted_at_ms, enqueued_at_ms, archived_at_ms) VALUES ('partner', ?, ?, ?, ?, 'archived', ?, ?, ?)`);
    const at = Date.parse('2026-11-21T06:00:00Z');
    // A partner's report, one of no partner, and one a partner posted before post_ids were per partner.
    for (const [partner, id, pkey] of [['alpha', 7, 'partner-alpha-7'], ['', 9, 'partner-9'], ['alpha', 8, 'partner-8']] as const) insert.run(partner, id, pkey, at + id, at, at, at);
    before.close();

    const rt = await testRuntime(config);
    for (const [pkey, partner, id] of [['partner-alpha-7', 'alpha', 7], ['partner-9', undefined, 9], ['partner-8', 'alpha', 8]] as const) {
      expect(await rt.ledger.lookup(pkey)).toMatchObject({ pkey, ...(partner && { partner }), post_id: id, createdMs: at + id, pending: false });
    }
    expect(await rt.ledger.lookup('partner-alpha-8')).toBeUndefined();
    // The older report's key is still its own: a report of no partner cannot take it.
    const record = (id: number, partner?: string) => ({
      v: 1 as const, pkey: partner ? `partner-${partner}-${id}` : `partner-${id}`, source: 'partner', ...(partner && { partner }), post_id: id, received_at: new Date(at).toISOString(),
      report: parsePartnerReport(report(id), at),
    });
    await expect(rt.ledger.accept(record(8))).rejects.toThrow(/partner-8/);
    // Nor can a report keeping a key of that form take the key of a report of no partner.
    await expect(rt.ledger.accept({ ...record(9, 'alpha'), pkey: 'partner-9' })).rejects.toThrow(/partner-9/);
    expect(await rt.ledger.accept(record(8, 'alpha'))).toEqual({ created: false, pkey: 'partner-8' });
    expect(await rt.ledger.accept(record(8, 'beta'))).toEqual({ created: true, pkey: 'partner-beta-8' });
    await rt.close();
    const after = new Database(path.join(config.dataDir, 'ledger.sqlite'), { readonly: true });
    try {
      expect(after.prepare('SELECT pkey, kept_pkey FROM reports ORDER BY partner, post_id').all()).toEqual([
        { pkey: 'partner-9', kept_pkey: null },
        { pkey: 'partner-alpha-7', kept_pkey: null },
        { pkey: 'partner-8', kept_pkey: 'partner-8' },
        { pkey: 'partner-beta-8', kept_pkey: null },
      ]);
    } finally {
      after.close();
    }
  });

  it("gives a ledger left with an index of the derived pkey the kept keys' index instead: a lookup by key uses an index, not a scan", async () => {
    const config = await testConfig('embedded');
    // The derived pkey migrated, as an earlier build of it left the ledger: its pkey indexed, no kept keys' index.
    const before = ledgerBefore(config.dataDir, 'DROP INDEX IF EXISTS reports_pkey');
    before.exec('DROP INDEX reports_kept_pkey; CREATE UNIQUE INDEX reports_pkey ON reports (pkey);');
    before.close();
    const rt = await testRuntime(config);
    await rt.close();
    const after = new Database(path.join(config.dataDir, 'ledger.sqlite'), { readonly: true });
    try {
      const indexes = (after.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'reports'").all() as { name: string }[]).map((r) => r.name);
      expect(indexes).toContain('reports_kept_pkey');
      expect(indexes).not.toContain('reports_pkey');
      const plan = (after.prepare(`EXPLAIN QUERY PLAN SELECT state FROM reports WHERE ${reportByPkeySql("'partner-alpha-7'")}`).all() as { detail: string }[]).map((r) => r.detail).join('; ');
      expect(plan).not.toMatch(/SCAN reports/);
    } finally {
      after.close();
    }
  });

  it('a corrupt ledger file stops the process with the "unavailable" exit code and a message that says to restore it', async () => {
    const dataDir = await tempDir();
    await fs.writeFile(path.join(dataDir, 'ledger.sqlite'), 'this is not a database'.repeat(100));
    const child = spawn(process.execPath, [MAIN, 'serve'], { env: { PATH: process.env.PATH ?? '', DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    child.stderr!.on('data', (d) => (out += d));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(69);
    // Told as damage to restore, not as a lock to wait out.
    expect(out).toMatch(/ledger\.sqlite in DATA_DIR is damaged: restore it from a backup, then run verify --repair/);
  });
});
