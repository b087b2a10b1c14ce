// Stats counted from the parts' stats sidecars must be the counts DuckDB gives over the parts
// themselves: for compacted days, single-part hours, hours with several parts, days holding a
// retracted report, window edges cutting hours, every interval, grouping, offset and filter.
// And a retraction leaves the counts at once and for good: before the purge (the sidecar still
// holds the report) and after it (the purge rewrites the sidecar with the part).
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/shared/log.js';
import { compact } from '../../src/ops/compact.js';
import { purgeRetracted } from '../../src/ops/purge.js';
import { filteredRows } from '../../src/archive/sql.js';
import { StatsTally, statsSql, STATS_BY, STATS_INTERVALS, type StatsRow, type StatsSpec } from '../../src/archive/stats.js';
import { statsKeyOf } from '../../src/archive/sidecars/index.js';
import type { WindowQuery } from '../../src/archive/query.js';
import type { Runtime } from '../../src/main/runtime.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { allArchived, API_KEY, BACKENDS, eventually, getJson, HAS_SHARED_PH, keysUnder, postReport, report, SHARED_PH_MISSING, startTestService, testConfig, testRuntime, type TestService } from '../support/env.js';
import { loadPsaBoundaries } from '../support/sharedData.js';

if (!HAS_SHARED_PH) console.warn(SHARED_PH_MISSING);

let emulator: Emulator;
beforeAll(async () => {
  emulator = await startEmulator();
});
afterAll(async () => {
  await emulator.stop();
});

const HOUR = 3_600_000;
const DAY1 = Date.UTC(2025, 5, 1);
const DAY2 = DAY1 + 24 * HOUR;
const DAY3 = DAY2 + 24 * HOUR;

