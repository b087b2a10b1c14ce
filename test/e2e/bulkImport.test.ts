// A bulk import on both backends: it archives what it accepts itself (no worker runs here), each
// closed day as one part with its sidecars, every report once with its first version; bad
// records go to the rejects with reasons; a crash at any point is finished by running it again;
// what it holds is left alone by reconciliation until its hold ends; a busy ledger is waited out.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { readyKeyOf, statsKeyOf } from '../../src/archive/sidecars/keys.js';
import type { HeldRecord, IngestRecord } from '../../src/ledger/ledger.js';
import { compact } from '../../src/ops/compact.js';
import { importFile, type ImportDeps } from '../../src/ops/importFile.js';
import { PLACE } from '../../src/ops/storeLock.js';
import { verify } from '../../src/ops/verify.js';
import { IMPORT_LOCK_KEY } from '../../src/store/layout.js';
import { parsePartnerReport } from '../../src/partners/partnerReport.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { failAfterPuts } from '../support/faultyStore.js';
import { stoppedAfterSecondAcceptance, withAcceptHeld } from '../support/importFaults.js';
import { loadPsaBoundaries } from '../support/sharedData.js';
import { acceptHeld, API_KEY_NAME, BACKENDS, getJson, keysUnder, pendingCount, pkeyOf, postReport, report, startTestService, storedCopies, storedTags, tempDir, testConfig, testRuntime, type TestService } from '../support/env.js';

const DAY_MS = 86_400_000;
const START = Date.UTC(2026, 3, 1);
const DAYS = 60;

/** `n` reports over DAYS closed days, in no order of time, each with its own title. */
function yearLines(firstId: number, n: number): string[] {
  let seed = firstId;
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  return Array.from({ length: n }, (_, i) =>
    JSON.stringify(
      report(firstId + i, {
        created_at: new Date(START + Math.floor(random() * DAYS * DAY_MS)).toISOString(),
        title: `t${firstId + i}`,
        ...(i % 2 === 1 && { partner_city: 'Pampanga', location: { lat: 15.0286, lng: 120.6898 } }),
      }),
    ),
  );
}

const WINDOW = `start=${new Date(START).toISOString().replace('Z', '%2B0000')}&end=${new Date(START + DAYS * DAY_MS - 1).toISOString().replace('Z', '%2B0000')}`;

async function archived(svc: TestService): Promise<Map<string, any>> {
  const res = await getJson(`${svc.url}/reports/archive?${WINDOW}&geoformat=geojson`);
  expect(res.status).toBe(200);
  const byKey = new Map<string, any>();
  for (const f of res.body.result.features) {
    expect(byKey.has(f.properties.pkey)).toBe(false); // each report once
    byKey.set(f.properties.pkey, f.properties);
  }
  return byKey;
}

function ledgerFreePages(svc: TestService): number {
  const ledger = new Database(path.join(svc.rt.config.dataDir, 'ledger.sqlite'), { readonly: true });
  try {
    return ledger.pragma('freelist_count', { simple: true }) as number;
  } finally {
    ledger.close();
  }
}

async function partKeys(svc: TestService): Promise<string[]> {
  return (await keysUnder(svc.rt, 'reports/v1/')).filter((k) => k.endsWith('.parquet'));
}

