// Incremental sync on both backends: a mirror that pulls the archive once, then repeats
// updated_after=<watermark of its last answer> while reports arrive (late ones too, into hours
// it already has) and others are retracted, ends equal to a full pull; and the extent tells
// "no data yet" from "no reports".
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultBoundaries } from '../../src/boundaries/defaultBoundaries.js';
import { reprocess } from '../../src/ops/reprocess.js';
import { gunzipSync, gzipSync } from 'node:zlib';
import { ulid } from 'ulid';
import { compaction } from '../../jobs/compaction.js';
import { CHANGES_PREFIX } from '../../src/archive/changes.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { allArchived, API_KEY, BACKENDS, getJson, keysUnder, postReport, report, startTestService, testConfig, testRuntime, type TestService, pkeyOf } from '../support/env.js';

let emulator: Emulator;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(async () => {
  await emulator.stop();
});

const SETTLE_MS = 500;
const UA = { 'User-Agent': 'flood-mirror/1.0' };

/** A mirror keyed by pkey: upserts, tombstones delete. */
type Mirror = Map<string, any>;

function apply(mirror: Mirror, lines: string): number {
  let n = 0;
  for (const line of lines.split('\n')) {
    if (line === '') continue;
    const f = JSON.parse(line);
    if (f.properties.status === 'retracted') mirror.delete(f.properties.pkey);
    else mirror.set(f.properties.pkey, f);
    n += 1;
  }
  return n;
}