/** Deterministic points around Quezon City and Pampanga (some fall outside every barangay). */
function* points(seed: number): Generator<{ lat: number; lng: number }> {
  let s = seed;
  const next = () => (s = (s * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648;
  for (;;) {
    yield next() < 0.6 ? { lat: 14.59 + next() * 0.19, lng: 121.0 + next() * 0.13 } : { lat: 14.9 + next() * 0.35, lng: 120.4 + next() * 0.45 };
  }
}

/** created_at values: spread over the three days, plus reports on the edges of buckets and windows. */
function times(): number[] {
  const out: number[] = [];
  for (let i = 0; i < 180; i++) out.push(DAY1 + Math.floor(((i * 7_919) % 180) * (3 * 24 * HOUR) / 180) + ((i * 104_729) % HOUR));
  // Local midnight in Manila (16:00Z) and in India (18:30Z), the millisecond before, hours' edges.
  out.push(DAY1 + 16 * HOUR, DAY1 + 16 * HOUR - 1, DAY2 + 18 * HOUR + 30 * 60_000, DAY2 + 18 * HOUR + 30 * 60_000 - 1, DAY2 + 5 * HOUR, DAY3 - 1, DAY3);
  // The edges of the windows that cut hours, and a millisecond outside each.
  for (const w of [CUT, IN_DAY1, IN_HOUR]) out.push(w.startMs, w.startMs - 1, w.endMs, w.endMs + 1);
  return out;
}

// Windows cutting hours: across the three days, inside compacted day 1, inside a single-part hour of day 2.
const CUT = { startMs: DAY1 + 3 * HOUR + 17 * 60_000 + 42_123, endMs: DAY3 + 19 * HOUR + 2 * 60_000 + 5_456 };
const IN_DAY1 = { startMs: DAY1 + 2 * HOUR + 5 * 60_000 + 7, endMs: DAY1 + 20 * HOUR + 33 * 60_000 + 9 };
const IN_HOUR = { startMs: DAY2 + 5 * HOUR + 100, endMs: DAY2 + 5 * HOUR + 40 * 60_000 };
const ALL = times();
/** The post_id of the first report created in [fromMs, toMs) (reports are posted in the order of ALL). */
const idIn = (fromMs: number, toMs: number) => 20_000 + ALL.findIndex((ms) => ms >= fromMs && ms < toMs);

/** The counts straight from DuckDB over every part of the window (de-duplicated, filtered as the archive does). */
async function duckdbStats(rt: Runtime, query: WindowQuery, spec: StatsSpec): Promise<StatsRow[]> {
  const window = await rt.archive.open(query);
  const files = await Promise.all(window.parts().map((p) => rt.cache.localFile(p)));
  const tally = new StatsTally();
  if (files.length > 0) {
    const bound = filteredRows(files, window.query);
    await rt.db.withConnection(async (conn) => {
      const reader = await conn.runAndReadAll(statsSql(bound.sql, spec), bound.values, bound.types);
      for (const row of reader.getRowObjectsJS()) tally.add(Number(row.bucket_ms), row.key === null ? null : String(row.key), Number(row.n));
    });
  }
  return tally.rows(spec.offsetMinutes);
}

describe.skipIf(!HAS_SHARED_PH).each(BACKENDS)('stats from the parts sidecars (%s)', (kind) => {
  let svc: TestService;
  let postId = 20_000;
  const post = async (ms: number, where: { lat: number; lng: number }) => {
    const res = await postReport(svc.url, report(postId++, { created_at: new Date(ms).toISOString(), location: where }));
    expect(res.status).toBe(201);
  };

  beforeAll(async () => {
    const rt = await testRuntime(await testConfig(kind, kind === 'aws' ? emulator : undefined), kind === 'aws' ? emulator : undefined);
    await rt.boundaries.publish(await loadPsaBoundaries());
    svc = await startTestService(rt);
    const where = points(7);
    for (let i = 0; i < ALL.length; i += 16) await Promise.all(ALL.slice(i, i + 16).map((ms) => post(ms, where.next().value!)));
    await allArchived(rt, 90_000);
    // Day 1 and day 3 compacted into one part each; day 2's morning hours into one part each.
    await compact(rt, { fromMs: DAY1, toMs: DAY3 + 24 * HOUR - 1, closedBeforeMs: DAY2 + 12 * HOUR });
    await compact(rt, { fromMs: DAY3, toMs: DAY3 + 24 * HOUR - 1, closedBeforeMs: Date.now() });
    // A second part for some of day 2's hours, and a late report beside day 3's compacted part.
    for (const h of [1, 2, 14, 15]) await post(DAY2 + h * HOUR + 1_234, where.next().value!);
    await allArchived(rt);
    await post(DAY3 + 7 * HOUR + 9, where.next().value!);
    await allArchived(rt);
    // Retracted, not yet purged: one in a single-part hour of day 2, one in compacted day 3.
    for (const id of [idIn(DAY2 + 4 * HOUR, DAY2 + 12 * HOUR), idIn(DAY3, DAY3 + 19 * HOUR)]) {
      expect((await fetch(`${svc.url}/feeds/partner/${id}`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } })).status).toBe(200);
    }
  }, 120_000);
  afterAll(async () => svc?.stop());

  it('writes a sidecar beside every part, and deletes it with its part', async () => {
    const parts = (await keysUnder(svc.rt, 'reports/v1/')).filter((k) => k.endsWith('.parquet'));
    const sidecars = await keysUnder(svc.rt, 'stats/');
    expect(sidecars.sort()).toEqual(parts.map(statsKeyOf).sort());
    // The store holds both kinds the sidecars must not paper over: several parts in one hour, a day and its hours.
    const window = await svc.rt.archive.open({ startMs: DAY1, endMs: DAY3 + 24 * HOUR - 1, admin: undefined });
    expect(window.days.some((d) => d.whole.length === 0 && d.hours.some((h) => h.parts.length > 1))).toBe(true);
    expect(window.days.some((d) => d.whole.length === 0 && d.hours.some((h) => h.parts.length === 1))).toBe(true);
    expect(window.days.some((d) => d.whole.length === 1 && d.hours.length > 0)).toBe(true);
  });

  it('counts what DuckDB counts over the parts, for every interval, grouping, offset, window and filter', async () => {
    const windows: Pick<WindowQuery, 'startMs' | 'endMs' | 'admin' | 'bbox'>[] = [
      { startMs: DAY1, endMs: DAY3 + 24 * HOUR - 1, admin: undefined },
      { ...CUT, admin: undefined },
      { ...IN_DAY1, admin: undefined },
      { ...IN_HOUR, admin: undefined },
      { ...CUT, admin: ['PH-QC'] },
      { ...CUT, admin: ['PH-XX'] },
      { ...IN_DAY1, admin: ['PH-QC', 'PH-PG'] },
      { ...CUT, admin: undefined, bbox: [120.5, 14.6, 121.05, 15.1] },
      { startMs: DAY1, endMs: DAY3 + 24 * HOUR - 1, admin: ['PH-PG'], bbox: [120.3, 14.5, 121.2, 15.3] },
    ];
    // UTC, Manila, India and a negative offset off the hour, taken in turn.
    const offsets = [0, 480, 330, -225];
    let compared = 0;
    let turn = 0;
    for (const w of windows) {
      for (const interval of STATS_INTERVALS) {
        for (const by of STATS_BY) {
          const spec = { interval, by, offsetMinutes: offsets[turn++ % offsets.length]! };
          const query = { ...w };
          const got = await (await svc.rt.archive.open(query)).stats(spec);
          expect(got, JSON.stringify({ w, spec })).toEqual(await duckdbStats(svc.rt, query, spec));
          compared += got.length;
        }
      }
    }
    expect(compared).toBeGreaterThan(1_000);
  });

  it('counts tombstones and syncs as DuckDB does', async () => {
    const spec: StatsSpec = { interval: 'day', by: 'local_area', offsetMinutes: 480 };
    const query = { ...CUT, admin: undefined, includeRetracted: true };
    const got = await (await svc.rt.archive.open(query)).stats(spec);
    expect(got).toEqual(await duckdbStats(svc.rt, query, spec));
    const plain = await (await svc.rt.archive.open({ ...CUT, admin: undefined })).stats(spec);
    expect(got.reduce((n, r) => n + r.count, 0)).toBe(plain.reduce((n, r) => n + r.count, 0) + 2);
  });

  it('a retraction leaves the counts at once (the sidecar still holds it) and after the purge (its sidecar is rewritten)', async () => {
    const W = `start=${new Date(DAY1).toISOString()}&end=${new Date(DAY1 + 24 * HOUR - 1).toISOString()}`;
    const stats = async () => (await getJson(`${svc.url}/reports/archive/stats?${W}&interval=hour&by=local_area`)).body.result;
    const count = async () => (await getJson(`${svc.url}/reports/archive/count?${W}`)).body.result.count;
    const before = await stats();
    expect(before.total).toBe(await count());
    const day1 = { startMs: DAY1, endMs: DAY1 + 24 * HOUR - 1, admin: undefined };
    const spec: StatsSpec = { interval: 'hour', by: 'local_area', offsetMinutes: 0 };
    expect(before.rows).toEqual(await duckdbStats(svc.rt, day1, spec));
    // One more retraction in the compacted day: gone at once, its part (and sidecar) unchanged.
    expect((await fetch(`${svc.url}/feeds/partner/${idIn(DAY1, DAY2)}`, { method: 'DELETE', headers: { 'X-Api-Key': API_KEY } })).status).toBe(200);
    const after = await stats();
    expect(after.total).toBe(before.total - 1);
    expect(after.total).toBe(await count());
    expect(after.rows).toEqual(await duckdbStats(svc.rt, day1, spec));
    // The purge rewrites the parts holding retracted reports (and marks them purged): the day is
    // counted from its sidecar again, which must no longer hold them.
    expect((await purgeRetracted(svc.rt)).purged).toBe(3);
    const purged = await stats();
    expect(purged.total).toBe(after.total);
    expect(purged.rows).toEqual(after.rows);
    expect(purged.rows).toEqual(await duckdbStats(svc.rt, day1, spec));
    const cut = await (await svc.rt.archive.open({ ...CUT, admin: undefined })).stats({ interval: 'week', by: 'city', offsetMinutes: 480 });
    expect(cut).toEqual(await duckdbStats(svc.rt, { ...CUT, admin: undefined }, { interval: 'week', by: 'city', offsetMinutes: 480 }));
  });
});

