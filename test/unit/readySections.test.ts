// Ready texts read from S3 (fauxqs) through the part cache's ranged copies: an answer's bytes
// are the same as from the whole file, a ready text is two GETs (its index, then what the
// index locates), a whole GeoJSON day one (its reach guessed, then learned from the last one
// read), and an hour the window only touches is not read at all.
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Holds } from '../../src/archive/holds.js';
import { PartCache } from '../../src/archive/partCache.js';
import { writeParquet } from '../../src/archive/partWriter.js';
import { readyKeyOf, readyReads, readyRunsOf, ReadySections, StoredSection, writeReadyTexts, type ReadyWant } from '../../src/archive/sidecars/index.js';
import { readReadyIndex } from '../../src/archive/sidecars/readyIndex.js';
import { READY_HEAD_BYTES } from '../../src/archive/sidecars/readySections.js';
import { newDayPartKey } from '../../src/store/layout.js';
import type { ObjectInfo } from '../../src/store/objectStore.js';
import { S3ObjectStore } from '../../src/store/s3Store.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { random, randomReports } from '../support/randomReports.js';
import { scratch } from '../support/scratch.js';

const DAY = 86_400_000;
const FIRST = Date.UTC(2026, 9, 1);
const DAYS = 3;
/** Enough that a day's GeoJSON reaches well past the first 64 KiB. */
const PER_DAY = 4000;

let peer: Emulator;
let store: S3ObjectStore;
const work = scratch('ready-sections-');
/** Each day's part (as listed) and its ready texts' local file. */
const days: { part: ObjectInfo; local: string }[] = [];
let gets = 0;

beforeAll(async () => {
  peer = await startEmulator();
  // Counted by the client's request handler, which the SDK's commands and the store's direct GETs share.
  const handler = peer.s3.config.requestHandler;
  const handle = handler.handle.bind(handler);
  handler.handle = (request, options) => {
    if (request.method === 'GET' && decodeURIComponent(request.path).includes('/ready/')) gets += 1;
    return handle(request, options);
  };
  const bucket = `ready-${randomBytes(4).toString('hex')}`;
  await peer.s3.send(new CreateBucketCommand({ Bucket: bucket }));
  store = new S3ObjectStore(peer.s3, { bucket, prefix: '' });
  for (let d = 0; d < DAYS; d++) {
    const dayMs = FIRST + d * DAY;
    const partFile = path.join(work.dir, `part-${d}.parquet`);
    await writeParquet(work.db, randomReports(random(d + 1), PER_DAY, dayMs, DAY - 1), partFile);
    const local = path.join(work.dir, `part-${d}.ready`);
    await writeReadyTexts(work.db, partFile, local);
    const key = newDayPartKey(dayMs);
    await store.put(readyKeyOf(key), await fs.readFile(local));
    days.push({ part: { key, size: (await fs.stat(partFile)).size, etag: `"${d}"`, lastModified: new Date() }, local });
  }
}, 120_000);

afterAll(async () => {
  await peer?.stop();
});

/** A day's whole window in a shape. */
const wantOf = (d: number, shape: ReadyWant['shape']): ReadyWant => ({ shape, filter: { startMs: FIRST + d * DAY, endMs: FIRST + (d + 1) * DAY - 1, admin: undefined } });

/** The day's hours, newest first. */
const hoursOf = (d: number) => Array.from({ length: 24 }, (_, h) => FIRST + d * DAY + (23 - h) * 3_600_000);

/** The day's text in a shape (or its Arrow batches), read from a ready file, for the day's window or `filter`'s. */
function textOf(file: string, d: number, shape: 'geojson' | 'csv' | 'arrow', filter = wantOf(d, shape).filter): Buffer {
  const hours = hoursOf(d);
  const runs = readyRunsOf(file, hours, filter);
  return Buffer.concat(readyReads(hours.map((h) => runs.get(h)!), shape, '\n').flatMap((read) => [...read()].map((p) => (p instanceof StoredSection ? p.plain() : p))));
}

/** GETs of ready texts made by `read`. */
async function getsOf<T>(read: () => Promise<T>): Promise<{ value: T; gets: number }> {
  const before = gets;
  const value = await read();
  return { value, gets: gets - before };
}