describe.each(BACKENDS)('incremental sync with updated_after (%s)', (kind) => {
  let svc: TestService;
  const archive = (q: string) => `${svc.url}/reports/archive?format=ndjson&${q}`;

  async function pull(q: string): Promise<{ text: string; watermark: string; status: number }> {
    const res = await fetch(archive(q), { headers: UA });
    return { text: await res.text(), watermark: res.headers.get('x-archive-watermark')!, status: res.status };
  }

  /** A late report posted and another retracted, both archived and settled: in any answer from then on. */
  async function lateAndRetracted(late: number, createdAt: string, retracted: number): Promise<void> {
    expect((await postReport(svc.url, report(late, { created_at: createdAt }))).status).toBe(201);
    expect((await fetch(`${svc.url}/feeds/partner/${retracted}`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } })).status).toBe(200);
    await allArchived(svc.rt);
    await new Promise((r) => setTimeout(r, SETTLE_MS));
  }

  beforeAll(async () => {
    const config = await testConfig(kind, kind === 'aws' ? emulator : undefined, { SYNC_SETTLE_SECONDS: String(SETTLE_MS / 1000), ARCHIVE_MAX_WINDOW: '30d', SYNC_RETENTION_DAYS: '2' });
    svc = await startTestService(await testRuntime(config, kind === 'aws' ? emulator : undefined));
  });
  afterAll(async () => {
    await svc?.stop();
  });

  it('the extent before any report: no data yet, with a watermark', async () => {
    const extent = await getJson(`${svc.url}/reports/archive/extent`);
    expect(extent.body).toEqual({ statusCode: 200, result: { first_created_at: null, last_created_at: null, count: 0, watermark: expect.any(String) } });
  });

  it('a mirror syncing in a loop while reports arrive late and others are retracted ends equal to a full pull', async () => {
    const at = (day: number, hour: number, minute = 0) => new Date(Date.UTC(2026, 10, day, hour, minute)).toISOString();
    let postId = 1;
    const post = async (createdAt: string) => expect((await postReport(svc.url, report(postId++, { created_at: createdAt, title: `r${postId - 1}` }))).status).toBe(201);
    for (const h of [1, 2, 3, 4, 5]) await post(at(20, h));
    for (const h of [1, 2, 3]) await post(at(21, h));
    await allArchived(svc.rt);
    await new Promise((r) => setTimeout(r, SETTLE_MS));

    const mirror: Mirror = new Map();
    const first = await pull('start=2026-11-19T00:00:00Z&end=2026-11-22T23:59:59Z');
    expect(first.status).toBe(200);
    apply(mirror, first.text);
    expect(mirror.size).toBe(8);
    let watermark = first.watermark;
    expect(Date.parse(watermark)).toBeLessThanOrEqual(Date.now() - SETTLE_MS);

    const synced: number[] = [];
    for (let round = 0; round < 4; round++) {
      // Late arrivals into hours the mirror already has, new hours, and retractions.
      await post(at(20, 2, 10 + round));
      await post(at(22, round));
      const del = await fetch(`${svc.url}/feeds/partner/${round + 1}`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } });
      expect(del.status).toBe(200);
      // Every other round syncs while the worker may still be writing.
      if (round % 2 === 1) {
        await allArchived(svc.rt);
        await new Promise((r) => setTimeout(r, SETTLE_MS));
      }
      const sync = await pull(`updated_after=${encodeURIComponent(watermark)}`);
      expect(sync.status).toBe(200);
      synced.push(apply(mirror, sync.text));
      expect(Date.parse(sync.watermark)).toBeGreaterThanOrEqual(Date.parse(watermark));
      watermark = sync.watermark;
    }
    await allArchived(svc.rt);
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const last = await pull(`updated_after=${encodeURIComponent(watermark)}`);
    apply(mirror, last.text);

    const full: Mirror = new Map();
    apply(full, (await pull('start=2026-11-19T00:00:00Z&end=2026-11-22T23:59:59Z')).text);
    expect(full.size).toBe(8 + 8 - 4);
    expect([...mirror.keys()].sort()).toEqual([...full.keys()].sort());
    for (const [pkey, f] of full) expect(mirror.get(pkey), pkey).toEqual(f);
    // The syncs carried the changes, not the archive again.
    expect(synced.reduce((a, b) => a + b, 0) + apply(new Map(), last.text)).toBeLessThan(8 + 2 * 8);

    // Nothing changed since: an empty answer, with the envelope's watermark in JSON.
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const quiet = await pull(`updated_after=${encodeURIComponent(watermark)}&start=2026-11-19T00:00:00Z&end=2026-11-22T23:59:59Z`);
    expect(quiet.text.trim().split('\n').filter((l) => l !== '' && JSON.parse(l).properties.created_at)).toHaveLength(0);
    const json = await getJson(`${svc.url}/reports/archive?updated_after=${encodeURIComponent(watermark)}&geoformat=geojson`, UA);
    expect(json.body).toMatchObject({ statusCode: 200, watermark: expect.any(String), result: { type: 'FeatureCollection', features: [] } });
    expect(json.headers.get('etag')).toBeNull();

    // A sync from the first pull's watermark: retractions as tombstones, count and stats agree.
    const since = encodeURIComponent(first.watermark);
    const changes = await getJson(`${svc.url}/reports/archive?updated_after=${since}&geoformat=geojson`, UA);
    const byStatus = (s: string) => changes.body.result.features.filter((f: any) => f.properties.status === s).map((f: any) => f.properties.pkey).sort();
    expect(byStatus('retracted')).toEqual([pkeyOf(1), pkeyOf(2), pkeyOf(3), pkeyOf(4)]);
    expect(changes.body.result.features.find((f: any) => f.properties.status === 'retracted').properties.title).toBe('');
    expect(byStatus('confirmed')).toHaveLength(8);
    expect((await getJson(`${svc.url}/reports/archive/count?updated_after=${since}`, UA)).body).toMatchObject({ watermark: expect.any(String), result: { count: 12 } });
    expect((await getJson(`${svc.url}/reports/archive/stats?updated_after=${since}`, UA)).body.result.total).toBe(12);
    // A sync reads the parts of the changed hours alone, not the window's.
    const window = await svc.rt.archive.open({ startMs: 0, endMs: Date.UTC(2030, 0), admin: undefined, updatedAfterMs: Date.parse(watermark) - 1 });
    expect(window.parts()).toEqual([]);
    const lastRound = await svc.rt.archive.open({ startMs: 0, endMs: Date.UTC(2030, 0), admin: undefined, updatedAfterMs: Date.parse(first.watermark) });
    const hours = new Set(lastRound.parts().map((p) => p.key.replace(/\/part-.*$/, '')));
    expect([...hours].every((h) => /day=(20\/hour=0[1-4]|22\/hour=0[0-3])$/.test(h)), [...hours].join(' ')).toBe(true);
    // Inside a window: only what was created in it.
    expect((await getJson(`${svc.url}/reports/archive/count?updated_after=${since}&start=2026-11-22T00:00:00Z&end=2026-11-22T23:59:59Z`, UA)).body.result.count).toBe(4);

    const extent = await getJson(`${svc.url}/reports/archive/extent`);
    expect(extent.body.result).toMatchObject({ first_created_at: '2026-11-20T02:10:00.000Z', last_created_at: '2026-11-22T03:00:00.000Z', count: 12 });
  });

  it('refuses bad instants and combinations with a 400 naming the parameter', async () => {
    const bad = async (q: string, field: string) => {
      const res = await getJson(`${svc.url}/reports/archive?${q}`, UA);
      expect(res.status, q).toBe(400);
      expect(res.body.details.map((d: any) => d.field), q).toContain(field);
    };
    await bad('updated_after=yesterday', 'updated_after');
    await bad('updated_after=2026-11-21', 'updated_after');
    await bad('updated_after=2026-13-01T00:00:00Z', 'updated_after');
    await bad(`updated_after=${encodeURIComponent(new Date(Date.now() + 3_600_000).toISOString())}`, 'updated_after');
    // Without a window, the changes may span ARCHIVE_MAX_WINDOW (30 days here) at most.
    await bad('updated_after=2020-01-01T00:00:00Z', 'updated_after');
    await bad(`updated_after=${encodeURIComponent(new Date().toISOString())}&start=2026-11-21T00:00:00Z`, 'end');
    await bad(`updated_after=${encodeURIComponent(new Date().toISOString())}&limit=10&format=parquet`, 'limit');
    await bad(`updated_after=${encodeURIComponent(new Date().toISOString())}&cursor=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA`, 'cursor');
    expect((await getJson(`${svc.url}/reports/archive/count?updated_after=x`, UA)).status).toBe(400);
    expect((await getJson(`${svc.url}/reports/archive/extent?start=x`, UA)).status).toBe(400);
    // A sync's retractions are its tombstones: asked to leave them out, it says so rather than send them anyway.
    const now = encodeURIComponent(new Date(Date.now() - 60_000).toISOString());
    await bad(`updated_after=${now}&include_retracted=false`, 'include_retracted');
    expect((await getJson(`${svc.url}/reports/archive/count?updated_after=${now}&include_retracted=false`, UA)).status).toBe(400);
    expect((await getJson(`${svc.url}/reports/archive?updated_after=${now}&include_retracted=true`, UA)).status).toBe(200);
    // With a window, an updated_after older than the change logs kept (2 days here) is a 410 (below).
    expect((await getJson(`${svc.url}/reports/archive/count?updated_after=2020-01-01T00:00:00Z&start=2026-11-21T00:00:00Z&end=2026-11-21T23:59:59Z`, UA)).status).toBe(410);
  });

  it('reports re-tagged by reprocess show in the next sync (and those left as they were do not), in a sync of the area they left too', async () => {
    const window = 'start=2026-10-05T00:00:00Z&end=2026-10-05T23:59:59Z';
    const places = { 'City of San Fernando': { lng: 120.6898, lat: 15.0286 }, 'Quezon Memorial Circle': { lng: 121.0497, lat: 14.6516 } };
    for (const [i, location] of Object.values(places).entries()) {
      expect((await postReport(svc.url, report(700 + i, { created_at: `2026-10-05T0${i}:30:00Z`, location }))).status).toBe(201);
    }
    await allArchived(svc.rt);
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const mirror: Mirror = new Map();
    const first = await pull(window);
    apply(mirror, first.text);
    expect([...mirror.values()].map((f) => f.properties.tags.instance_region_code).sort()).toEqual(['PH-PG', 'PH-QC']);
    // Mirrors of one area each: they keep the reports tagged with it.
    const areas = ['PH-PG', 'PH-QC'] as const;
    const ofArea = Object.fromEntries(areas.map((city) => [city, new Map() as Mirror])) as Record<(typeof areas)[number], Mirror>;
    const applyIn = (city: string, m: Mirror, text: string) => {
      apply(m, text);
      for (const [pkey, f] of m) if (f.properties.tags.instance_region_code !== city) m.delete(pkey);
    };
    for (const city of areas) applyIn(city, ofArea[city], (await pull(`${window}&admin=${city}`)).text);
    expect(ofArea['PH-PG'].has(pkeyOf(700))).toBe(true);

    // New boundaries where Pampanga is a small square away from San Fernando, without its
    // barangays: its report moves to no city, Quezon City's stays.
    const shipped = await defaultBoundaries();
    const square = [[[120.5, 15.2], [120.51, 15.2], [120.51, 15.21], [120.5, 15.21], [120.5, 15.2]]];
    const smallPampanga = {
      label: 'Pampanga a square',
      cities: {
        ...shipped.cities,
        features: shipped.cities.features.map((f) => (f.properties.code === 'PH-PG' ? { ...f, geometry: { type: 'Polygon' as const, coordinates: square } } : f)),
      },
      localAreas: { ...shipped.localAreas, features: shipped.localAreas.features.filter((f) => f.properties.city_code === 'PH-QC') },
    };
    await svc.rt.boundaries.publish(smallPampanga);
    const logsBefore = await keysUnder(svc.rt, CHANGES_PREFIX);
    const done = await reprocess(svc.rt, { fromMs: Date.parse('2026-10-05T00:00:00Z'), toMs: Date.parse('2026-10-05T23:59:59Z'), dryRun: false });
    expect(done.moves).toEqual({ 'PH-PG -> null': 1 });
    // The moved report is logged before its new part and again once it is durable: two logs
    // (more if a PUT took longer than half the settling time), each naming it alone.
    const written = (await keysUnder(svc.rt, CHANGES_PREFIX)).filter((k) => !logsBefore.includes(k));
    expect(written.length).toBeGreaterThanOrEqual(2);
    for (const key of written) {
      expect(JSON.parse(gunzipSync((await svc.rt.store.get(key))!.body).toString('utf8'))).toEqual({ v: 1, reports: [[pkeyOf(700), Date.parse('2026-10-05T00:30:00Z'), 'PH-PG']] });
    }
    await new Promise((r) => setTimeout(r, SETTLE_MS));

    const sync = await pull(`updated_after=${encodeURIComponent(first.watermark)}&${window}`);
    expect(sync.status).toBe(200);
    expect(apply(mirror, sync.text)).toBe(1);
    expect(JSON.parse(sync.text.trim()).properties).toMatchObject({ pkey: pkeyOf(700), tags: { instance_region_code: null, local_area_id: null } });
    const full: Mirror = new Map();
    apply(full, (await pull(window)).text);
    expect(mirror).toEqual(full);
    // The sync of Pampanga answers the report that left it, with its new tags; Quezon City's, nothing.
    const left = await pull(`updated_after=${encodeURIComponent(first.watermark)}&${window}&admin=PH-PG`);
    expect(left.text.trim().split('\n').map((l) => [JSON.parse(l).properties.pkey, JSON.parse(l).properties.tags.instance_region_code])).toEqual([[pkeyOf(700), null]]);
    expect((await pull(`updated_after=${encodeURIComponent(first.watermark)}&${window}&admin=PH-QC`)).text.trim()).toBe('');
    for (const city of areas) {
      applyIn(city, ofArea[city], (await pull(`updated_after=${encodeURIComponent(first.watermark)}&${window}&admin=${city}`)).text);
      const fullOfArea: Mirror = new Map();
      apply(fullOfArea, (await pull(`${window}&admin=${city}`)).text);
      expect(ofArea[city], city).toEqual(fullOfArea);
    }
  });

  it('change logs older than SYNC_RETENTION_DAYS go with the scheduled job; a sync from before then is a 410 that says to pull in full', async () => {
    const DAY = 86_400_000;
    const logName = (ms: number) => `${CHANGES_PREFIX}${String(ms).padStart(15, '0')}-${ulid()}.json`;
    const logs = () => keysUnder(svc.rt, CHANGES_PREFIX);
    const now = Date.now();
    const old = logName(now - 3 * DAY);
    const kept = logName(now - DAY);
    for (const key of [old, kept]) await svc.rt.store.put(key, JSON.stringify({ v: 1, reports: [['partner-999', Date.parse('2026-11-21T00:00:00Z')]] }));
    const before = await logs();
    expect(before).toContain(old);

    const result = (await compaction.run(svc.rt)) as { changeLogs: { deleted: number; prunedBeforeMs: number } };
    expect(result.changeLogs.deleted).toBeGreaterThanOrEqual(1);
    expect(result.changeLogs.prunedBeforeMs).toBeGreaterThan(now - 2 * DAY - 60_000);
    const after = await logs();
    expect(after).not.toContain(old);
    expect(after).toContain(kept);
    // Only what was older than the retention went.
    expect(before.filter((k) => !after.includes(k)).every((k) => Number(k.slice(CHANGES_PREFIX.length, CHANGES_PREFIX.length + 15)) < now - 2 * DAY + 60_000)).toBe(true);

    const tooOld = encodeURIComponent(new Date(now - 2 * DAY - 3_600_000).toISOString());
    for (const path of ['/reports/archive?format=ndjson&', '/reports/archive/count?', '/reports/archive/stats?', '/reports/archive?']) {
      const gone = await getJson(`${svc.url}${path}updated_after=${tooOld}`, UA);
      expect([path, gone.status]).toEqual([path, 410]);
      expect(gone.body).toMatchObject({ statusCode: 410, error: 'Gone', details: [{ in: 'query', field: 'updated_after' }] });
      expect(gone.body.message).toMatch(/pull the window in full/);
    }
    const recent = encodeURIComponent(new Date(now - 2 * DAY + 3_600_000).toISOString());
    expect((await getJson(`${svc.url}/reports/archive/count?updated_after=${recent}`, UA)).status).toBe(200);

    // A process kept to a longer retention still refuses what pruning already took.
    const longer = await startTestService(await testRuntime({ ...svc.rt.config, syncRetentionMs: 30 * DAY }, kind === 'aws' ? emulator : undefined), { worker: false, reconcile: false });
    try {
      expect((await getJson(`${longer.url}/reports/archive/count?updated_after=${tooOld}`, UA)).status).toBe(410);
      expect((await getJson(`${longer.url}/reports/archive/count?updated_after=${recent}`, UA)).status).toBe(200);
    } finally {
      await longer.stop();
    }
  });

  it('a change log that cannot be read (cut short on a disk): a sync from before it is a 410 that says so, one from after it is answered', async () => {
    const HOUR = 3_600_000;
    const at = Date.now() - 5 * HOUR;
    const key = `${CHANGES_PREFIX}${String(at).padStart(15, '0')}-${ulid()}.json.gz`;
    const whole = gzipSync(JSON.stringify({ v: 1, reports: [['partner-998', Date.parse('2026-11-21T00:00:00Z')]] }));
    await svc.rt.store.put(key, whole.subarray(0, whole.length - 6));
    try {
      const before = encodeURIComponent(new Date(at - HOUR).toISOString());
      for (const path of ['/reports/archive?format=ndjson&', '/reports/archive/count?', '/reports/archive/stats?']) {
        const gone = await getJson(`${svc.url}${path}updated_after=${before}`, UA);
        expect([path, gone.status]).toEqual([path, 410]);
        expect(gone.body).toMatchObject({ statusCode: 410, error: 'Gone', details: [{ in: 'query', field: 'updated_after', message: expect.stringMatching(/cannot be read/) }] });
        expect(gone.body.message).toMatch(/^The change history before \S+ cannot be read: pull the window in full/);
      }
      const after = encodeURIComponent(new Date(at + 1).toISOString());
      expect((await getJson(`${svc.url}/reports/archive/count?updated_after=${after}`, UA)).status).toBe(200);
    } finally {
      await svc.rt.store.delete([key]);
    }
  });

  it('a full pull walked in pages, then a sync from its last page\'s watermark, misses nothing that changed between its pages', async () => {
    const window = 'start=2026-11-17T00:00:00Z&end=2026-11-17T23:59:59Z';
    for (let i = 0; i < 5; i++) expect((await postReport(svc.url, report(900 + i, { created_at: `2026-11-17T0${i}:15:00Z` }))).status).toBe(201);
    await allArchived(svc.rt);
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const mirror: Mirror = new Map();
    const watermarks: string[] = [];
    let url: string | undefined = `${svc.url}/reports/archive?format=ndjson&limit=2&${window}`;
    while (url) {
      const res = await fetch(url, { headers: UA });
      expect(res.status).toBe(200);
      watermarks.push(res.headers.get('x-archive-watermark')!);
      apply(mirror, await res.text());
      url = /<([^>]+)>; rel="next"/.exec(res.headers.get('link') ?? '')?.[1];
      if (watermarks.length === 1) {
        // Between pages: a late report, and the retraction of one the first page sent.
        await lateAndRetracted(905, '2026-11-17T09:00:00Z', 904);
      }
    }
    expect(watermarks).toHaveLength(3);
    // Every page answers the first page's watermark: the later pages left out what came after it.
    expect(new Set(watermarks).size).toBe(1);
    apply(mirror, (await pull(`updated_after=${encodeURIComponent(watermarks.at(-1)!)}&${window}`)).text);
    const full: Mirror = new Map();
    apply(full, (await pull(window)).text);
    expect([...mirror.keys()].sort()).toEqual([pkeyOf(900), pkeyOf(901), pkeyOf(902), pkeyOf(903), pkeyOf(905)]);
    expect(mirror).toEqual(full);
  });

  it('a sync walked in pages holds the changes up to its first page\'s watermark, while more arrive between pages', async () => {
    const window = 'start=2026-11-18T00:00:00Z&end=2026-11-18T23:59:59Z';
    const since = (await pull(window)).watermark;
    for (let i = 0; i < 5; i++) expect((await postReport(svc.url, report(800 + i, { created_at: `2026-11-18T0${i}:15:00Z` }))).status).toBe(201);
    await allArchived(svc.rt);
    await new Promise((r) => setTimeout(r, SETTLE_MS));

    const mirror: Mirror = new Map();
    const pages: string[][] = [];
    const watermarks = new Set<string>();
    let url: string | undefined = `${svc.url}/reports/archive?geoformat=geojson&limit=2&updated_after=${encodeURIComponent(since)}&${window}`;
    while (url) {
      const res = await fetch(url, { headers: UA });
      expect(res.status).toBe(200);
      const body = (await res.json()) as any;
      expect(body.watermark).toBe(res.headers.get('x-archive-watermark'));
      watermarks.add(body.watermark);
      pages.push(body.result.features.map((f: any) => f.properties.pkey));
      apply(mirror, body.result.features.map((f: any) => JSON.stringify(f)).join('\n'));
      url = /<([^>]+)>; rel="next"/.exec(res.headers.get('link') ?? '')?.[1];
      if (pages.length === 1) {
        // Between pages: a late report and a retraction, visible to any answer from now on.
        await lateAndRetracted(805, '2026-11-18T09:00:00Z', 800);
      }
    }
    // One set of changes, newest first, each once, all pages under the first page's watermark.
    expect(pages).toEqual([[pkeyOf(804), pkeyOf(803)], [pkeyOf(802), pkeyOf(801)], [pkeyOf(800)]]);
    expect(watermarks.size).toBe(1);
    const [watermark] = [...watermarks];
    // The page that met the retraction shows it as a tombstone; the next sync from the watermark brings the rest.
    const next = await pull(`updated_after=${encodeURIComponent(watermark!)}&${window}`);
    expect(next.text.trim().split('\n').map((l) => [JSON.parse(l).properties.pkey, JSON.parse(l).properties.status])).toEqual([
      [pkeyOf(805), 'confirmed'],
      [pkeyOf(800), 'retracted'],
    ]);
    apply(mirror, next.text);
    const full: Mirror = new Map();
    apply(full, (await pull(window)).text);
    expect([...mirror.keys()].sort()).toEqual([pkeyOf(801), pkeyOf(802), pkeyOf(803), pkeyOf(804), pkeyOf(805)]);
    expect(mirror).toEqual(full);

    // A sync's cursor is bound to its updated_after like any filter.
    const first = await fetch(`${svc.url}/reports/archive?limit=1&updated_after=${encodeURIComponent(since)}&${window}`, { headers: UA });
    const cursor = new URL(/<([^>]+)>; rel="next"/.exec(first.headers.get('link') ?? '')![1]!).searchParams.get('cursor')!;
    const other = await getJson(`${svc.url}/reports/archive?limit=1&updated_after=${encodeURIComponent(watermark!)}&${window}&cursor=${cursor}`, UA);
    expect(other.status).toBe(400);
    expect(other.body.details.map((d: any) => d.field)).toEqual(['cursor']);
  });
});
