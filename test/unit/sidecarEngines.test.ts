// The sidecars answer two questions in JavaScript that DuckDB also answers from the parts:
// which reports a window keeps (the per-report index of ready texts) and how many fall in each
// bucket (stats sidecars). Both must agree with the SQL to the report, so each is compared with
// DuckDB over the same part on random reports, windows, cities, bboxes, intervals and offsets.
import fs from 'node:fs/promises';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { writeParquet } from '../../src/archive/partWriter.js';
import type { ArchiveRow } from '../../src/archive/partColumns.js';
import { readReadyIndex, readyReads, readyRunsOf, sidecarCounter, statsSidecarOf, StoredSection, writeReadyTexts } from '../../src/archive/sidecars/index.js';
import { filteredRows, ITEM_SQL } from '../../src/archive/sql.js';
import { bucketer, STATS_BY, STATS_INTERVALS, StatsTally, statsSql, type StatsSpec } from '../../src/archive/stats.js';
import { sqlString } from '../../src/archive/duckdb.js';
import { random, randomFilter, randomReports } from '../support/randomReports.js';
import { scratch } from '../support/scratch.js';

const HOUR = 3_600_000;
/** Across a month's end and a Monday in Manila (2025-06-02 starts at 2025-06-01T16:00Z). */
const FROM = Date.UTC(2025, 4, 31, 10);
const SPAN = 36 * HOUR;
const OFFSETS = [0, 480, -330, 345, -720, 840, 60];
const WINDOWS = 150;

const work = scratch('sidecar-engines-');
let rows: ArchiveRow[];
let part: string;
let ready: string;
let stats: string;

beforeAll(async () => {
  rows = randomReports(random(11), 1_500, FROM, SPAN);
  part = path.join(work.dir, 'part.parquet');
  await writeParquet(work.db, rows, part);
  ready = path.join(work.dir, 'part.ready');
  await writeReadyTexts(work.db, part, ready);
  stats = path.join(work.dir, 'part.stats');
  await fs.writeFile(stats, (await statsSidecarOf(work.db, part))!);
}, 60_000);

describe('the ready texts\' selection', () => {
  it('keeps exactly the reports, bboxes and bytes the SQL filters keep', async () => {
    const next = random(12);
    const hours = readReadyIndex(ready).index.hours.map((h) => h.hourMs);
    for (let w = 0; w < WINDOWS; w++) {
      const filter = randomFilter(next, rows, FROM, SPAN);
      const shape = (['geojson', 'csv', 'topojson'] as const)[w % 3]!;
      // The separators ready texts serve: NDJSON's newlines or a FeatureCollection's commas and newlines.
      const separator = shape === 'topojson' ? ',' : shape === 'geojson' && next() < 0.5 ? ',\n' : '\n';
      const bound = filteredRows([part], filter, true);
      const sql = await work.db.withConnection(async (conn) => {
        const reader = await conn.runAndReadAll(
          `SELECT epoch_ms(created_at) // ${HOUR} * ${HOUR}, count(*)::INTEGER, min(lng), min(lat), max(lng), max(lat),
              encode(string_agg(${ITEM_SQL[shape]}, ${sqlString(separator)} ORDER BY created_at DESC, pkey DESC))
            FROM ${bound.sql} GROUP BY 1`,
          bound.values,
          bound.types,
        );
        return new Map((reader.getRowsJS() as [bigint, number, number, number, number, number, Uint8Array][]).map((r) => [Number(r[0]), { count: r[1], bbox: [r[2], r[3], r[4], r[5]], text: Buffer.from(r[6]).toString('utf8') }]));
      });
      const runs = readyRunsOf(ready, hours, filter);
      const label = `window ${w}: ${JSON.stringify(filter)}`;
      for (const hourMs of hours) {
        const run = runs.get(hourMs)!;
        const want = sql.get(hourMs);
        const count = run.hour ? (run.selection?.count ?? run.hour.count) : 0;
        expect(count, label).toBe(want?.count ?? 0);
        expect(run.bbox, label).toEqual(want?.bbox);
        const chunks: Buffer[] = [];
        for (const read of readyReads([run], shape, separator)) for await (const c of read()) chunks.push(Buffer.from(c instanceof StoredSection ? c.plain() : c));
        const text = Buffer.concat(chunks).toString('utf8');
        expect(text, label).toBe(want?.text ?? '');
      }
    }
  }, 120_000);
});

describe('the stats sidecars\' count', () => {
  it('counts what statsSql counts, for every interval, grouping and offset', async () => {
    const next = random(13);
    for (let w = 0; w < WINDOWS; w++) {
      const filter = randomFilter(next, rows, FROM, SPAN);
      const spec: StatsSpec = { interval: STATS_INTERVALS[w % STATS_INTERVALS.length]!, by: STATS_BY[Math.floor(w / STATS_INTERVALS.length) % STATS_BY.length]!, offsetMinutes: OFFSETS[w % OFFSETS.length]! };
      const js = new StatsTally();
      sidecarCounter(filter, spec.by, bucketer(spec), (b, k, n) => js.add(b, k, n))(stats);
      const duck = new StatsTally();
      const bound = filteredRows([part], filter, true);
      await work.db.withConnection(async (conn) => {
        const reader = await conn.runAndReadAll(statsSql(bound.sql, spec), bound.values, bound.types);
        for (const row of reader.getRowObjectsJS()) duck.add(Number(row.bucket_ms), row.key === null ? null : String(row.key), Number(row.n));
      });
      expect(js.rows(spec.offsetMinutes), `window ${w}: ${JSON.stringify({ filter, spec })}`).toEqual(duck.rows(spec.offsetMinutes));
    }
  }, 120_000);
});

describe('buckets before the epoch', () => {
  it('puts a report of 1970-01-01 in the bucket holding it, whichever engine counts it', async () => {
    // The first hour of 1970 (UTC): its week began on Monday 1969-12-29, and an hour west of
    // Greenwich its day is still 31 December.
    const early = randomReports(random(14), 30, 0, HOUR);
    const file = path.join(work.dir, 'early.parquet');
    await writeParquet(work.db, early, file);
    const cases: [StatsSpec, number][] = [
      [{ interval: 'week', by: 'none', offsetMinutes: 0 }, Date.UTC(1969, 11, 29)],
      [{ interval: 'day', by: 'none', offsetMinutes: -60 }, Date.UTC(1969, 11, 31, 1)],
      [{ interval: 'week', by: 'city', offsetMinutes: 480 }, Date.UTC(1969, 11, 28, 16)],
    ];
    for (const [spec, bucketMs] of cases) {
      const buckets = await work.db.withConnection(async (conn) => {
        const bound = filteredRows([file], { startMs: 0, endMs: HOUR, admin: undefined }, true);
        const reader = await conn.runAndReadAll(statsSql(bound.sql, spec), bound.values, bound.types);
        return [...new Set(reader.getRowObjectsJS().map((row) => Number(row.bucket_ms)))];
      });
      expect(buckets, JSON.stringify(spec)).toEqual([bucketMs]);
      const of = bucketer(spec);
      for (const row of early) {
        const got = of(row.created_at_ms * 1000);
        expect(got.bucketMs, JSON.stringify(spec)).toBe(bucketMs);
        expect(got.fromUs <= row.created_at_ms * 1000 && row.created_at_ms * 1000 < got.toUs).toBe(true);
      }
    }
  });
});