describe('ready texts from S3, ranged', () => {
  it('reads the same bytes as the whole file; one GET for a whole GeoJSON day, the first one too, two for a text of another shape', async () => {
    const cache = new PartCache(store, path.join(work.dir, 'cache'), 100_000_000);
    const sections = new ReadySections((info, head) => cache.rangedFileIfPresent(info, head));

    const first = await getsOf(() => sections.fileOf(days[0]!.part, wantOf(0, 'geojson')));
    expect(first.gets).toBe(1);
    expect(textOf(first.value!, 0, 'geojson').equals(textOf(days[0]!.local, 0, 'geojson'))).toBe(true);

    const second = await getsOf(() => sections.fileOf(days[1]!.part, wantOf(1, 'geojson')));
    expect(second.gets).toBe(1);
    expect(textOf(second.value!, 1, 'geojson').equals(textOf(days[1]!.local, 1, 'geojson'))).toBe(true);
    // Its first read was the guess, not the whole text: the CSV sections are still to come.
    const size = (await fs.stat(days[1]!.local)).size;
    expect(cache.sizeBytes).toBeLessThan((await fs.stat(days[0]!.local)).size + size / 2);

    const csv = await getsOf(() => sections.fileOf(days[2]!.part, wantOf(2, 'csv')));
    expect(csv.gets).toBe(2);
    expect(textOf(csv.value!, 2, 'csv').equals(textOf(days[2]!.local, 2, 'csv'))).toBe(true);
  });

  it('keeps a held copy past the cache\'s bound until it is released, then removes it; a hold taken after the release is let go at once', async () => {
    // A bound of one byte: each copy taken evicts every other one not held.
    const cache = new PartCache(store, path.join(work.dir, 'cache-held'), 1);
    const sections = new ReadySections((info, head, holds) => cache.rangedFileIfPresent(info, head, holds));
    const holds = new Holds();
    const held = (await sections.fileOf(days[0]!.part, wantOf(0, 'geojson'), holds))!;
    const other = (await sections.fileOf(days[1]!.part, wantOf(1, 'geojson')))!;
    expect(textOf(held, 0, 'geojson').equals(textOf(days[0]!.local, 0, 'geojson'))).toBe(true);
    expect(existsSync(other)).toBe(true);
    // Released: the bound holds again, on the disk too.
    holds.release();
    // The eviction removes the copies one after the other: the held one first (the older), then the other.
    await vi.waitFor(
      () => {
        expect(existsSync(held)).toBe(false);
        expect(cache.sizeBytes).toBe(0);
      },
      { timeout: 5000 },
    );

    const late = new Holds();
    late.release();
    const lateFile = (await sections.fileOf(days[2]!.part, wantOf(2, 'geojson'), late))!;
    expect(existsSync(lateFile)).toBe(true);
    await sections.fileOf(days[0]!.part, wantOf(0, 'geojson'));
    expect(existsSync(lateFile)).toBe(false);
  });

  it('reads nothing of an hour the window only touches: a window ending at a day\'s first instant fetches its index alone', async () => {
    const cache = new PartCache(store, path.join(work.dir, 'cache-touch'), 100_000_000);
    const sections = new ReadySections((info, head) => cache.rangedFileIfPresent(info, head));
    // Day 0 and the first millisecond of day 1, whose first report comes later: not even the
    // GeoJSON sections a whole day's first read would take with its index.
    const touching: ReadyWant = { shape: 'geojson', filter: { startMs: FIRST, endMs: FIRST + DAY, admin: undefined } };
    const { index } = readReadyIndex(days[1]!.local);
    expect(index.hours.at(-1)!.minMs).toBeGreaterThan(FIRST + DAY);

    const read = await getsOf(() => sections.fileOf(days[1]!.part, touching));
    expect(read.gets).toBe(1);
    expect(cache.sizeBytes).toBeLessThanOrEqual(READY_HEAD_BYTES);
    const hours = index.hours.map((h) => h.hourMs);
    const runs = readyRunsOf(read.value!, hours, touching.filter);
    expect([...runs.values()].every((r) => r.hour === undefined)).toBe(true);
    expect(readyReads([...runs.values()], 'geojson', '\n')).toEqual([]);
  });

  it('answers a day it cuts at one end and only touches at the other with the bytes of the whole file, in every shape', async () => {
    const { index } = readReadyIndex(days[2]!.local);
    const byHour = new Map(index.hours.map((h) => [h.hourMs, h]));
    // From just after hour 3's last report (touched, none kept) to the middle of hour 20 (cut);
    // for Arrow, which reads whole hours, to the day's end.
    const touched = byHour.get(FIRST + 2 * DAY + 3 * 3_600_000)!;
    const cutAt = FIRST + 2 * DAY + 20.5 * 3_600_000;
    const filterOf = (endMs: number) => ({ startMs: touched.maxMs + 1, endMs, admin: undefined });
    const wants: ReadyWant[] = [
      { shape: 'geojson', filter: filterOf(cutAt) },
      { shape: 'csv', filter: filterOf(cutAt) },
      { shape: 'arrow', filter: filterOf(FIRST + 3 * DAY - 1) },
    ];
    for (const want of wants) {
      const cache = new PartCache(store, path.join(work.dir, `cache-mixed-${want.shape}`), 100_000_000);
      const sections = new ReadySections((info, head) => cache.rangedFileIfPresent(info, head));
      const file = (await sections.fileOf(days[2]!.part, want))!;
      const shape = want.shape as 'geojson' | 'csv' | 'arrow';
      const runs = readyRunsOf(file, hoursOf(2), want.filter);
      expect(runs.get(touched.hourMs)!.hour, want.shape).toBeUndefined();
      if (shape !== 'arrow') expect(runs.get(FIRST + 2 * DAY + 20 * 3_600_000)!.selection, want.shape).toBeDefined();
      const text = textOf(file, 2, shape, want.filter);
      expect(text.length, want.shape).toBeGreaterThan(0);
      expect(text.equals(textOf(days[2]!.local, 2, shape, want.filter)), want.shape).toBe(true);
    }
  });

  it('fetches for a whole day in Parquet its Parquet section and the index, hardly more', async () => {
    const cache = new PartCache(store, path.join(work.dir, 'cache-parquet'), 100_000_000);
    const sections = new ReadySections((info, head) => cache.rangedFileIfPresent(info, head));
    const file = (await getsOf(() => sections.fileOf(days[0]!.part, wantOf(0, 'parquet')))).value!;
    const { base, index } = readReadyIndex(days[0]!.local);
    const [start, end] = index.parquet;
    const local = await fs.readFile(days[0]!.local);
    expect((await fs.readFile(file)).subarray(base + start, base + end).equals(local.subarray(base + start, base + end))).toBe(true);
    // The section, and the first bytes with the index line: nothing of the text sections beyond.
    expect(cache.sizeBytes).toBeLessThanOrEqual(end - start + READY_HEAD_BYTES);
    expect(cache.sizeBytes).toBeLessThan((end - start) * 1.2);
  });
});
