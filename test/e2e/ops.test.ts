// Ops commands on real data, on both backends: import, compaction, reprocess,
// verify, dead letters, export.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { parse as parseCsv } from 'csv-parse/sync';
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import Database from 'better-sqlite3';
import { DuckDBInstance } from '@duckdb/node-api';
import { bootstrap } from '../../src/main/bootstrap.js';
import { Tagger } from '../../src/boundaries/tagger.js';
import { defaultBoundaries } from '../../src/boundaries/defaultBoundaries.js';
import { listWindowParts } from '../../src/archive/partListing.js';
import { readyKeyOf, statsKeyOf } from '../../src/archive/sidecars/keys.js';
import { ulid } from 'ulid';
import { mergeParts } from '../../src/archive/readRows.js';
import type { IngestRecord } from '../../src/ingest/intake.js';
import { compaction } from '../../jobs/compaction.js';
import { compact, CompactionLockLostError, CompactionRunningError } from '../../src/ops/compact.js';
import { giveBackLocks } from '../../src/ops/storeLock.js';
import { deadLettersFor } from '../../src/ops/deadLetters.js';
import { exportWindow } from '../../src/ops/exportWindow.js';
import { importFile } from '../../src/ops/importFile.js';
import { purgeRetracted } from '../../src/ops/purge.js';
import { BoundariesChangedError, reprocess, ReprocessRunningError } from '../../src/ops/reprocess.js';
import { verify } from '../../src/ops/verify.js';
import { COMPACTION_LOCK_KEY, newPartKey } from '../../src/store/layout.js';
import { parsePartnerReport } from '../../src/partners/partnerReport.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { allArchived,
  API_KEY,
  archivedRow,
  BACKENDS,
  eventually,
  postReport,
  report,
  startTestService,
  tempDir,
  testConfig,
  testRuntime,
  type TestService,
  pkeyOf,
} from '../support/env.js';
import { loadNationalBoundaries } from '../support/sharedData.js';

const DAY = { fromMs: Date.parse('2026-11-21T00:00:00Z'), toMs: Date.parse('2026-11-21T23:59:59.999Z') };
const WINDOW = 'start=2026-11-21T00:00:00%2B0000&end=2026-11-21T23:59:59%2B0000';

/** `target` with some of its calls replaced (each may call the real one on `target`), the others its own. */
function withCalls<T extends object>(target: T, replaced: Partial<T>): T {
  return new Proxy(target, {
    get(t, name) {
      if (Object.hasOwn(replaced, name)) return (replaced as Record<PropertyKey, unknown>)[name];
      const value = Reflect.get(t, name, t) as unknown;
      return typeof value === 'function' ? value.bind(t) : value;
    },
  });
}

async function archiveText(url: string, query = WINDOW): Promise<string> {
  const res = await fetch(`${url}/reports/archive?${query}`, { headers: { 'User-Agent': 'ops-tests' } });
  expect(res.status).toBe(200);
  return res.text();
}

async function pkeys(url: string): Promise<string[]> {
  const body = JSON.parse(await archiveText(url, `${WINDOW}&geoformat=geojson`));
  return body.result.features.map((f: any) => f.properties.pkey).sort();
}

async function drained(svc: TestService): Promise<void> {
  await allArchived(svc.rt);
}

