// Builds a synthetic archive of a realistic size straight into the store's
// layout: points drawn inside the real barangays (PSA/NAMRIA, beside the
// project), a daily cycle with storm peaks, Filipino and English texts.
import fs from 'node:fs/promises';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { ulid } from 'ulid';
import { compactLevels, contains, type Level } from '../src/boundaries/compactLevels.js';
import { BoundaryRepository } from '../src/boundaries/repository.js';
import { Tagger } from '../src/boundaries/tagger.js';
import type { BoundarySet } from '../src/boundaries/types.js';
import { FileObjectStore } from '../src/store/fileStore.js';

export interface SyntheticOptions {
  /** The store's root directory (file backend). */
  storeDir: string;
  reports: number;
  startMs: number;
  days: number;
  boundaries: BoundarySet;
  boundaryVersion: string;
  seed?: number;
}

const TITLES = [
  'Baha sa kalsada', 'Flooded street', 'Hanggang tuhod ang baha', 'Knee-deep flood', 'Baha sa harap ng paaralan',
  'Road impassable', 'Hindi madaanan', 'Rising water near the creek', 'Tumataas ang tubig', 'Flash flood', 'Baha sa palengke',
  'Waist-deep water', 'Hanggang baywang', 'Stranded commuters', 'Baha sa ilalim ng tulay',
];
const TEXTS = [
  'Hindi makadaan ang mga sasakyan.', 'Cars cannot pass, please avoid the area.', 'Mabilis ang agos ng tubig.',
  'Water rising fast since 3pm.', 'Maraming tao ang stranded sa terminal.', 'Pumasok na ang tubig sa mga bahay.',
  'Light vehicles turned back.', 'Kailangan ng rescue boat dito.', 'The drainage is clogged with garbage.',
  'Ingat po sa mga dadaan.', '', '', 'Barado ang kanal.', 'Power is out in the area.', 'Baha pa rin hanggang ngayon.',
];

/** Publishes the boundaries into an embedded store and builds a synthetic archive tagged with them. */
export async function buildBenchStore(options: Omit<SyntheticOptions, 'boundaryVersion'>): Promise<{ parts: number; bytes: number }> {
  const { version } = await new BoundaryRepository(new FileObjectStore(options.storeDir), 0).publish(options.boundaries);
  return buildSyntheticArchive({ ...options, boundaryVersion: version });
}

/** A deterministic PRNG (mulberry32), so two runs build the same archive. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Points inside barangays (or inside the cities when the set has none), with their tags. */
export function pointPool(set: BoundarySet, size: number, random: () => number): { lng: number; lat: number; city: string; psgc: string | null }[] {
  const levels = compactLevels(set);
  const byArea = levels.localAreas.properties.length > 0;
  const level: Level<unknown> = byArea ? levels.localAreas : levels.cities;
  const pool: { lng: number; lat: number; city: string; psgc: string | null }[] = [];
  while (pool.length < size) {
    const i = Math.floor(random() * level.properties.length);
    const [minX, minY, maxX, maxY] = level.bboxes.subarray(4 * i, 4 * i + 4);
    for (let tries = 0; tries < 50; tries++) {
      const lng = Math.round((minX! + random() * (maxX! - minX!)) * 1e6) / 1e6;
      const lat = Math.round((minY! + random() * (maxY! - minY!)) * 1e6) / 1e6;
      if (contains(level.rings[i]!, lng, lat)) {
        pool.push(byArea ? { lng, lat, city: levels.localAreas.properties[i]!.city_code, psgc: levels.localAreas.properties[i]!.psgc } : { lng, lat, city: levels.cities.properties[i]!.code, psgc: null });
        break;
      }
    }
  }
  return pool;
}

/** Reports per hour: a daily cycle (afternoon peak) times a few multi-day storms in the wet season. */
function hourlyCounts(total: number, startMs: number, days: number, random: () => number): number[] {
  const hours = days * 24;
  const storms = Array.from({ length: Math.max(1, Math.round(days / 30)) }, () => ({
    center: Math.floor((0.45 + random() * 0.5) * hours),
    width: 24 + random() * 72,
    peak: 5 + random() * 20,
  }));
  const weights = Array.from({ length: hours }, (_, h) => {
    const localHour = (new Date(startMs + h * 3_600_000).getUTCHours() + 8) % 24;
    const daily = 0.4 + Math.max(0, Math.sin(((localHour - 8) / 24) * 2 * Math.PI)) * 1.6;
    const storm = storms.reduce((m, s) => m + s.peak * Math.exp(-(((h - s.center) / s.width) ** 2)), 0);
    return daily * (1 + storm);
  });
  const sum = weights.reduce((a, b) => a + b, 0);
  const counts = weights.map((w) => Math.floor((w / sum) * total));
  let rest = total - counts.reduce((a, b) => a + b, 0);
  for (let h = 0; rest > 0; h = (h + 1) % hours, rest--) counts[h]! += 1;
  return counts;
}