describe('a stats sidecar cut short on a disk', () => {
  let svc: TestService | undefined;
  afterAll(async () => svc?.stop());

  it('is counted from its part: the same counts, stats and extent, never a 500', async () => {
    const logged: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        logged.push(...chunk.toString('utf8').split('\n').filter(Boolean));
        done();
      },
    });
    svc = await startTestService(await testRuntime(await testConfig('embedded'), undefined, { log: createLogger('error', sink) }));
    const ids = [1, 2, 3, 4, 5, 6, 7, 8];
    for (const id of ids) expect((await postReport(svc.url, report(30_000 + id, { created_at: new Date(DAY1 + id * HOUR + id * 61_000).toISOString() }))).status).toBe(201);
    await allArchived(svc.rt);
    await compact(svc.rt, { fromMs: DAY1, toMs: DAY2 - 1, closedBeforeMs: Date.now() });
    const [part, ...more] = (await keysUnder(svc.rt, 'reports/v1/')).filter((k) => k.endsWith('.parquet'));
    expect(more).toEqual([]);
    const window = `start=${new Date(DAY1).toISOString()}&end=${new Date(DAY2 - 1).toISOString()}`;
    const answers = async () => {
      const out: Record<string, unknown> = {};
      for (const p of [`/reports/archive/count?${window}`, `/reports/archive/stats?interval=hour&by=city&${window}`, '/reports/archive/extent']) {
        const res = await getJson(`${svc!.url}${p}`);
        expect([p, res.status]).toEqual([p, 200]);
        // The watermark is the instant asked at: the rest is what the parts hold.
        delete res.body.result.watermark;
        out[p] = res.body;
      }
      return out;
    };
    const before = await answers();
    expect((before[`/reports/archive/count?${window}`] as { result: { count: number } }).result.count).toBe(ids.length);
    const sidecar = (await svc.rt.store.get(statsKeyOf(part!)))!.body;
    // Cut once, in its columns (a window's answers once built are kept, and would not read it again).
    for (const cut of [100]) {
      await svc.rt.store.put(statsKeyOf(part!), sidecar.subarray(0, cut));
      const told = logged.length;
      expect(await answers(), `cut at ${cut} of ${sidecar.length}`).toEqual(before);
      // Counted from the part, and the operators told which sidecar to delete.
      const toldSince = () => logged.slice(told).map((l) => JSON.parse(l) as { part?: string; msg: string });
      await eventually(async () => (toldSince().some((l) => l.part === part && /^a stats sidecar cannot be read/.test(l.msg)) ? true : undefined), 5_000, 'the cut sidecar logged');
    }
  });
});