describe.each(BACKENDS)('ops on the %s backend', (kind) => {
  let emulator: Emulator | undefined;
  let svc: TestService;
  let dir: string;
  beforeAll(async () => {
    if (kind === 'aws') emulator = await startEmulator();
    svc = await startTestService(await testRuntime(await testConfig(kind, emulator), emulator));
    dir = await tempDir();
  });
  afterAll(async () => {
    await svc?.stop();
    await emulator?.stop();
  });

  it('imports NDJSON, CSV (CogniCity rows with WKT points) and GeoJSON; a second run adds nothing; rejects carry reasons', async () => {
    const ndjson = path.join(dir, 'partner.ndjson');
    await fs.writeFile(
      ndjson,
      [
        JSON.stringify(report(9001, { created_at: '2026-11-21T09:00:00+08:00', title: 'from ndjson' })),
        JSON.stringify(report(9002, { created_at: '2026-11-21T09:10:00+08:00' })),
        JSON.stringify(report(9003, { location: { lat: 200, lng: 121 } })),
        '{not json',
        // Fields the import does not read (one misspelt, one named as a prototype): imported without them, and told.
        JSON.stringify(report(9004, { titel: 'misspelt', created_at: '2026-11-21T09:20:00+08:00' })).replace(/}$/, ',"__proto__":"x"}'),
        // GeoJSON's order, as strings: no number.
        JSON.stringify(report(9005, { location: { type: 'Point', coordinates: ['121.0497', '14.6516'] } })),
        '',
      ].join('\n'),
    );
    const csv = path.join(dir, 'cognicity.csv');
    await fs.writeFile(
      csv,
      [
        'pkey,post_id,created_at,title,text,image_url,disaster_type,the_geom',
        '17,9011,2026-11-21 10:00:00+08,"Baha, malalim","Hanggang ""baywang""",,flood,POINT(121.0497 14.6516)',
        '18,9012,2026-11-21 10:30:00+08,,,https://img.example.org/a.jpg,flood,SRID=4326;POINT(120.6898 15.0286)',
        '19,9013,2026-11-21 10:45:00+08,,,,flood,POINT(120.9812 14.5896)',
      ].join('\n'),
    );
    const geojson = path.join(dir, 'reports.geojson');
    await fs.writeFile(
      geojson,
      JSON.stringify({
        type: 'FeatureCollection',
        features: [
          // A point in the properties too, which a Feature does not read (its geometry is its point).
          { type: 'Feature', geometry: { type: 'Point', coordinates: [121.0497, 14.6516] }, properties: { post_id: 9021, created_at: '2026-11-21T11:00:00Z', disaster_type: 'flood', partner_city: 'Quezon City', lat: 0, lng: 0 } },
          { type: 'Feature', geometry: { type: 'Point', coordinates: [121.0497, 14.6516] }, properties: { post_id: 9022, created_at: '2026-11-21T11:00:00Z', disaster_type: 'flood', partner_city: 'Quezon City' } },
          // No point, though the geometry says Point: never a report at (0, 0).
          { type: 'Feature', geometry: { type: 'Point', coordinates: [null, null] }, properties: { post_id: 9024, created_at: '2026-11-21T11:00:00Z', disaster_type: 'flood', partner_city: 'Quezon City' } },
          { type: 'Feature', geometry: { type: 'Point', coordinates: ['', [14.6516]] }, properties: { post_id: 9025, created_at: '2026-11-21T11:00:00Z', disaster_type: 'flood', partner_city: 'Quezon City' } },
        ],
        // The second feature gives its post_id twice: read one way here and another by other readers.
      }).replace('"post_id":9022', '"post_id":9023,"post_id":9022'),
    );

    const first = await Promise.all([importFile(svc.rt, { file: ndjson }), importFile(svc.rt, { file: csv }), importFile(svc.rt, { file: geojson })]);
    expect(first.map((r) => [r.records, r.accepted, r.duplicate, r.rejected])).toEqual([
      [6, 3, 0, 3],
      [3, 2, 0, 1],
      [4, 1, 0, 3],
    ]);
    const geoRejects = (await fs.readFile(first[2]!.rejectsFile, 'utf8')).trim().split('\n').map((l) => JSON.parse(l));
    expect(geoRejects.map((r) => [r.record, r.reasons])).toEqual([
      [2, ['properties.post_id: is given twice in one object: send each name once']],
      [3, ['location.lat: must be a number', 'location.lng: must be a number']],
      [4, ['location.lat: must be a number', 'location.lng: must be a number']],
    ]);
    const rejects = (await fs.readFile(first[0]!.rejectsFile, 'utf8')).trim().split('\n').map((l) => JSON.parse(l));
    expect(rejects.map((r) => [r.record, r.reasons])).toEqual([
      [3, ['location.lat: must be between -90 and 90']],
      [4, ['the line is not valid JSON']],
      [6, ['location.lat: must be a number', 'location.lng: must be a number']],
    ]);
    // A line that is not JSON is kept as its text, for whoever mends the file.
    expect(rejects[1].input).toBe('{not json');
    expect(Object.entries(first[0]!.fieldsNotRead)).toEqual([
      ['titel', 1],
      ['__proto__', 1],
    ]);
    // CogniCity's columns, its own pkey included, are all read.
    expect(first[1]!.fieldsNotRead).toEqual({});
    expect(first[2]!.fieldsNotRead).toEqual({ lat: 1, lng: 1 });
    const csvRejects = (await fs.readFile(first[1]!.rejectsFile, 'utf8')).trim().split('\n').map((l) => JSON.parse(l));
    expect(csvRejects[0].reasons[0]).toMatch(/partner_city missing/);

    const second = await Promise.all([importFile(svc.rt, { file: ndjson }), importFile(svc.rt, { file: csv }), importFile(svc.rt, { file: geojson })]);
    expect(second.map((r) => [r.accepted, r.duplicate])).toEqual([
      [0, 3],
      [0, 2],
      [0, 1],
    ]);
    await drained(svc);
    const body = JSON.parse(await archiveText(svc.url, `${WINDOW}&geoformat=geojson`));
    const byKey = Object.fromEntries(body.result.features.map((f: any) => [f.properties.pkey, f]));
    expect(Object.keys(byKey).sort()).toEqual(['partner-9001', 'partner-9002', 'partner-9004', 'partner-9011', 'partner-9012', 'partner-9021']);
    expect(byKey['partner-9011'].properties).toMatchObject({ title: 'Baha, malalim', text: 'Hanggang "baywang"', created_at: '2026-11-21T02:00:00.000Z' });
    expect(byKey['partner-9012'].properties.tags.instance_region_code).toBe('PH-PG');
    expect(byKey['partner-9012'].properties.image_url).toBe('https://img.example.org/a.jpg');
  });

  it('resumes an interrupted import from its checkpoint', async () => {
    const file = path.join(dir, 'resume.ndjson');
    await fs.writeFile(file, [9101, 9102, 9103, 9104].map((id) => JSON.stringify(report(id))).join('\n'));
    const stat = await fs.stat(file);
    // As if a first run had processed two records and died.
    await fs.writeFile(`${file}.import-state.json`, JSON.stringify({ size: stat.size, mtimeMs: stat.mtimeMs, processed: 2, accepted: 2, duplicate: 0, rejected: 0, complete: false }));
    const result = await importFile(svc.rt, { file });
    expect(result).toMatchObject({ resumedFrom: 2, records: 4, accepted: 4 });
    expect(await svc.rt.ledger.get({ source: 'partner', post_id: 9101 })).toBeUndefined();
    expect(await svc.rt.ledger.get({ source: 'partner', post_id: 9103 })).toBeDefined();
  });

  it('a resumed import writes each reject once: the rejects a dead run wrote past its checkpoint are not repeated', async () => {
    const file = path.join(dir, 'resume-rejects.ndjson');
    await fs.writeFile(file, [JSON.stringify(report(9111)), 'not json', JSON.stringify(report(9112)), '{"post_id": -1}'].join('\n'));
    const stat = await fs.stat(file);
    const rejectsFile = `${file}.rejected.ndjson`;
    // As if a run had checkpointed its first record, written the rejects of the next three
    // (a batch's), and died before its next checkpoint.
    const written = [
      JSON.stringify({ record: 2, reasons: ['not JSON'], input: 'not json' }),
      JSON.stringify({ record: 4, reasons: ['post_id: must be a positive integer'], input: { post_id: -1 } }),
    ].join('\n') + '\n';
    await fs.writeFile(rejectsFile, written);
    await fs.writeFile(`${file}.import-state.json`, JSON.stringify({ size: stat.size, mtimeMs: stat.mtimeMs, processed: 1, accepted: 1, duplicate: 0, rejected: 0, complete: false, rejectsBytes: 0 }));
    const result = await importFile(svc.rt, { file });
    expect(result).toMatchObject({ resumedFrom: 1, records: 4, rejected: 2 });
    const lines = (await fs.readFile(rejectsFile, 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { record: number });
    expect(lines.map((l) => l.record)).toEqual([2, 4]);
  });

  it('compaction leaves one part per closed hour and byte-identical answers before, during and after', async () => {
    await drained(svc);
    // A second flush into the same hours.
    for (const id of [9201, 9202]) expect((await postReport(svc.url, report(id, { created_at: '2026-11-21T02:30:00Z' }))).status).toBe(201);
    await drained(svc);
    const hours = await listWindowParts(svc.rt.store, DAY.fromMs, DAY.toMs);
    expect(hours.some((h) => h.parts.length > 1)).toBe(true);
    const before = [await archiveText(svc.url), await archiveText(svc.url, `${WINDOW}&geoformat=geojson`)];

    // During: the merged file is written and the old parts are still there.
    const busy = hours.find((h) => h.parts.length > 1)!;
    const merged = path.join(dir, 'merged.parquet');
    await mergeParts(svc.rt.db, await Promise.all(busy.parts.map((p) => svc.rt.cache.localFile(p))), merged);
    await svc.rt.store.put(newPartKey(busy.hourMs), await fs.readFile(merged));
    expect([await archiveText(svc.url), await archiveText(svc.url, `${WINDOW}&geoformat=geojson`)]).toEqual(before);

    // Another compaction under way (by hand on another host, say): this one is refused and merges nothing.
    const elsewhere = JSON.stringify({ host: 'another-host', pid: 1, id: 'elsewhere', since: new Date().toISOString(), touched: new Date().toISOString() });
    await svc.rt.store.put(COMPACTION_LOCK_KEY, elsewhere);
    await expect(compact(svc.rt, { ...DAY, closedBeforeMs: Date.now() })).rejects.toThrow(CompactionRunningError);
    // The scheduled job passes the days by for this tick (and still purges), rather than failing.
    expect(await compaction.run(svc.rt)).toMatchObject({ skipped: expect.stringMatching(/another compaction is running on this archive/), purge: expect.anything() });
    expect(await listWindowParts(svc.rt.store, DAY.fromMs, DAY.toMs)).toEqual(hours.map((h) => (h.hourMs === busy.hourMs ? { ...h, parts: expect.any(Array) } : h)));
    await svc.rt.store.delete([COMPACTION_LOCK_KEY]);

    // While the day is open, its closed hours are merged hour by hour.
    const hourly = await compact(svc.rt, { ...DAY, closedBeforeMs: DAY.toMs - 3_600_000 });
    // The lock is given back.
    expect(await svc.rt.store.get(COMPACTION_LOCK_KEY)).toBeUndefined();
    expect(hourly).toMatchObject({ daysCompacted: 0, hoursCompacted: expect.any(Number) });
    expect(hourly.hoursCompacted).toBeGreaterThan(0);
    const afterHours = await listWindowParts(svc.rt.store, DAY.fromMs, DAY.toMs);
    expect(afterHours.every((h) => h.parts.length === 1 && !h.wholeDay)).toBe(true);
    expect([await archiveText(svc.url), await archiveText(svc.url, `${WINDOW}&geoformat=geojson`)]).toEqual(before);

    // Once the day is closed, it becomes one compacted part.
    const daily = await compact(svc.rt, { ...DAY, closedBeforeMs: Date.now() });
    expect(daily).toMatchObject({ daysCompacted: 1, hoursCompacted: 0, partsRemoved: afterHours.length });
    const after = await listWindowParts(svc.rt.store, DAY.fromMs, DAY.toMs);
    expect(after).toEqual([{ hourMs: DAY.fromMs, wholeDay: true, parts: [expect.objectContaining({ key: expect.stringMatching(/\/day=21\/hour=all\/part-[0-9A-Z]{26}\.parquet$/) })] }]);
    expect([await archiveText(svc.url), await archiveText(svc.url, `${WINDOW}&geoformat=geojson`)]).toEqual(before);
    // A window that cuts the compacted day still answers exactly its part of it.
    const cut = `start=2026-11-21T02:00:00%2B0000&end=2026-11-21T02:59:59%2B0000&geoformat=geojson`;
    const inCut = JSON.parse(before[1]!).result.features.filter((f: any) => f.properties.created_at.startsWith('2026-11-21T02:'));
    expect(JSON.parse(await archiveText(svc.url, cut)).result.features).toEqual(inCut);
    const again = await compact(svc.rt, { ...DAY, closedBeforeMs: Date.now() });
    expect(again).toMatchObject({ daysCompacted: 0, hoursCompacted: 0, partsRemoved: 0, straySidecarsRemoved: 0 });

    // Sidecars a writer killed before its part left behind (a part key minted two hours ago, never
    // stored) go with a compaction an hour after they were written; those of a part minted a
    // moment before that compaction, and the day's own part's, stay.
    const minted = (key: string, ms: number) => key.replace(/part-[0-9A-Z]{26}/, `part-${ulid(ms)}`);
    const hourPart = newPartKey(DAY.fromMs + 5 * 3_600_000);
    const HOUR = 3_600_000;
    const later = Date.now() + 2 * HOUR;
    const [dead, coming] = [minted(hourPart, Date.now() - 2 * HOUR), minted(hourPart, later - 60_000)] as [string, string];
    const sidecarsOf = (part: string) => [readyKeyOf(part), statsKeyOf(part)];
    for (const key of [...sidecarsOf(dead), ...sidecarsOf(coming)]) await svc.rt.store.put(key, Buffer.from('a sidecar'));
    // The day's part, as if written two hours ago: stored, so its sidecars stay.
    const dayPart = minted(after[0]!.parts[0]!.key, Date.now() - 2 * HOUR);
    for (const [from, to] of [after[0]!.parts[0]!.key, ...sidecarsOf(after[0]!.parts[0]!.key)].map((k, i) => [k, [dayPart, ...sidecarsOf(dayPart)][i]!])) {
      await svc.rt.store.put(to!, (await svc.rt.store.get(from!))!.body);
      await svc.rt.store.delete([from!]);
    }
    // Now: the dead part's key is old, but its sidecars were written a moment ago (as a bulk
    // import's round, whose keys are minted at its start, writes them): they stay.
    expect(await compact(svc.rt, { ...DAY, closedBeforeMs: Date.now() })).toMatchObject({ daysCompacted: 0, straySidecarsRemoved: 0 });
    for (const key of sidecarsOf(dead)) expect(await svc.rt.store.head(key)).toBeDefined();
    const swept = await compact(svc.rt, { ...DAY, closedBeforeMs: Date.now(), nowMs: later });
    expect(swept).toMatchObject({ daysCompacted: 0, partsRemoved: 0, straySidecarsRemoved: 2 });
    for (const key of sidecarsOf(dead)) expect(await svc.rt.store.head(key)).toBeUndefined();
    for (const key of [...sidecarsOf(coming), ...sidecarsOf(dayPart)]) expect(await svc.rt.store.head(key)).toBeDefined();
    expect([await archiveText(svc.url), await archiveText(svc.url, `${WINDOW}&geoformat=geojson`)]).toEqual(before);
    await svc.rt.store.delete(sidecarsOf(coming));
  });

  it('a scheduled compaction that loses its lock part-way fails its tick: only one that never took the lock passes the tick by', async () => {
    // Two closed days in the job's look-back, each of two hours' parts.
    const day = (ago: number, hour: number) => new Date(Math.floor(Date.now() / 86_400_000 - ago) * 86_400_000 + hour * 3_600_000).toISOString();
    const posted = [day(3, 2), day(3, 5), day(2, 2), day(2, 5)];
    for (const [i, at] of posted.entries()) expect((await postReport(svc.url, report(700 + i, { created_at: at }))).status).toBe(201);
    await drained(svc);
    // The process stops (Ctrl-C, a deploy) while the first day is merged: its locks are given back.
    let stopped = false;
    const stopping = {
      ...svc.rt,
      cache: {
        ...svc.rt.cache,
        withFiles: <T>(parts: Parameters<typeof svc.rt.cache.withFiles>[0], fn: (files: string[]) => Promise<T>) => {
          if (!stopped) {
            stopped = true;
            void giveBackLocks();
          }
          return svc.rt.cache.withFiles(parts, fn);
        },
      },
    };
    const tick = await compaction.run(stopping).catch((err: unknown) => err);
    expect(stopped).toBe(true);
    expect(tick).toBeInstanceOf(CompactionLockLostError);
    expect(String(tick)).toMatch(/gave the archive's lock .* back as its process stops/);
    // The next tick merges what was left.
    expect(await compaction.run(svc.rt)).toMatchObject({ daysCompacted: expect.any(Number), purge: expect.anything() });
    for (const at of posted) {
      const from = Date.parse(at.slice(0, 10));
      expect((await listWindowParts(svc.rt.store, from, from + 86_400_000 - 1)).map((h) => h.wholeDay)).toEqual([true]);
    }
  });

  it('exports the window as Parquet, CSV and GeoJSON with the same reports as the archive', async () => {
    const want = await pkeys(svc.url);
    const query = { startMs: DAY.fromMs, endMs: DAY.toMs, admin: undefined };
    const parquet = path.join(dir, 'out.parquet');
    await exportWindow(svc.rt, query, 'parquet', parquet);
    const db = await DuckDBInstance.create(':memory:');
    const conn = await db.connect();
    const rows = (await conn.runAndReadAll(`SELECT pkey FROM read_parquet('${parquet}')`)).getRowObjectsJS();
    expect(rows.map((r) => String(r.pkey)).sort()).toEqual(want);
    conn.closeSync();
    db.closeSync();

    const csvFile = path.join(dir, 'out.csv');
    await exportWindow(svc.rt, query, 'csv', csvFile);
    const records = parseCsv(await fs.readFile(csvFile, 'utf8'), { columns: true }) as Record<string, string>[];
    expect(records.map((r) => r.pkey).sort()).toEqual(want);
    expect(Object.keys(records[0]!)).toEqual(['pkey', 'created_at', 'source', 'status', 'url', 'image_url', 'disaster_type', 'report_data', 'instance_region_code', 'local_area_id', 'province_code', 'region_code', 'title', 'text', 'lng', 'lat']);

    const geo = path.join(dir, 'out.geojson');
    await exportWindow(svc.rt, query, 'geojson', geo);
    const fc = JSON.parse(await fs.readFile(geo, 'utf8'));
    expect(fc.type).toBe('FeatureCollection');
    expect(fc.features.map((f: any) => f.properties.pkey).sort()).toEqual(want);

    // One that fails part-way (the store gone after its first day) leaves the earlier file as it
    // was, and nothing beside it: never a cut file under the name asked for.
    const failing = {
      archive: {
        open: async (q: typeof query) => {
          const opened = await svc.rt.archive.open(q);
          return withCalls(opened, {
            batches: async function* (...args: Parameters<typeof opened.batches>) {
              for await (const batch of opened.batches(...args)) {
                yield batch;
                throw new Error('the store went away');
              }
            },
          });
        },
      },
    };
    const before = await fs.readFile(csvFile);
    await expect(exportWindow(failing, query, 'csv', csvFile)).rejects.toThrow(/the store went away/);
    expect((await fs.readFile(csvFile)).equals(before)).toBe(true);
    expect((await fs.readdir(dir)).filter((f) => f.startsWith('out.csv'))).toEqual(['out.csv']);
  });

  it('verify on a live system: a report archived while it reads is not taken for a loss', async () => {
    await drained(svc);
    const window = { fromMs: Date.parse('2026-11-26T00:00:00Z'), toMs: Date.parse('2026-11-26T23:59:59.999Z') };
    // The report is posted and archived by the worker just before verify reads the ledger.
    let posted = false;
    const ledger = withCalls(svc.rt.ledger, {
      accepted: async function* (fromMs: number, toMs: number) {
        if (!posted) {
          posted = true;
          expect((await postReport(svc.url, report(9401, { created_at: '2026-11-26T21:00:00Z' }))).status).toBe(201);
          await allArchived(svc.rt);
        }
        yield* svc.rt.ledger.accepted(fromMs, toMs);
      },
    });
    const result = await verify({ ...svc.rt, ledger }, window);
    expect(result.missing).toEqual([]);
    expect(result.days).toEqual([{ day: '2026-11-26', accepted: 1, archived: 1, pending: 0, missing: 0 }]);
    expect(result.ok).toBe(true);
  });

  it('verify on a live system: a report accepted and archived after it read the ledger is not unexpected', async () => {
    await drained(svc);
    const window = { fromMs: Date.parse('2026-11-27T00:00:00Z'), toMs: Date.parse('2026-11-27T23:59:59.999Z') };
    expect((await postReport(svc.url, report(9402, { created_at: '2026-11-27T20:00:00Z' }))).status).toBe(201);
    await allArchived(svc.rt);
    // The second report is posted and archived once verify has read the ledger, before it lists the parts.
    let spilled: string[] = [];
    const ledger = withCalls(svc.rt.ledger, {
      accepted: async function* (fromMs: number, toMs: number) {
        yield* svc.rt.ledger.accepted(fromMs, toMs);
        // What verify read is kept where the leftover sweep spares a job's files for a day.
        spilled = await fs.readdir(path.join(svc.rt.config.dataDir, 'tmp', 'verify'));
        expect((await postReport(svc.url, report(9403, { created_at: '2026-11-27T21:00:00Z' }))).status).toBe(201);
        await allArchived(svc.rt);
      },
    });
    const result = await verify({ ...svc.rt, ledger }, window);
    expect(spilled).toHaveLength(1);
    expect(result.days).toEqual([{ day: '2026-11-27', accepted: 1, archived: 1, pending: 0, missing: 0 }]);
    expect(result.unexpected).toEqual([]);
    expect(result.ok).toBe(true);
    // A report the ledger does not know, read or looked up, is still listed.
    const stranger = pkeyOf(9402);
    const forgetful = withCalls(svc.rt.ledger, {
      lookup: async (pkey: string) => (pkey === stranger ? undefined : svc.rt.ledger.lookup(pkey)),
      accepted: async function* (fromMs: number, toMs: number) {
        for await (const page of svc.rt.ledger.accepted(fromMs, toMs)) yield page.filter((r) => r.pkey !== stranger);
      },
    });
    const strange = await verify({ ...svc.rt, ledger: forgetful }, window);
    expect(strange.unexpected).toEqual([stranger]);
    expect(strange.days).toEqual([{ day: '2026-11-27', accepted: 1, archived: 1, pending: 0, missing: 0 }]);
  });

  it('verify finds nothing missing, then reports a part deleted behind the system\'s back', async () => {
    await drained(svc);
    const ok = await verify(svc.rt, DAY);
    expect(ok.ok).toBe(true);
    expect(ok.missing).toEqual([]);
    const day = ok.days.find((d) => d.day === '2026-11-21')!;
    expect(day.accepted).toBe(day.archived);
    // From 02:30, as the scheduled job's window of the last days begins: the compacted day's one
    // part (keyed at midnight) holds the afternoon's reports too.
    expect((await listWindowParts(svc.rt.store, DAY.fromMs, DAY.toMs)).map((h) => h.wholeDay)).toEqual([true]);
    const late = await verify(svc.rt, { fromMs: Date.parse('2026-11-21T02:30:00Z'), toMs: DAY.toMs });
    expect(late.missing).toEqual([]);
    expect(late.days[0]!.archived).toBe(late.days[0]!.accepted);
    expect(late.days[0]!.accepted).toBeGreaterThan(0);

    const hours = await listWindowParts(svc.rt.store, DAY.fromMs, DAY.toMs);
    const victim = hours[0]!;
    const span = victim.wholeDay ? 86_400_000 : 3_600_000;
    const lost = JSON.parse(await archiveText(svc.url, `start=${new Date(victim.hourMs).toISOString().slice(0, 19)}%2B0000&end=${new Date(victim.hourMs + span - 1).toISOString().slice(0, 19)}%2B0000&geoformat=geojson`))
      .result.features.map((f: any) => f.properties.pkey)
      .sort();
    await svc.rt.store.delete(victim.parts.map((p) => p.key));
    const bad = await verify(svc.rt, DAY);
    expect(bad.ok).toBe(false);
    expect(bad.missing).toEqual(lost);
  });

  it('lists dead letters and redrives them into the archive', async () => {
    const record: IngestRecord = {
      v: 1,
      pkey: 'partner-9301',
      source: 'partner',
      post_id: 9301,
      received_at: new Date().toISOString(),
      report: parsePartnerReport(report(9301, { created_at: '2026-11-21T20:00:00Z' })),
    };
    if (kind === 'embedded') {
      // Accepted and pending, its message dead-lettered: as another process on DATA_DIR sees the ledger.
      const db = new Database(path.join(svc.rt.config.dataDir, 'ledger.sqlite'));
      const now = Date.now();
      db.prepare(`INSERT INTO reports (source, partner, post_id, created_at_ms, state, accepted_at_ms, enqueued_at_ms) VALUES ('partner', '', 9301, ?, 'pending', ?, ?)`)
        .run(Date.parse(record.report.created_at), now, now);
      db.prepare(`INSERT INTO pending_records (source, partner, post_id, record) VALUES ('partner', '', 9301, ?)`).run(JSON.stringify(record));
      // A live post's message is buried as it was sent: an empty body that reads its pending record.
      db.prepare('INSERT INTO dead_letters (body, pkey, sent_at_ms, receive_count, dead_lettered_at_ms) VALUES (?, ?, ?, 5, ?)').run('', record.pkey, now, now);
      db.close();
    } else {
      await svc.rt.store.put('ingest/keys/partner/9301.json', JSON.stringify(record));
      await svc.rt.store.put('ingest/pending/partner/9301.json', JSON.stringify(record));
      const { deadLetterQueueUrl } = await bootstrap(svc.rt.config, { s3: emulator!.s3, sqs: emulator!.sqs });
      await emulator!.sqs.send(new SendMessageCommand({ QueueUrl: deadLetterQueueUrl, MessageBody: JSON.stringify(record) }));
    }
    const sentBefore = Date.now();
    const dlq = deadLettersFor(svc.rt);
    const listed = await dlq.list();
    // What landed there, readable: the report's record, with what each backend knows of its history.
    expect(listed.map((l) => JSON.parse(l.body))).toEqual([record]);
    if (kind === 'embedded') {
      expect(listed[0]).toMatchObject({ receiveCount: 5, deadLetteredAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) });
      expect(Date.parse(listed[0]!.deadLetteredAt!)).toBeLessThanOrEqual(sentBefore);
    } else {
      expect(Math.abs(Date.parse(listed[0]!.sentAt!) - sentBefore)).toBeLessThan(60_000);
    }
    expect((await dlq.list()).length).toBe(1); // listing leaves them in place
    expect(await dlq.redrive()).toBe(1);
    expect(await dlq.list()).toEqual([]);
    await eventually(async () => ((await pkeys(svc.url)).includes('partner-9301') ? true : undefined), 20_000, 'the redriven report archived');
  });

  it('verify of everything (from 1970) starts in the year of the earliest report, a report backfilled years back included', async () => {
    expect((await postReport(svc.url, report(9501, { created_at: '2024-06-01T03:00:00Z' }))).status).toBe(201);
    await drained(svc);
    // The ledger is read once, whatever the window (on S3 each read lists and reads every key
    // written since the window began: after an import of years, every key, once per block).
    let reads = 0;
    const ledger = withCalls(svc.rt.ledger, {
      accepted: (fromMs: number, toMs: number) => {
        reads += 1;
        return svc.rt.ledger.accepted(fromMs, toMs);
      },
    });
    const blocks: number[] = [];
    const now = Date.now();
    const all = await verify({ ...svc.rt, ledger }, { fromMs: 0, toMs: now }, { start: (total) => blocks.push(total), tick: () => {}, stop: () => {} });
    expect(reads).toBe(1);
    // From the start of its year at the earliest: the archive's parts are listed by year.
    expect(blocks).toHaveLength(1);
    expect(blocks[0]).toBeGreaterThan(0);
    expect(blocks[0]).toBeLessThanOrEqual(Math.ceil((now - Date.UTC(2024, 0, 1)) / (31 * 86_400_000)) + 1);
    // What it spilled to disk for the blocks is gone.
    expect(await fs.readdir(path.join(svc.rt.config.dataDir, 'tmp', 'verify')).catch(() => [])).toEqual([]);
    expect(all.days.find((d) => d.day === '2024-06-01')).toEqual({ day: '2024-06-01', accepted: 1, archived: 1, pending: 0, missing: 0 });
    // The part deleted behind the system's back above is still found.
    expect(all.missing).toEqual((await verify(svc.rt, DAY)).missing);
    expect(all.missing.length).toBeGreaterThan(0);
  });
});

