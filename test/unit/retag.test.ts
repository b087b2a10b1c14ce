// Bulk re-tagging: the order in which it tags a part's points (every row in the window once,
// nearby points together), and the part it writes (each row's new tags, whatever that order).
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { sqlString } from '../../src/archive/duckdb.js';
import type { ArchiveRow } from '../../src/archive/partColumns.js';
import { writeParquet } from '../../src/archive/partWriter.js';
import { retagParts, spatialOrder } from '../../src/archive/retag.js';
import { defaultBoundaries } from '../../src/boundaries/defaultBoundaries.js';
import { Tagger } from '../../src/boundaries/tagger.js';
import { random, randomReports } from '../support/randomReports.js';
import { scratch } from '../support/scratch.js';

describe('spatial order', () => {
  it('is a permutation of the rows asked for, and puts neighbours next to each other', () => {
    const next = random(3);
    // Points in 50 clusters across the country, in random (time) order.
    const centres = Array.from({ length: 50 }, () => [117 + next() * 9, 5 + next() * 15] as const);
    const lng: number[] = [];
    const lat: number[] = [];
    for (let i = 0; i < 5_000; i++) {
      const [x, y] = centres[Math.floor(next() * centres.length)]!;
      lng.push(x + next() * 0.01);
      lat.push(y + next() * 0.01);
    }
    const rows = lng.map((_, i) => i).filter((i) => i % 3 !== 0);
    const order = spatialOrder(lng, lat, rows);
    expect([...order].sort((a, b) => a - b)).toEqual(rows);
    const path = (o: number[]) => o.slice(1).reduce((d, i, k) => d + Math.hypot(lng[i]! - lng[o[k]!]!, lat[i]! - lat[o[k]!]!), 0);
    // A walk through the clusters one after another, not back and forth across the country.
    expect(path(order)).toBeLessThan(path(rows) / 50);
  });

  it('keeps every row whatever the points: none, one, all the same, not numbers', () => {
    expect(spatialOrder([], [], [])).toEqual([]);
    expect(spatialOrder([121], [14], [0])).toEqual([0]);
    expect(spatialOrder([121, 121, 121], [14, 14, 14], [2, 0, 1]).sort()).toEqual([0, 1, 2]);
    expect(spatialOrder([121, Number.NaN, 120, Infinity], [14, 15, Number.NaN, 16], [0, 1, 2, 3]).sort()).toEqual([0, 1, 2, 3]);
  });
});

describe('re-tagging parts', () => {
  const work = scratch('retag-');

  it('gives every report in the window the tagger\'s tags and the version, keeps the others, newest first, each once', async () => {
    const from = Date.UTC(2026, 10, 12);
    const span = 30 * 3_600_000;
    // 30,000 reports in two parts, a tenth of the first's pkeys again in the second (its copy wins).
    const rows = randomReports(random(11), 30_000, from, span);
    const older = rows.slice(0, 20_000);
    const newer = [...rows.slice(20_000), ...rows.slice(0, 2_000).map((r) => ({ ...r, title: `${r.title} (edited)` }))];
    const files = [path.join(work.dir, 'part-00000000000000000000000001.parquet'), path.join(work.dir, 'part-00000000000000000000000002.parquet')];
    await writeParquet(work.db, older, files[0]!);
    await writeParquet(work.db, newer, files[1]!);
    const tagger = new Tagger(await defaultBoundaries());
    const window = { fromMs: from + 6 * 3_600_000, toMs: from + 24 * 3_600_000, dryRun: false };
    const out = path.join(work.dir, 'retagged.parquet');
    const done = await retagParts(work.db, files, (lng, lat) => tagger.tag(lng, lat), 'v-new', window, out, async () => []);

    const kept = new Map([...older, ...newer].map((r) => [r.pkey, r]));
    const expected = [...kept.values()].sort((a, b) => b.created_at_ms - a.created_at_ms || (a.pkey < b.pkey ? 1 : -1));
    const inWindow = (r: ArchiveRow) => r.created_at_ms >= window.fromMs && r.created_at_ms <= window.toMs;
    const got = await work.db.withConnection(async (conn) =>
      (await conn.runAndReadAll(`SELECT pkey, title, instance_region_code, local_area_id, province_code, region_code, boundary_version FROM read_parquet(${sqlString(out)})`)).getRowsJS(),
    );
    expect(got.map((r) => r[0])).toEqual(expected.map((r) => r.pkey));
    expect(got.map((r) => r[1])).toEqual(expected.map((r) => r.title));
    expected.forEach((r, i) => {
      const tags = inWindow(r) ? tagger.tag(r.lng, r.lat) : { instance_region_code: r.instance_region_code, local_area_id: r.local_area_id, province_code: r.province_code ?? null, region_code: r.region_code ?? null };
      expect(got[i]!.slice(2), r.pkey).toEqual([tags.instance_region_code, tags.local_area_id, tags.province_code, tags.region_code, inWindow(r) ? 'v-new' : r.boundary_version]);
    });
    const moved = expected.filter((r) => inWindow(r) && r.instance_region_code !== tagger.tag(r.lng, r.lat).instance_region_code);
    expect(done.rows).toBe(expected.length);
    expect(done.reports).toBe(expected.filter(inWindow).length);
    expect(done.cityChanges).toBe(moved.length);
    expect(moved.length).toBeGreaterThan(1_000);
  }, 60_000);
});