export async function buildSyntheticArchive(options: SyntheticOptions): Promise<{ parts: number; bytes: number }> {
  const random = prng(options.seed ?? 20261121);
  const pool = pointPool(options.boundaries, 20_000, random);
  const counts = hourlyCounts(options.reports, options.startMs, options.days, random);
  const work = path.join(options.storeDir, '..', 'synthetic-work');
  await fs.rm(work, { recursive: true, force: true });
  await fs.mkdir(work, { recursive: true });
  const db = await DuckDBInstance.create(':memory:', { threads: '2', memory_limit: '2GB', temp_directory: path.join(work, 'tmp') });
  const conn = await db.connect();
  try {
    await conn.run("SET TimeZone = 'UTC'");
    await conn.run('CREATE TABLE pool (i INTEGER, lng DOUBLE, lat DOUBLE, city VARCHAR, psgc VARCHAR, province VARCHAR, region VARCHAR, partner_city VARCHAR)');
    const poolAppender = await conn.createAppender('pool');
    // Each point's tags as the worker would give them, and its city's name as a partner would send it.
    const tagger = new Tagger(options.boundaries);
    const names = new Map(options.boundaries.cities.features.map((f) => [f.properties.code, f.properties.name]));
    const nullable = (v: string | null) => (v === null ? poolAppender.appendNull() : poolAppender.appendVarchar(v));
    pool.forEach((p, i) => {
      const tags = tagger.tag(p.lng, p.lat);
      poolAppender.appendInteger(i);
      poolAppender.appendDouble(p.lng);
      poolAppender.appendDouble(p.lat);
      nullable(tags.instance_region_code);
      nullable(tags.local_area_id);
      nullable(tags.province_code);
      nullable(tags.region_code);
      poolAppender.appendVarchar(names.get(p.city) ?? 'Quezon City');
      poolAppender.endRow();
    });
    poolAppender.closeSync();
    await conn.run('CREATE TABLE hours (h INTEGER, n INTEGER)');
    const hourAppender = await conn.createAppender('hours');
    counts.forEach((n, h) => {
      hourAppender.appendInteger(h);
      hourAppender.appendInteger(n);
      hourAppender.endRow();
    });
    hourAppender.closeSync();
    const titles = `[${TITLES.map((t) => `'${t.replace(/'/g, "''")}'`).join(', ')}]`;
    const texts = `[${TEXTS.map((t) => `'${t.replace(/'/g, "''")}'`).join(', ')}]`;
    // A month of hours per COPY keeps DuckDB's memory bounded whatever the archive size.
    const chunkHours = 31 * 24;
    await fs.mkdir(path.join(work, 'out'), { recursive: true });
    for (let h0 = 0, offset = 0; h0 < counts.length; h0 += chunkHours) {
      const h1 = Math.min(counts.length, h0 + chunkHours);
      const outDir = path.join(work, 'out', String(h0));
      await conn.run(`
      COPY (
        WITH rows AS (
          SELECT h, unnest(range(n)) AS k FROM hours WHERE n > 0 AND h >= ${h0} AND h < ${h1}
        ), numbered AS (
          SELECT h, k, ${offset} + row_number() OVER (ORDER BY h, k) AS id FROM rows
        ), timed AS (
          SELECT id, to_timestamp(${options.startMs / 1000} + h * 3600 + (hash(id) % 3600000) / 1000.0) AS created_at,
                 (hash(id * 7919) % ${pool.length})::INTEGER AS p
          FROM numbered
        )
        SELECT 'partner-' || id AS pkey, created_at, 'partner' AS source, 'confirmed' AS status,
               NULL::VARCHAR AS url,
               CASE WHEN hash(id * 31) % 5 = 0 THEN 'https://images.example.org/' || id || '.jpg' END AS image_url,
               'flood' AS disaster_type, NULL::JSON AS report_data,
               pool.city AS instance_region_code, pool.psgc AS local_area_id, pool.province AS province_code, pool.region AS region_code,
               ${titles}[((hash(id * 13) % ${TITLES.length}) + 1)::BIGINT] AS title,
               ${texts}[((hash(id * 17) % ${TEXTS.length}) + 1)::BIGINT] AS text,
               pool.lng, pool.lat, id::BIGINT AS post_id,
               pool.partner_city,
               created_at + INTERVAL 2 SECOND AS received_at,
               '${options.boundaryVersion}' AS boundary_version,
               strftime(created_at, '%Y') AS year, strftime(created_at, '%m') AS month,
               strftime(created_at, '%d') AS day, strftime(created_at, '%H') AS hour
        FROM timed JOIN pool ON pool.i = timed.p
        ORDER BY created_at DESC, pkey DESC
      ) TO '${outDir}' (FORMAT parquet, COMPRESSION zstd, PARTITION_BY (year, month, day, hour), OVERWRITE_OR_IGNORE true)`);
      offset += counts.slice(h0, h1).reduce((a, b) => a + b, 0);
    }
  } finally {
    conn.closeSync();
    db.closeSync();
  }
  // DuckDB names files data_N.parquet; the archive names parts part-<ulid>.parquet.
  const target = path.join(options.storeDir, 'reports', 'v1');
  let parts = 0;
  let bytes = 0;
  const walk = async (dir: string, rel: string[]): Promise<void> => {
    for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) await walk(full, [...rel, entry.name]);
      else if (entry.name.endsWith('.parquet')) {
        const destDir = path.join(target, ...rel);
        await fs.mkdir(destDir, { recursive: true });
        await fs.rename(full, path.join(destDir, `part-${ulid()}.parquet`));
        parts += 1;
      }
    }
  };
  for (const chunk of await fs.readdir(path.join(work, 'out'))) await walk(path.join(work, 'out', chunk), []);
  for await (const file of walkFiles(target)) bytes += (await fs.stat(file)).size;
  await fs.rm(work, { recursive: true, force: true });
  return { parts, bytes };
}

/** Every file below a directory. */
export async function* walkFiles(dir: string): AsyncIterable<string> {
  for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
    // '+journal' is the file store's write-ahead journal, not objects.
    if (entry.name.startsWith('+')) continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) yield* walkFiles(full);
    else yield full;
  }
}