describe.each(BACKENDS)('publishing the national boundaries then reprocessing, on the %s backend', (kind) => {
  let emulator: Emulator | undefined;
  let svc: TestService;
  beforeAll(async () => {
    if (kind === 'aws') emulator = await startEmulator();
    svc = await startTestService(await testRuntime(await testConfig(kind, emulator), emulator));
  });
  afterAll(async () => {
    await svc?.stop();
    await emulator?.stop();
  });

  it('moves reports tagged under the two-city default to their city or municipality and barangay nationally, after a dry run that says what moves', async () => {
    const points: [number, number][] = [
      [121.0497, 14.6516], // Quezon Memorial Circle
      [120.6898, 15.0286], // City of San Fernando
      [120.5885, 15.1371], // Angeles: Pampanga in the two-city set, an independent city nationally
      [120.9812, 14.5896], // Manila City Hall: no city in the default; Manila has no barangays in the data
      [121.1029, 14.6507], // Marikina City Hall
      [123.8854, 10.2958], // Cebu City
      [125.6128, 7.0731], // Davao City
      [122.5621, 10.7202], // Iloilo City
      [119.5, 15.5], // at sea, off Zambales
    ];
    for (const [i, [lng, lat]] of points.entries()) {
      expect((await postReport(svc.url, report(9400 + i, { created_at: '2026-11-21T03:00:00Z', location: { lat, lng } }))).status).toBe(201);
    }
    await drained(svc);
    const national = await loadNationalBoundaries();
    const oldTagger = new Tagger(await defaultBoundaries());
    const newTagger = new Tagger(national);
    const expectedMoves: Record<string, number> = {};
    for (const [lng, lat] of points) {
      const a = oldTagger.tag(lng, lat).instance_region_code;
      const b = newTagger.tag(lng, lat).instance_region_code;
      if (a !== b) expectedMoves[`${a ?? 'null'} -> ${b ?? 'null'}`] = (expectedMoves[`${a ?? 'null'} -> ${b ?? 'null'}`] ?? 0) + 1;
    }
    // Every report on land moves to a national code; the one at sea stays untagged.
    expect(Object.values(expectedMoves).reduce((a, b) => a + b, 0)).toBe(points.length - 1);
    const localAreaChanges = points.filter(([lng, lat]) => oldTagger.tag(lng, lat).local_area_id !== newTagger.tag(lng, lat).local_area_id).length;

    const { version } = await svc.rt.boundaries.publish(national);
    const dry = await reprocess(svc.rt, { ...DAY, dryRun: true });
    expect(dry.moves).toEqual(expectedMoves);
    expect(dry.localAreaChanges).toBe(localAreaChanges);
    expect(dry.hoursRewritten).toBe(0);
    const unchanged = JSON.parse(await archiveText(svc.url, `${WINDOW}&geoformat=geojson`));
    expect(unchanged.result.features.map((f: any) => f.properties.tags.instance_region_code).filter((c: string | null) => c !== null).sort()).toEqual(['PH-PG', 'PH-PG', 'PH-QC']);

    // One part, or two when the posts straddled a flush (a loaded host).
    const beforeParts = (await listWindowParts(svc.rt.store, DAY.fromMs, DAY.toMs)).flatMap((h) => h.parts);
    const before = beforeParts[0];
    const beforeBody = (await svc.rt.store.get(before!.key))!.body;
    // A compaction under way (on another host, say): the reprocess is refused and rewrites nothing,
    // as a compaction that listed the old parts would store them again after it; a dry run still answers.
    const elsewhere = JSON.stringify({ host: 'another-host', pid: 1, id: 'elsewhere', job: 'compaction', since: new Date().toISOString(), touched: new Date().toISOString() });
    await svc.rt.store.put(COMPACTION_LOCK_KEY, elsewhere);
    await expect(reprocess(svc.rt, { ...DAY, dryRun: false })).rejects.toThrow(ReprocessRunningError);
    expect((await listWindowParts(svc.rt.store, DAY.fromMs, DAY.toMs)).flatMap((h) => h.parts)).toEqual(beforeParts);
    expect((await reprocess(svc.rt, { ...DAY, dryRun: true })).moves).toEqual(expectedMoves);
    await svc.rt.store.delete([COMPACTION_LOCK_KEY]);
    // And a compaction asked for while the reprocess runs is refused.
    let compaction: unknown;
    const compacting = {
      ...svc.rt,
      cache: {
        withFiles: <T>(parts: Parameters<typeof svc.rt.cache.withFiles>[0], fn: (files: string[]) => Promise<T>) =>
          svc.rt.cache.withFiles(parts, async (files) => {
            compaction ??= await compact(svc.rt, { ...DAY, closedBeforeMs: Date.now() }).catch((err: unknown) => err);
            return fn(files);
          }),
      },
    };
    const done = await reprocess(compacting, { ...DAY, dryRun: false });
    expect(compaction).toBeInstanceOf(CompactionRunningError);
    expect(String(compaction)).toMatch(/another reprocess is running on this archive/);
    expect(await svc.rt.store.get(COMPACTION_LOCK_KEY)).toBeUndefined();
    expect(done.moves).toEqual(expectedMoves);
    expect(done.hoursRewritten).toBe(1);
    const body = JSON.parse(await archiveText(svc.url, `${WINDOW}&geoformat=geojson`));
    expect(body.result.features).toHaveLength(points.length);
    for (const f of body.result.features) {
      const [lng, lat] = f.geometry.coordinates;
      expect(f.properties.tags).toEqual(newTagger.tag(lng, lat));
    }
    const tagsOf = (post: number) => body.result.features.find((f: any) => f.properties.pkey === pkeyOf(post)).properties.tags;
    // Every tag level: Quezon City in NCR's Second District; Angeles, an independent city, in the
    // province that holds it (Pampanga); Manila in NCR; nothing at sea.
    expect(tagsOf(9400)).toEqual({ instance_region_code: 'PH-1381300000', local_area_id: '1381300020', province_code: 'PH-1307400000', region_code: 'PH-1300000000' });
    expect(tagsOf(9402)).toMatchObject({ instance_region_code: 'PH-0330100000', province_code: 'PH-0305400000', region_code: 'PH-0300000000' });
    expect(tagsOf(9403)).toEqual({ instance_region_code: 'PH-1380600000', local_area_id: null, province_code: 'PH-1303900000', region_code: 'PH-1300000000' });
    expect(tagsOf(9408)).toEqual({ instance_region_code: null, local_area_id: null, province_code: null, region_code: null });
    // And in CSV, a column each.
    const csv = (await archiveText(svc.url, `${WINDOW}&format=csv`)).trim().split('\n');
    const header = csv[0]!.split(',');
    const qc = csv.find((l) => l.startsWith(`"${pkeyOf(9400)}"`))!.split(',');
    expect([qc[header.indexOf('province_code')], qc[header.indexOf('region_code')]]).toEqual(['"PH-1307400000"', '"PH-1300000000"']);
    // The archive is filtered by the new codes.
    const cebu = JSON.parse(await archiveText(svc.url, `${WINDOW}&geoformat=geojson&admin=${tagsOf(9405).instance_region_code}`));
    expect(cebu.result.features.map((f: any) => f.properties.pkey)).toEqual([pkeyOf(9405)]);
    const hours = await listWindowParts(svc.rt.store, DAY.fromMs, DAY.toMs);
    expect(hours.map((h) => h.parts.length)).toEqual([1]);
    expect(version).toHaveLength(24);
    // The new part got its ready texts after every part was re-tagged.
    const part = hours[0]!.parts[0]!;
    expect(await svc.rt.store.head(readyKeyOf(part.key))).toBeDefined();
    // A run stopped before them: the same command again rewrites nothing and writes them.
    await svc.rt.store.delete([readyKeyOf(part.key)]);
    const again = await reprocess(svc.rt, { ...DAY, dryRun: false });
    expect(again.hoursRewritten).toBe(0);
    expect(await svc.rt.store.head(readyKeyOf(part.key))).toBeDefined();
    expect(JSON.parse(await archiveText(svc.url, `${WINDOW}&geoformat=geojson`))).toEqual(body);
    // A run stopped after its new part, before the old one went (and before the ready texts):
    // the same command again leaves the hour one part, with its ready texts.
    await svc.rt.store.put(before!.key, beforeBody);
    await svc.rt.store.delete([readyKeyOf(part.key)]);
    expect((await listWindowParts(svc.rt.store, DAY.fromMs, DAY.toMs)).map((h) => h.parts.length)).toEqual([2]);
    const finished = await reprocess(svc.rt, { ...DAY, dryRun: false });
    expect([finished.hoursRewritten, finished.cityChanges]).toEqual([1, 0]);
    const [merged] = (await listWindowParts(svc.rt.store, DAY.fromMs, DAY.toMs)).flatMap((h) => h.parts);
    expect((await listWindowParts(svc.rt.store, DAY.fromMs, DAY.toMs)).map((h) => h.parts.length)).toEqual([1]);
    expect(await svc.rt.store.head(readyKeyOf(merged!.key))).toBeDefined();
    expect(JSON.parse(await archiveText(svc.url, `${WINDOW}&geoformat=geojson`))).toEqual(body);
  }, 120_000);

  it('says so (and fails) when another boundary version is published while it runs: the window carries the one it began with', async () => {
    const day = { fromMs: Date.parse('2026-11-23T00:00:00Z'), toMs: Date.parse('2026-11-23T23:59:59.999Z') };
    expect((await postReport(svc.url, report(9600, { created_at: '2026-11-23T03:00:00Z' }))).status).toBe(201);
    await drained(svc);
    const other = async (label: string) => (label === (await defaultBoundaries()).label ? await loadNationalBoundaries() : await defaultBoundaries());
    const began = await svc.rt.boundaries.latest();
    await svc.rt.boundaries.publish(await other(began.label));
    // The next version published (by another operator, say) as the run reads its first hour.
    let published: string | undefined;
    const racing = {
      ...svc.rt,
      cache: {
        withFiles: <T>(parts: Parameters<typeof svc.rt.cache.withFiles>[0], fn: (files: string[]) => Promise<T>) =>
          svc.rt.cache.withFiles(parts, async (files) => {
            published ??= (await svc.rt.boundaries.publish({ ...(await other((await svc.rt.boundaries.latest()).label)), label: 'published during the run' })).version;
            return fn(files);
          }),
      },
    };
    await expect(reprocess(racing, { ...day, dryRun: false })).rejects.toThrow(BoundariesChangedError);
    expect(published).toBeDefined();
    // Run again, it re-tags the window with the version published now.
    const again = await reprocess(svc.rt, { ...day, dryRun: false });
    expect(again.boundaryVersion).toBe(published);
    expect((await archivedRow(svc.rt, pkeyOf(9600)))?.boundary_version).toBe(published);
  }, 120_000);

  it('a report retracted and purged while reprocess reads its hour stays retracted in the part reprocess writes', async () => {
    const day = { fromMs: Date.parse('2026-11-22T00:00:00Z'), toMs: Date.parse('2026-11-22T23:59:59.999Z') };
    expect((await postReport(svc.url, report(9500, { created_at: '2026-11-22T03:00:00Z', title: 'my name and street' }))).status).toBe(201);
    expect((await postReport(svc.url, report(9501, { created_at: '2026-11-22T03:10:00Z' }))).status).toBe(201);
    await drained(svc);
    // New boundaries (the two-city set after the national one, or the other way round): the hour's tags change.
    const current = await svc.rt.boundaries.latest();
    await svc.rt.boundaries.publish(current.label === (await defaultBoundaries()).label ? await loadNationalBoundaries() : await defaultBoundaries());
    const del = await fetch(`${svc.url}/feeds/partner/9500`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY, 'User-Agent': 'flood-tests/1.0' } });
    expect(del.status).toBe(200);
    // The purge runs while reprocess has the hour's parts in hand, as read before it.
    let purged = 0;
    const racing = {
      ...svc.rt,
      cache: {
        withFiles: <T>(parts: Parameters<typeof svc.rt.cache.withFiles>[0], fn: (files: string[]) => Promise<T>) =>
          svc.rt.cache.withFiles(parts, async (files) => {
            if (purged === 0) purged = (await purgeRetracted(svc.rt)).purged;
            return fn(files);
          }),
      },
    };
    const done = await reprocess(racing, { ...day, dryRun: false });
    expect([purged, done.hoursRewritten]).toEqual([1, 1]);
    const row = await archivedRow(svc.rt, pkeyOf(9500));
    expect(row).toMatchObject({ status: 'retracted', title: '' });
    expect((await archivedRow(svc.rt, pkeyOf(9501)))?.status).not.toBe('retracted');
  }, 120_000);
});