describe.each(BACKENDS)('bulk import on the %s backend', (kind) => {
  let emulator: Emulator | undefined;
  let svc: TestService;
  let dir: string;
  beforeAll(async () => {
    if (kind === 'aws') emulator = await startEmulator();
    // No worker and no reconciliation: whatever reaches the archive, the import put there.
    svc = await startTestService(await testRuntime(await testConfig(kind, emulator), emulator), { worker: false, reconcile: false });
    dir = await tempDir();
  });
  afterAll(async () => {
    await svc?.stop();
    await emulator?.stop();
  });

  it('archives a spread-out file as day parts, every report once with its first version; bad records rejected with reasons; a second run adds nothing', async () => {
    // A report the partner posted live before the import (archived through the queue).
    await svc.rt.intake.accept(parsePartnerReport(report(10_001, { created_at: new Date(START + 3_600_000).toISOString(), title: 'live first' })), API_KEY_NAME);
    await svc.rt.worker.pollOnce(0);
    await svc.rt.worker.flush();

    const lines = yearLines(10_000, 1_500);
    lines.splice(
      700,
      0,
      '{"post_id": 1, "created_at": ',
      JSON.stringify(report(99_001, { partner_city: 'Atlantis' })),
      JSON.stringify(report(10_002, { title: 'second version' })),
      // A lone surrogate's escape: refused as a post's is, not kept altered.
      JSON.stringify(report(99_003, { text: 'tubig \udc00' })),
      // A NUL, which CSV readers stop at: refused as a post's is.
      JSON.stringify(report(99_004, { title: 'baha\u0000' })),
    );
    // In the ledger's order, 10398's two versions are the last of one batch of 400 and the first
    // of the next: the ledger accepts a batch while the one before is staged, never before it.
    lines.splice(1_200, 0, JSON.stringify(report(10_398, { title: 'second version' })));
    const file = path.join(dir, 'year.ndjson');
    // The file ends mid-line, as one cut off in a copy.
    await fs.writeFile(file, `${lines.join('\n')}\n{"post_id": 99002, "created_at": "2026-04-0`);

    // Validated on threads, as a large file is; the second run below on the import's own thread.
    const result = await importFile(svc.rt, { file, partner: API_KEY_NAME, batchSize: 400, threadsFromBytes: 0 });
    expect(result).toMatchObject({ records: 1_507, accepted: 1_499, duplicate: 3, rejected: 5, resumedFrom: 0 });
    const rejects = (await fs.readFile(result.rejectsFile, 'utf8')).trim().split('\n').map((l) => JSON.parse(l));
    expect(rejects.map((r) => [r.record, r.reasons.join('; ')])).toEqual([
      [701, 'the line is not valid JSON'],
      [702, expect.stringMatching(/^partner_city: /)],
      [704, expect.stringMatching(/^text: holds a lone UTF-16 surrogate/)],
      [705, expect.stringMatching(/^title: holds U\+0000/)],
      [1_507, 'the line is not valid JSON'],
    ]);

    const answers = await archived(svc);
    expect(answers.size).toBe(1_500);
    expect(answers.get(pkeyOf(10_001))!.title).toBe('live first');
    expect(answers.get(pkeyOf(10_002))!.title).toBe('t10002');
    expect(answers.get(pkeyOf(10_398))!.title).toBe('t10398');
    expect(answers.get(pkeyOf(10_003))).toMatchObject({ title: 't10003', tags: { instance_region_code: 'PH-PG' } });
    expect(await pendingCount(svc.rt)).toBe(0);
    // The ledger gave the space of the records it held for the import back to the disk.
    if (kind === 'embedded') expect(ledgerFreePages(svc)).toBe(0);

    // One part per closed day (the live report's hour is a part of its own), each with its sidecars.
    const parts = await partKeys(svc);
    const dayParts = parts.filter((k) => k.includes('/hour=all/'));
    expect(dayParts).toHaveLength(DAYS);
    expect(parts).toHaveLength(DAYS + 1);
    for (const key of dayParts) {
      expect(await svc.rt.store.head(statsKeyOf(key))).toBeDefined();
      expect(await svc.rt.store.head(readyKeyOf(key))).toBeDefined();
    }
    // Mirrors syncing with updated_after are told of them.
    const changed = new Set((await svc.rt.changes.written(0, Date.now() + 1)).map((c) => c.pkey));
    expect([...answers.keys()].every((k) => changed.has(k))).toBe(true);
    expect(await verify(svc.rt, { fromMs: START, toMs: START + DAYS * DAY_MS - 1 })).toMatchObject({ ok: true, missing: [], unexpected: [] });

    const again = await importFile(svc.rt, { file, partner: API_KEY_NAME, restart: true });
    expect(again).toMatchObject({ accepted: 0, duplicate: 1_502, rejected: 5, parts: 0 });
    expect((await partKeys(svc)).length).toBe(DAYS + 1);
  });

  const at0 = () => new Date(START).toISOString();

  it('finishes a file of no valid record (empty, or every line rejected), reads a BOM and bytes that are not UTF-8 as the feed would, and rejects an over-long line and a CSV row of the wrong width', async () => {
    const empty = path.join(dir, 'empty.ndjson');
    await fs.writeFile(empty, '');
    expect(await importFile(svc.rt, { file: empty, batchSize: 100, threadsFromBytes: 0 })).toMatchObject({ records: 0, accepted: 0, rejected: 0 });
    const bad = path.join(dir, 'bad.ndjson');
    await fs.writeFile(bad, '{"post_id": 1}\nnot json\n');
    const none = await importFile(svc.rt, { file: bad, batchSize: 100, threadsFromBytes: 0 });
    expect(none).toMatchObject({ records: 2, accepted: 0, rejected: 2 });
    expect((await fs.readFile(none.rejectsFile, 'utf8')).trim().split('\n').map((l) => JSON.parse(l).record)).toEqual([1, 2]);
    // Saved by a Windows editor: a byte order mark, CRLF; one line's text in Latin-1, not UTF-8.
    const windows = path.join(dir, 'windows.ndjson');
    const latin1 = Buffer.from(JSON.stringify(report(70_002, { created_at: new Date(START).toISOString(), text: 'tubig sa kalye ABC' })).replace('ABC', '\u0000'), 'utf8');
    latin1[latin1.indexOf(0x00, latin1.indexOf('kalye'))] = 0xe9; // a lone é byte where a character was
    await fs.writeFile(windows, Buffer.concat([
      Buffer.from([0xef, 0xbb, 0xbf]),
      Buffer.from(`${JSON.stringify(report(70_001, { created_at: new Date(START).toISOString(), titel: 'misspelt' }))}\r\n`),
      latin1,
      Buffer.from('\r\n'),
    ]));
    const read = await importFile(svc.rt, { file: windows, batchSize: 100, threadsFromBytes: 0 });
    // Counted on the validation threads too.
    expect(read).toMatchObject({ records: 2, accepted: 1, rejected: 1, fieldsNotRead: { titel: 1 } });
    const [reject] = (await fs.readFile(read.rejectsFile, 'utf8')).trim().split('\n').map((l) => JSON.parse(l));
    expect(reject).toMatchObject({ record: 2, reasons: [expect.stringMatching(/not valid UTF-8/)] });
    expect((await archived(svc)).get('partner-70001')).toBeDefined();
    // A line longer than any report (here 1.1 MB of text) is refused before it is decoded.
    const long = path.join(dir, 'long.ndjson');
    await fs.writeFile(long, `${JSON.stringify(report(70_005, { created_at: at0(), text: 'x'.repeat(1_100_000) }))}\n${JSON.stringify(report(70_006, { created_at: at0() }))}\n`);
    const longRun = await importFile(svc.rt, { file: long, batchSize: 100, threadsFromBytes: 0 });
    expect(longRun).toMatchObject({ records: 2, accepted: 1, rejected: 1 });
    expect(JSON.parse((await fs.readFile(longRun.rejectsFile, 'utf8')).trim())).toMatchObject({ record: 1, reasons: [expect.stringMatching(/more than a report can be/)] });
    // A CSV row with more fields than the header (a comma left unquoted) is a reject, not the end of the file.
    const csv = path.join(dir, 'rows.csv');
    const at = new Date(START).toISOString();
    await fs.writeFile(csv, `post_id,created_at,partner_city,disaster_type,lat,lng\n70003,${at},Quezon City,flood,14.65,121.05,has,comma\n70004,${at},Quezon City,flood,14.65,121.05\n`);
    const rows = await importFile(svc.rt, { file: csv, batchSize: 100 });
    expect(rows).toMatchObject({ records: 2, accepted: 1, rejected: 1 });
    expect(JSON.parse((await fs.readFile(rows.rejectsFile, 'utf8')).trim())).toMatchObject({
      record: 1,
      reasons: [expect.stringMatching(/fields do not match the header's columns/)],
      input: `70003,${at},Quezon City,flood,14.65,121.05,has,comma`,
    });
    // Coordinates that are no decimal numbers (hex, binary, Infinity: Number() reads them all) are
    // rejects naming the point, not points elsewhere nor "in no city".
    const odd = path.join(dir, 'odd.csv');
    await fs.writeFile(odd, `post_id,created_at,disaster_type,lat,lng\n70012,${at},flood,0xE,0x79\n70013,${at},flood,Infinity,121.05\n70014,${at},flood,0b1110,121.05\n70015,${at},flood,1.465e1,121.05\n`);
    const oddRun = await importFile(svc.rt, { file: odd, batchSize: 100 });
    expect(oddRun).toMatchObject({ records: 4, accepted: 1, rejected: 3 });
    expect((await fs.readFile(oddRun.rejectsFile, 'utf8')).trim().split('\n').map((l) => JSON.parse(l)).map((r) => [r.record, r.reasons.join('; ')])).toEqual([
      [1, `the point's coordinates are no decimal numbers (lat "0xE", lng "0x79")`],
      [2, `the point's coordinates are no decimal numbers (lat "Infinity", lng 121.05)`],
      [3, `the point's coordinates are no decimal numbers (lat "0b1110", lng 121.05)`],
    ]);
    expect((await archived(svc)).get('partner-70015')).toMatchObject({ tags: { instance_region_code: 'PH-QC' } });
    // A line giving a name twice is a reject, as the feed refuses such a body; the same name in
    // two objects, or inside a string, is no repeat.
    const twice = path.join(dir, 'twice.ndjson');
    const once = JSON.stringify(report(70_008, { created_at: at, title: '"lat": 1' }));
    await fs.writeFile(twice, `${JSON.stringify(report(70_007, { created_at: at })).replace('"lng":', '"lat":0,"lng":')}\n${once}\n`);
    const twiceRun = await importFile(svc.rt, { file: twice, batchSize: 100, threadsFromBytes: 0 });
    expect(twiceRun).toMatchObject({ records: 2, accepted: 1, rejected: 1 });
    expect(JSON.parse((await fs.readFile(twiceRun.rejectsFile, 'utf8')).trim())).toMatchObject({ record: 1, reasons: ['location.lat: is given twice in one object: send each name once'] });
    // Lists nested 50,000 deep parse, but would overflow the stack written back: a reject, not a failed import.
    const deep = path.join(dir, 'deep.ndjson');
    await fs.writeFile(deep, `${'['.repeat(50_000)}${']'.repeat(50_000)}\n${JSON.stringify(report(70_009, { created_at: at }))}\n`);
    const deepRun = await importFile(svc.rt, { file: deep, batchSize: 100, threadsFromBytes: 0 });
    expect(deepRun).toMatchObject({ records: 2, accepted: 1, rejected: 1 });
    expect(JSON.parse((await fs.readFile(deepRun.rejectsFile, 'utf8')).trim())).toMatchObject({ record: 1, reasons: [expect.stringMatching(/nests objects or lists more than \d+ deep/)] });
    // The same in a GeoJSON feature's properties (one with no point: its reject once wrote it back whole).
    const deepGeo = path.join(dir, 'deep.geojson');
    const feature = (id: number, properties: string) => `{"type":"Feature","geometry":{"type":"Point","coordinates":[121.05,14.65]},"properties":${properties}}`.replace('}}', `,"post_id":${id},"created_at":"${at}","partner_city":"Quezon City","disaster_type":"flood"}}`);
    await fs.writeFile(deepGeo, `{"type":"FeatureCollection","features":[${feature(70_010, `{"x":${'['.repeat(50_000)}${']'.repeat(50_000)}}`).replace('{"type":"Point","coordinates":[121.05,14.65]}', 'null')},${feature(70_011, '{"y":1}')}]}`);
    const deepGeoRun = await importFile(svc.rt, { file: deepGeo, batchSize: 100 });
    expect(deepGeoRun).toMatchObject({ records: 2, accepted: 1, rejected: 1 });
    expect(JSON.parse((await fs.readFile(deepGeoRun.rejectsFile, 'utf8')).trim())).toMatchObject({ record: 1, reasons: [expect.stringMatching(/nests objects or lists more than \d+ deep/)] });
  });

  it('runs one import at a time on a data directory: another running is refused, a lock untouched for five minutes is taken over', async () => {
    const file = path.join(dir, 'alone.ndjson');
    await fs.writeFile(file, yearLines(90_000, 10).join('\n'));
    const lock = path.join(svc.rt.config.dataDir, 'tmp', 'import', 'import.lock');
    await fs.mkdir(path.dirname(lock), { recursive: true });
    // Another process's lock, touched a moment ago (whatever its pid: containers' are all 1).
    await fs.writeFile(lock, JSON.stringify({ host: 'another-container', pid: 1, id: 'x' }));
    await expect(importFile(svc.rt, { file, batchSize: 100 })).rejects.toThrow(/another import is running on this data directory/);
    // Untouched for six minutes: its holder is gone, and the lock is taken over.
    const sixMinutesAgo = new Date(Date.now() - 6 * 60_000);
    await fs.utimes(lock, sixMinutesAgo, sixMinutesAgo);
    expect(await importFile(svc.rt, { file, batchSize: 100 })).toMatchObject({ accepted: 10 });
    await expect(fs.access(lock)).rejects.toThrow();
  });

  it('runs one import at a time into an archive, from any host: the lock in the store refuses another, is taken over once untouched for five minutes, and is given back', async () => {
    const file = path.join(dir, 'alone-in-store.ndjson');
    await fs.writeFile(file, yearLines(91_000, 10).join('\n'));
    const holder = (touchedMs: number) => JSON.stringify({ host: 'another-host', pid: 1, id: 'elsewhere', since: new Date(touchedMs).toISOString(), touched: new Date(touchedMs).toISOString() });
    // An import on another host, into the same bucket from a data directory of its own, touched a minute ago.
    await svc.rt.store.put(IMPORT_LOCK_KEY, holder(Date.now() - 60_000));
    await expect(importFile(svc.rt, { file, batchSize: 100 })).rejects.toThrow(/another import is running on this archive .*another-host/);
    expect((await archived(svc)).has('partner-91000')).toBe(false);
    // Untouched for six minutes: its holder is gone, and the lock is taken over, then given back.
    await svc.rt.store.put(IMPORT_LOCK_KEY, holder(Date.now() - 6 * 60_000));
    let heldDuring: string | undefined;
    const watching: ImportDeps = { ...svc.rt, changes: { record: async (...args) => ((heldDuring ??= (await svc.rt.store.get(IMPORT_LOCK_KEY))?.body.toString('utf8')), svc.rt.changes.record(...args)) } };
    expect(await importFile(watching, { file, batchSize: 100 })).toMatchObject({ accepted: 10 });
    expect(JSON.parse(heldDuring!)).toMatchObject({ pid: process.pid, touched: expect.any(String) });
    expect(await svc.rt.store.get(IMPORT_LOCK_KEY)).toBeUndefined();
    expect((await archived(svc)).has('partner-91000')).toBe(true);
    // Touched a moment ago by a process of this host that is gone (killed): taken over at once.
    const gone = spawn(process.execPath, ['-e', '']);
    await new Promise((resolve) => gone.on('exit', resolve));
    await svc.rt.store.put(IMPORT_LOCK_KEY, JSON.stringify({ host: os.hostname(), pid: gone.pid, place: PLACE, id: 'killed', since: new Date().toISOString(), touched: new Date().toISOString() }));
    const more = path.join(dir, 'after-a-kill.ndjson');
    await fs.writeFile(more, yearLines(92_000, 5).join('\n'));
    expect(await importFile(svc.rt, { file: more, batchSize: 100 })).toMatchObject({ accepted: 5 });
  });

  it('finishes when run again after a crash while accepting, and after one while storing parts: every report once, none left pending', async () => {
    const file = path.join(dir, 'crash.ndjson');
    await fs.writeFile(file, yearLines(20_000, 900).join('\n'));
    const before = (await archived(svc)).size;

    // Killed after the ledger committed the second batch, before it was staged.
    await expect(importFile(stoppedAfterSecondAcceptance(svc.rt), { file, batchSize: 300, threadsFromBytes: 0 })).rejects.toThrow(/killed/);
    expect((await archived(svc)).size).toBe(before);

    // Killed while storing the parts: some are stored, none marked archived.
    const crashWhileStoring: ImportDeps = { ...svc.rt, store: failAfterPuts(svc.rt.store, 'reports/v1/', 40) };
    await expect(importFile(crashWhileStoring, { file, batchSize: 300 })).rejects.toThrow(/simulated crash/);
    const partial = await archived(svc);
    expect(partial.size).toBeGreaterThan(before);
    expect(partial.size).toBeLessThan(before + 900);
    // One stored part's local copy is gone (swept): the resumed run fetches it back, not the part again.
    const state = JSON.parse(await fs.readFile(`${file}.import-state.json`, 'utf8')) as { run: string; roundFrom: number; untexted: { file: string; stored?: boolean }[] };
    const stored = state.untexted.slice(state.roundFrom).filter((p) => p.stored);
    expect(stored.length).toBeGreaterThan(0);
    await fs.rm(path.join(svc.rt.config.dataDir, 'tmp', 'import', state.run, stored[0]!.file));

    const resumed = await importFile(svc.rt, { file, batchSize: 300 });
    expect(resumed.resumedFrom).toBe(900);
    const after = await archived(svc);
    expect(after.size).toBe(before + 900);
    for (let id = 20_000; id < 20_900; id++) expect(after.get(`partner-${id}`)?.title).toBe(`t${id}`);
    expect(await pendingCount(svc.rt)).toBe(0);
    // Stored once: the parts stored before the crash are not written again.
    const copies = await storedCopies(svc.rt);
    expect(Array.from({ length: 900 }, (_, i) => copies.get(`partner-${20_000 + i}`)).filter((n) => n !== 1)).toEqual([]);
  });

  it('resumes after a crash while storing parts when a compaction has since merged a stored part under another key: every report once', async () => {
    const file = path.join(dir, 'compacted.ndjson');
    await fs.writeFile(file, yearLines(110_000, 300).join('\n'));
    const ids = Array.from({ length: 300 }, (_, i) => `partner-${110_000 + i}`);
    // The 20th part is stored, and the run stops before its checkpoint says so.
    const crashWhileStoring: ImportDeps = { ...svc.rt, store: failAfterPuts(svc.rt.store, 'reports/v1/', 20) };
    await expect(importFile(crashWhileStoring, { file, batchSize: 300 })).rejects.toThrow(/simulated crash/);
    const state = JSON.parse(await fs.readFile(`${file}.import-state.json`, 'utf8')) as { run: string; roundFrom: number; untexted: { key: string; file: string; stored?: boolean }[] };
    const round = state.untexted.slice(state.roundFrom);
    const storedPart = round.find((p) => p.stored)!;
    expect(storedPart).toBeDefined();
    const unsaidPart = round.find((p) => !p.stored)!;
    expect([unsaidPart.stored, await svc.rt.store.head(unsaidPart.key)]).toEqual([undefined, expect.anything()]);
    // A live report on each part's day, archived by the worker, then the days compacted: the
    // parts are merged into new ones and their keys removed.
    const days = [...new Set([storedPart, unsaidPart].map((p) => {
      const [, y, m, d] = /year=(\d+)\/month=(\d+)\/day=(\d+)\//.exec(p.key)!;
      return Date.UTC(Number(y), Number(m) - 1, Number(d));
    }))];
    for (const [i, dayMs] of days.entries()) expect((await postReport(svc.url, report(110_990 + i, { created_at: new Date(dayMs + 12 * 3_600_000).toISOString() }))).status).toBe(201);
    while ((await svc.rt.worker.pollOnce(0)) > 0);
    await svc.rt.worker.flush();
    for (const dayMs of days) expect((await compact(svc.rt, { fromMs: dayMs, toMs: dayMs + DAY_MS - 1, closedBeforeMs: Date.now() })).daysCompacted).toBe(1);
    expect(await svc.rt.store.head(storedPart.key)).toBeUndefined();
    expect(await svc.rt.store.head(unsaidPart.key)).toBeUndefined();
    // The stored part's local copy swept too: its reports are told from the staged ones of its day.
    await fs.rm(path.join(svc.rt.config.dataDir, 'tmp', 'import', state.run, storedPart.file));

    expect(await importFile(svc.rt, { file, batchSize: 300 })).toMatchObject({ resumedFrom: 300 });
    const after = await archived(svc);
    for (const pkey of ids) expect(after.has(pkey)).toBe(true);
    expect(await pendingCount(svc.rt)).toBe(0);
    // The merged part's reports are not stored again under a new part.
    const copies = await storedCopies(svc.rt);
    expect(ids.filter((pkey) => copies.get(pkey) !== 1)).toEqual([]);
  });

  it('resumes past a staged file that is gone (removed before the checkpoint said so): its reports are left to reconciliation, the rest archived, each once', async () => {
    const file = path.join(dir, 'gone.ndjson');
    await fs.writeFile(file, yearLines(80_000, 400).join('\n'));
    const ids = Array.from({ length: 400 }, (_, i) => `partner-${80_000 + i}`);
    // Killed as it stores its first part: both batches staged (the import's own hold is long, so
    // it archives them in one round at the end, however slowly it stages), the ledger holding
    // their reports for 3 s only.
    let heldUntilMs = 0;
    const crashWhileStoring: ImportDeps = {
      ...withAcceptHeld(svc.rt, (records, receivedAt) => svc.rt.ledger.acceptHeld(records, receivedAt, (heldUntilMs = Date.now() + 3_000))),
      store: failAfterPuts(svc.rt.store, 'reports/v1/', 1),
    };
    await expect(importFile(crashWhileStoring, { file, batchSize: 200, threadsFromBytes: 0 })).rejects.toThrow(/simulated crash/);
    const state = JSON.parse(await fs.readFile(`${file}.import-state.json`, 'utf8')) as { run: string; staged: string[] };
    expect(state.staged).toHaveLength(2);
    await fs.rm(path.join(svc.rt.config.dataDir, 'tmp', 'import', state.run, state.staged[0]!));
    const warned: { obj: unknown; msg?: string }[] = [];
    const logged: ImportDeps = { ...svc.rt, log: { warn: (obj: unknown, msg?: string) => warned.push({ obj, msg }) } };
    expect(await importFile(logged, { file, batchSize: 200 })).toMatchObject({ resumedFrom: 400 });
    // Operators are told which file was gone and where its reports go.
    expect(warned).toEqual([{ obj: { files: [state.staged[0]] }, msg: expect.stringMatching(/staged files gone/) }]);
    // The gone file's reports wait out their hold; then reconciliation queues them, as for an import never resumed.
    await new Promise((r) => setTimeout(r, Math.max(0, heldUntilMs + 200 - Date.now())));
    expect(await svc.rt.ledger.requeueStale(Date.now())).toBeGreaterThan(0);
    while ((await svc.rt.worker.pollOnce(0)) > 0);
    await svc.rt.worker.flush();
    expect(await pendingCount(svc.rt)).toBe(0);
    const copies = await storedCopies(svc.rt);
    expect(ids.filter((pkey) => copies.get(pkey) !== 1)).toEqual([]);
  });

  it('a run resumed after its hold ran out leaves to the worker what reconciliation queued meanwhile: every report stored once', async () => {
    const file = path.join(dir, 'late.ndjson');
    await fs.writeFile(file, yearLines(50_000, 400).join('\n'));
    const ids = Array.from({ length: 400 }, (_, i) => `partner-${50_000 + i}`);
    // Killed with its first batch staged, its second accepted; both held for a second only.
    await expect(importFile(stoppedAfterSecondAcceptance(svc.rt), { file, batchSize: 200, threadsFromBytes: 0, holdMs: 1_000 })).rejects.toThrow(/killed/);
    await new Promise((r) => setTimeout(r, 1_200));
    // Not resumed within its hold: reconciliation queues all 400, and a worker archives some.
    expect(await svc.rt.ledger.requeueStale(Date.now())).toBe(400);
    expect(await svc.rt.worker.pollOnce(0)).toBeGreaterThan(0);
    await svc.rt.worker.flush();

    const resumed = await importFile(svc.rt, { file, batchSize: 200 });
    expect(resumed).toMatchObject({ resumedFrom: 400, rejected: 0 });
    while ((await svc.rt.worker.pollOnce(0)) > 0);
    await svc.rt.worker.flush();
    expect(await pendingCount(svc.rt)).toBe(0);
    const copies = await storedCopies(svc.rt);
    expect(ids.filter((pkey) => copies.get(pkey) !== 1)).toEqual([]);
    const after = await archived(svc);
    for (let id = 50_000; id < 50_400; id++) expect(after.get(`partner-${id}`)?.title).toBe(`t${id}`);
  });

  it('an import slower than its hold archives in rounds that end well inside it: reconciliation, running all along, never queues one of its reports', async () => {
    const file = path.join(dir, 'slow.ndjson');
    // Two days: a round's parts are stored quickly on either backend.
    await fs.writeFile(file, Array.from({ length: 500 }, (_, i) => JSON.stringify(report(60_000 + i, { created_at: new Date(START + (i % 48) * 3_600_000).toISOString() }))).join('\n'));
    // Each acceptance a third of the hold: the four of them outlast it. A round (begun a third of
    // the way into its hold) must end within the rest of it: seconds of S3 requests, or of SQLite
    // and DuckDB, and of flushes to the disk, on a loaded host (with 30 s on S3, a round beside
    // the whole suite outlasted it).
    const holdMs = kind === 'aws' ? 45_000 : 6_000;
    const slow: ImportDeps = {
      ...svc.rt,
      ledger: {
        acceptHeld: async (records: readonly HeldRecord[], receivedAt: string, holdUntilMs: number) => {
          await new Promise((r) => setTimeout(r, holdMs / 3));
          return svc.rt.ledger.acceptHeld(records, receivedAt, holdUntilMs);
        },
        renewHolds: (pkeys, holdUntilMs) => svc.rt.ledger.renewHolds(pkeys, holdUntilMs),
        markArchived: (pkeys) => svc.rt.ledger.markArchived(pkeys),
        reclaimHeldSpace: () => svc.rt.ledger.reclaimHeldSpace(),
        retractions: (filter) => svc.rt.ledger.retractions(filter),
      },
    };
    let done = false;
    let queued = 0;
    const reconciling = (async () => {
      while (!done) {
        queued += await svc.rt.ledger.requeueStale(Date.now());
        await new Promise((r) => setTimeout(r, 250));
      }
    })();
    try {
      expect(await importFile(slow, { file, batchSize: 125, threadsFromBytes: 0, holdMs })).toMatchObject({ accepted: 500 });
    } finally {
      done = true;
      await reconciling;
    }
    expect(queued).toBe(0);
    const copies = await storedCopies(svc.rt);
    expect(Array.from({ length: 500 }, (_, i) => copies.get(`partner-${60_000 + i}`))).toEqual(Array(500).fill(1));
    expect(await pendingCount(svc.rt)).toBe(0);
  });

  it("leaves alone the unfinished checkpoint of an import of the same file into another archive: refused, even with --restart; that import resumes there and finishes", async () => {
    const file = path.join(dir, 'two-archives.ndjson');
    await fs.writeFile(file, yearLines(45_000, 600).join('\n'));
    const stateFile = `${file}.import-state.json`;
    const before = (await archived(svc)).size;
    await expect(importFile(stoppedAfterSecondAcceptance(svc.rt), { file, batchSize: 200 })).rejects.toThrow(/killed/);
    const saved = await fs.readFile(stateFile, 'utf8');
    expect(JSON.parse(saved)).toMatchObject({ archive: svc.rt.config.storageUrl, complete: false });

    const other = await startTestService(await testRuntime(await testConfig('embedded')), { worker: false, reconcile: false });
    try {
      for (const restart of [false, true]) {
        await expect(importFile(other.rt, { file, batchSize: 200, restart })).rejects.toMatchObject({ name: 'ImportInputError', message: expect.stringMatching(/checkpoint of an unfinished import of this file into another archive/) });
        expect(await fs.readFile(stateFile, 'utf8')).toBe(saved);
      }
      const resumed = await importFile(svc.rt, { file, batchSize: 200 });
      expect(resumed).toMatchObject({ records: 600, accepted: 600, rejected: 0 });
      const after = await archived(svc);
      expect(after.size).toBe(before + 600);
      for (let id = 45_000; id < 45_600; id++) expect(after.get(`partner-${id}`)?.title).toBe(`t${id}`);
      expect(await pendingCount(svc.rt)).toBe(0);
      // Done there, the file imports here as a run of its own.
      expect(await importFile(other.rt, { file, batchSize: 200 })).toMatchObject({ records: 600, accepted: 600, resumedFrom: 0 });
    } finally {
      await other.stop();
    }
  });

  it('keeps its checkpoint and rejects where told, writing nothing beside the file; another file is refused that checkpoint while it is unfinished; the file moved with it resumes', async () => {
    const inputs = path.join(dir, 'told-inputs');
    const kept = path.join(dir, 'told-kept');
    await Promise.all([fs.mkdir(inputs), fs.mkdir(kept)]);
    const file = path.join(inputs, 'told.ndjson');
    await fs.writeFile(file, [...yearLines(46_000, 600), '{"post_id": "no"}'].join('\n'));
    const stateFile = path.join(kept, 'state.json');
    const rejectsFile = path.join(kept, 'rejects.ndjson');
    const before = (await archived(svc)).size;
    await expect(importFile(stoppedAfterSecondAcceptance(svc.rt), { file, stateFile, rejectsFile, batchSize: 200 })).rejects.toThrow(/killed/);
    const saved = await fs.readFile(stateFile, 'utf8');
    expect(JSON.parse(saved)).toMatchObject({ file, complete: false });

    // Another file's import told to keep its checkpoint there would write over what this one staged.
    const another = path.join(inputs, 'another.ndjson');
    await fs.writeFile(another, yearLines(47_000, 10).join('\n'));
    for (const restart of [false, true]) {
      await expect(importFile(svc.rt, { file: another, stateFile, rejectsFile: path.join(kept, 'another-rejects.ndjson'), restart })).rejects.toMatchObject({
        name: 'ImportInputError',
        message: expect.stringMatching(/checkpoint of an unfinished import of another file \(.*told\.ndjson\)/),
      });
      expect(await fs.readFile(stateFile, 'utf8')).toBe(saved);
    }

    // The same file under another name (moved, its size and mtime kept) is resumed, not started over.
    const moved = path.join(inputs, 'moved.ndjson');
    await fs.rename(file, moved);
    const resumed = await importFile(svc.rt, { file: moved, stateFile, rejectsFile, batchSize: 200 });
    expect(resumed).toMatchObject({ records: 601, accepted: 600, rejected: 1 });
    expect(resumed.resumedFrom).toBeGreaterThan(0);
    expect((await fs.readFile(rejectsFile, 'utf8')).trim().split('\n')).toHaveLength(1);
    expect((await fs.readdir(inputs)).sort()).toEqual(['another.ndjson', 'moved.ndjson']);
    const after = await archived(svc);
    expect(after.size).toBe(before + 600);
    for (let id = 46_000; id < 46_600; id++) expect(after.get(`partner-${id}`)?.title).toBe(`t${id}`);
    expect(await pendingCount(svc.rt)).toBe(0);
  });

  it('resumes a run that the release before stopped while accepting (its sorted file without post_ids): every report once', async () => {
    const file = path.join(dir, 'upgrade.ndjson');
    await fs.writeFile(file, yearLines(40_000, 600).join('\n'));
    const before = (await archived(svc)).size;
    await expect(importFile(stoppedAfterSecondAcceptance(svc.rt), { file, batchSize: 200 })).rejects.toThrow(/killed/);
    // As the release before left them: a version 3 checkpoint, a sorted file of (n, record).
    const stateFile = `${file}.import-state.json`;
    const state = JSON.parse(await fs.readFile(stateFile, 'utf8'));
    expect(state).toMatchObject({ v: 4, sorted: 'sorted.parquet' });
    const sorted = path.join(svc.rt.config.dataDir, 'tmp', 'import', state.run, state.sorted);
    await svc.rt.db.withConnection((conn) => conn.run(`COPY (SELECT n, record FROM read_parquet('${sorted}')) TO '${sorted}.old' (FORMAT parquet)`));
    await fs.rename(`${sorted}.old`, sorted);
    await fs.writeFile(stateFile, JSON.stringify({ ...state, v: 3 }));

    const resumed = await importFile(svc.rt, { file, batchSize: 200 });
    expect(resumed).toMatchObject({ resumedFrom: 600, rejected: 0 });
    const after = await archived(svc);
    expect(after.size).toBe(before + 600);
    for (let id = 40_000; id < 40_600; id++) expect(after.get(`partner-${id}`)?.title).toBe(`t${id}`);
    expect(await pendingCount(svc.rt)).toBe(0);
  });

  it('tags the parts it stores with boundaries published while it ran (a reprocess meanwhile may have passed their hours already)', async () => {
    const file = path.join(dir, 'republished.ndjson');
    await fs.writeFile(file, yearLines(120_000, 200).join('\n'));
    const before = (await svc.rt.boundaries.latest()).version;
    let published: string | undefined;
    // Published once the reports are accepted, tagged with the boundaries the run began with.
    const publishing = withAcceptHeld(svc.rt, async (records, receivedAt, holdUntilMs) => {
      const outcome = await svc.rt.ledger.acceptHeld(records, receivedAt, holdUntilMs);
      const set = await loadPsaBoundaries();
      published ??= (await svc.rt.boundaries.publish({ ...set, label: `${set.label}, published again during an import` })).version;
      return outcome;
    });
    expect(await importFile(publishing, { file, batchSize: 500, threadsFromBytes: 0 })).toMatchObject({ accepted: 200 });
    expect(published).toBeDefined();
    expect(published).not.toBe(before);
    const tags = await storedTags(svc.rt);
    expect(Array.from({ length: 200 }, (_, i) => tags.get(`partner-${120_000 + i}`)?.version)).toEqual(Array(200).fill(published));
  });

  it('a set published while a round stores its parts tags the parts stored after it, and the rounds after it tag with it', async () => {
    const file = path.join(dir, 'republished-mid-round.ndjson');
    await fs.writeFile(file, yearLines(130_000, 200).join('\n'));
    const before = (await svc.rt.boundaries.latest()).version;
    // Quezon City alone: a Pampanga report is tagged with no city under it.
    const set = await loadPsaBoundaries();
    const qc = set.cities.features.find((f) => f.properties.name === 'Quezon City')!.properties.code;
    const qcOnly = {
      ...set,
      label: `${set.label}, Quezon City alone`,
      cities: { ...set.cities, features: set.cities.features.filter((f) => f.properties.code === qc) },
      localAreas: { ...set.localAreas, features: set.localAreas.features.filter((f) => f.properties.city_code === qc) },
    };
    let publishing: Promise<{ version: string }> | undefined;
    let published: string | undefined;
    let firstRound: string[] | undefined;
    const recording = withAcceptHeld(svc.rt, async (records, receivedAt, holdUntilMs) => {
      firstRound ??= records.map((r) => r.pkey);
      return svc.rt.ledger.acceptHeld(records, receivedAt, holdUntilMs);
    });
    const deps: ImportDeps = {
      ...recording,
      changes: {
        record: async (reports) => {
          await svc.rt.changes.record(reports);
          // Once the first round's first part is stored: its other parts are stored after the publish.
          publishing ??= svc.rt.boundaries.publish(qcOnly);
          published = (await publishing).version;
        },
      },
    };
    // A round for each batch, well inside the (default) hold: no hold is renewed, and none of
    // the reports is left to the worker, however slow the machine.
    expect(await importFile(deps, { file, batchSize: 50, roundRows: 50, threadsFromBytes: 0 })).toMatchObject({ accepted: 200 });
    expect(published).toBeDefined();
    expect(await pendingCount(svc.rt)).toBe(0);
    const tags = await storedTags(svc.rt);
    const got = Array.from({ length: 200 }, (_, i) => ({ pkey: `partner-${130_000 + i}`, ...tags.get(`partner-${130_000 + i}`) }));
    // Every report's tags are those of the version it names (yearLines puts every odd report in Pampanga).
    expect(got.filter((t, i) => t.city !== (i % 2 === 1 && t.version === published ? null : qc) && !(i % 2 === 1 && t.version === before))).toEqual([]);
    expect(got.filter((t) => t.version !== published && t.version !== before)).toEqual([]);
    // Only parts being stored as it was published keep the old version: none of a later round, few of the first.
    const old = got.filter((t) => t.version === before).map((t) => t.pkey);
    expect(firstRound).toHaveLength(50);
    expect(old.filter((pkey) => !firstRound!.includes(pkey))).toEqual([]);
    expect(old.length).toBeLessThan(firstRound!.length / 2);
    // The two-city set back, for the tests after this one.
    await svc.rt.boundaries.publish({ ...set, label: `${set.label}, both cities again` });
  });

  it('a run started again from the first record (--restart) after a stopped one staged several batches archives them in one round, not a round per batch', async () => {
    const file = path.join(dir, 'restarted.ndjson');
    const lines = yearLines(85_000, 400);
    await fs.writeFile(file, lines.join('\n'));
    // Killed with three batches staged and a fourth accepted: every batch of the new run is held repeats.
    let calls = 0;
    const killed = withAcceptHeld(svc.rt, async (records: readonly HeldRecord[], receivedAt: string, holdUntilMs: number) => {
      const outcome = await svc.rt.ledger.acceptHeld(records, receivedAt, holdUntilMs);
      if (++calls === 4) throw new Error('killed after the ledger committed');
      return outcome;
    });
    await expect(importFile(killed, { file, batchSize: 100, threadsFromBytes: 0 })).rejects.toThrow(/killed/);
    const restarted = await importFile(svc.rt, { file, batchSize: 100, restart: true });
    expect(restarted).toMatchObject({ records: 400, accepted: 400, duplicate: 0, rejected: 0 });
    // One round: a part for each day the file touches, as a run never stopped writes.
    const days = new Set(lines.map((l) => (JSON.parse(l) as { created_at: string }).created_at.slice(0, 10)));
    expect(restarted.parts).toBe(days.size);
    expect(await pendingCount(svc.rt)).toBe(0);
    const copies = await storedCopies(svc.rt);
    expect(Array.from({ length: 400 }, (_, i) => copies.get(`partner-${85_000 + i}`))).toEqual(Array(400).fill(1));
  });

  it('a held report is left alone by reconciliation until its hold ends, then queued like any other', async () => {
    const record = (id: number): IngestRecord => ({ v: 1, pkey: `partner-${id}`, source: 'partner', post_id: id, received_at: new Date().toISOString(), report: parsePartnerReport(report(id)) });
    const [held] = await acceptHeld(svc.rt.ledger, [record(30_001)], Date.now() + 1_500);
    expect(held).toEqual({ created: true, pkey: 'partner-30001' });
    expect(await svc.rt.ledger.requeueStale(Date.now())).toBe(0);
    // A repeat while held is the import's own to archive: its first version comes back.
    const [again] = await acceptHeld(svc.rt.ledger, [record(30_001)], Date.now() + 1_500);
    expect(again).toMatchObject({ created: false, pkey: 'partner-30001', held: { pkey: 'partner-30001' } });
    await new Promise((r) => setTimeout(r, 1_600));
    // Its hold passed: the ledger in SQLite knows reconciliation has not queued it yet (it takes
    // a report out of its batch as it queues it), so it is still the import's (a resumed one
    // renews the hold and archives it); on AWS reconciliation may be sending it, so it is not.
    const [after] = await acceptHeld(svc.rt.ledger, [record(30_001)], Date.now() + 1_500);
    if (kind === 'embedded') expect(after).toMatchObject({ created: false, pkey: 'partner-30001', held: { pkey: 'partner-30001' } });
    else expect(after).toEqual({ created: false, pkey: 'partner-30001' });
    expect(await svc.rt.ledger.requeueStale(Date.now())).toBe(1);
    // Queued: a repeat is a plain one on both.
    expect(await acceptHeld(svc.rt.ledger, [record(30_001)], Date.now() + 1_500)).toEqual([{ created: false, pkey: 'partner-30001' }]);
    await svc.rt.worker.pollOnce(0);
    await svc.rt.worker.flush();
    expect(await svc.rt.ledger.isPending('partner-30001')).toBe(false);
  });
});

describe('bulk import beside a busy embedded ledger', () => {
  let svc: TestService;
  let dir: string;
  beforeAll(async () => {
    svc = await startTestService(await testRuntime(await testConfig('embedded')), { worker: false, reconcile: false });
    dir = await tempDir();
  });
  afterAll(async () => {
    await svc?.stop();
  });

  it('a run resumed after its hold ran out, with no reconciliation meanwhile, archives its held reports itself, each once; a post_id twice in the file counts once', async () => {
    const file = path.join(dir, 'unreconciled.ndjson');
    // Each post_id twice: the second copy a duplicate, whichever run meets it.
    const lines = yearLines(60_000, 200);
    await fs.writeFile(file, [...lines, ...lines.map((l) => l.replace(/"title":"t/, '"title":"second t'))].join('\n'));
    const ids = Array.from({ length: 200 }, (_, i) => `partner-${60_000 + i}`);
    // Killed with its first batch staged, its second accepted; held for a second only.
    await expect(importFile(stoppedAfterSecondAcceptance(svc.rt), { file, batchSize: 100, threadsFromBytes: 0, holdMs: 1_000 })).rejects.toThrow(/killed/);
    await new Promise((r) => setTimeout(r, 1_200));
    const resumed = await importFile(svc.rt, { file, batchSize: 100 });
    expect(resumed).toMatchObject({ records: 400, accepted: 200, duplicate: 200, rejected: 0 });
    expect(await pendingCount(svc.rt)).toBe(0);
    const copies = await storedCopies(svc.rt);
    expect(ids.filter((pkey) => copies.get(pkey) !== 1)).toEqual([]);
    const after = await archived(svc);
    for (let id = 60_000; id < 60_200; id++) expect(after.get(`partner-${id}`)?.title).toBe(`t${id}`);
  });

  it('an import of another file with the same post_ids, after a stopped import held their first versions: it archives those, each once, and counts its own lines as duplicates', async () => {
    const first = path.join(dir, 'first-versions.ndjson');
    const lines = yearLines(70_000, 200);
    await fs.writeFile(first, lines.join('\n'));
    await expect(importFile(stoppedAfterSecondAcceptance(svc.rt), { file: first, batchSize: 100, threadsFromBytes: 0, holdMs: 1_000 })).rejects.toThrow(/killed/);
    await new Promise((r) => setTimeout(r, 1_200));
    // Corrected lines, the same post_ids: the first versions stand, so none of these went in.
    const corrected = path.join(dir, 'corrected.ndjson');
    await fs.writeFile(corrected, lines.map((l) => l.replace(/"title":"t/, '"title":"corrected t')).join('\n'));
    expect(await importFile(svc.rt, { file: corrected, batchSize: 100 })).toMatchObject({ records: 200, accepted: 0, duplicate: 200, rejected: 0 });
    expect(await pendingCount(svc.rt)).toBe(0);
    const copies = await storedCopies(svc.rt);
    const after = await archived(svc);
    for (let id = 70_000; id < 70_200; id++) {
      expect(copies.get(`partner-${id}`)).toBe(1);
      expect(after.get(`partner-${id}`)?.title).toBe(`t${id}`);
    }
  });

  it('waits out another process holding the ledger\'s write lock instead of giving up', async () => {
    const file = path.join(dir, 'busy.ndjson');
    await fs.writeFile(file, yearLines(40_000, 200).join('\n'));
    // Another connection (as the worker of a running service would) holds the write lock for 3 s,
    // longer than any busy timeout.
    const other = new Database(path.join(svc.rt.config.dataDir, 'ledger.sqlite'));
    other.exec('BEGIN IMMEDIATE');
    const release = setTimeout(() => other.exec('COMMIT'), 3_000);
    try {
      const result = await importFile(svc.rt, { file });
      expect(result).toMatchObject({ accepted: 200, rejected: 0 });
    } finally {
      clearTimeout(release);
      if (other.inTransaction) other.exec('COMMIT');
      other.close();
    }
    expect(await pendingCount(svc.rt)).toBe(0);
  });
});
