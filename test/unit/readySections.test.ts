// Ready texts read from S3 (fauxqs) through the part cache's ranged copies: an answer's bytes
// are the same as from the whole file; the first ready text is two round trips (its index,
// then what the index locates), the next ones one, their sections guessed from the last one's
// proportions and fetched with the index, at once.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDb } from '../../src/archive/duckdb.js';
import { PartCache } from '../../src/archive/partCache.js';
import { writeParquet } from '../../src/archive/partWriter.js';
import { readyKeyOf, readyReads, readyRunsOf, ReadySections, writeReadyTexts, type ReadyWant } from '../../src/archive/sidecars/index.js';
import { newDayPartKey } from '../../src/store/layout.js';
import type { ObjectInfo } from '../../src/store/objectStore.js';
import { S3ObjectStore } from '../../src/store/s3Store.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { random, randomReports } from '../support/randomReports.js';

const DAY = 86_400_000;
const FIRST = Date.UTC(2026, 9, 1);
const DAYS = 4;
/** Enough that a day's GeoJSON reaches well past the first 64 KiB. */
const PER_DAY = 4000;

let peer: Emulator;
let store: S3ObjectStore;
let dir: string;
let db: DuckDb;
/** Each day's part (as listed) and its ready texts' local file. */
const days: { part: ObjectInfo; local: string }[] = [];
/** Ready-text GETs: when each started and ended. */
let gets: { start: number; end: number }[] = [];

beforeAll(async () => {
  peer = await startEmulator();
  peer.s3.middlewareStack.add(
    (next) => async (args) => {
      if (!(args.input as { Key?: string }).Key?.startsWith('ready/') || 'Body' in (args.input as object)) return next(args);
      const get = { start: performance.now(), end: Infinity };
      gets.push(get);
      try {
        return await next(args);
      } finally {
        get.end = performance.now();
      }
    },
    { step: 'initialize', name: 'countReadyGets' },
  );
  const bucket = `ready-${randomBytes(4).toString('hex')}`;
  await peer.s3.send(new CreateBucketCommand({ Bucket: bucket }));
  store = new S3ObjectStore(peer.s3, { bucket, prefix: '' });
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ready-sections-'));
  db = await DuckDb.open({ tempDir: path.join(dir, 'duckdb') });
  for (let d = 0; d < DAYS; d++) {
    const dayMs = FIRST + d * DAY;
    const partFile = path.join(dir, `part-${d}.parquet`);
    await writeParquet(db, randomReports(random(d + 1), PER_DAY, dayMs, DAY - 1), partFile);
    const local = path.join(dir, `part-${d}.ready`);
    await writeReadyTexts(db, partFile, local);
    const key = newDayPartKey(dayMs);
    await store.put(readyKeyOf(key), await fs.readFile(local));
    days.push({ part: { key, size: (await fs.stat(partFile)).size, etag: `"${d}"`, lastModified: new Date() }, local });
  }
}, 120_000);

afterAll(async () => {
  db?.close();
  await peer?.stop();
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

/** A day's whole window in a shape. */
const wantOf = (d: number, shape: ReadyWant['shape']): ReadyWant => ({ shape, filter: { startMs: FIRST + d * DAY, endMs: FIRST + (d + 1) * DAY - 1, admin: undefined } });

/** The day's text in a shape, read from a ready file. */
function textOf(file: string, d: number, shape: 'geojson' | 'csv'): Buffer {
  const hours = Array.from({ length: 24 }, (_, h) => FIRST + d * DAY + (23 - h) * 3_600_000);
  const runs = readyRunsOf(file, hours, wantOf(d, shape).filter);
  return Buffer.concat(readyReads(hours.map((h) => runs.get(h)!), shape, '\n').flatMap((read) => [...read()]));
}

/** GETs of ready texts made by `read`, and in how many round trips: a GET that starts once another has ended is a round trip more. */
async function getsOf<T>(read: () => Promise<T>): Promise<{ value: T; gets: number; rounds: number }> {
  gets = [];
  const value = await read();
  const sorted = [...gets].sort((a, b) => a.start - b.start);
  const rounds = sorted.filter((get, i) => i === 0 || sorted.slice(0, i).some((g) => g.end <= get.start)).length;
  return { value, gets: gets.length, rounds };
}

describe('ready texts from S3, ranged', () => {
  it('reads the same bytes as the whole file; two round trips for the first text, one for the next, its sections guessed and fetched with its index', async () => {
    const cache = new PartCache(store, path.join(dir, 'cache'), 100_000_000);
    const sections = new ReadySections((info, head, guesses) => cache.rangedFileIfPresent(info, head, guesses));

    const first = await getsOf(() => sections.fileOf(days[0]!.part, wantOf(0, 'geojson')));
    expect(first).toMatchObject({ gets: 2, rounds: 2 });
    expect(textOf(first.value!, 0, 'geojson').equals(textOf(days[0]!.local, 0, 'geojson'))).toBe(true);

    // GeoJSON comes first after the index: one read.
    const second = await getsOf(() => sections.fileOf(days[1]!.part, wantOf(1, 'geojson')));
    expect(second).toMatchObject({ gets: 1, rounds: 1 });
    expect(textOf(second.value!, 1, 'geojson').equals(textOf(days[1]!.local, 1, 'geojson'))).toBe(true);
    // Its read was the guess, not the whole text.
    const size = (await fs.stat(days[1]!.local)).size;
    expect(cache.sizeBytes).toBeLessThan((await fs.stat(days[0]!.local)).size + size / 2);

    // CSV lies past the TopoJSON: the index and the guessed CSV range, at once.
    const csv = await getsOf(() => sections.fileOf(days[2]!.part, wantOf(2, 'csv')));
    expect(csv.rounds).toBe(1);
    expect(textOf(csv.value!, 2, 'csv').equals(textOf(days[2]!.local, 2, 'csv'))).toBe(true);

    // The Parquet section, last: the same.
    const parquet = await getsOf(() => sections.fileOf(days[3]!.part, wantOf(3, 'parquet')));
    expect(parquet.rounds).toBe(1);
    const whole = await fs.readFile(days[3]!.local);
    const base = whole.indexOf(10) + 1;
    const [from, to] = (JSON.parse(whole.subarray(0, base).toString()) as { parquet: [number, number] }).parquet;
    expect((await fs.readFile(parquet.value!)).subarray(base + from, base + to).equals(whole.subarray(base + from, base + to))).toBe(true);
  });
});
