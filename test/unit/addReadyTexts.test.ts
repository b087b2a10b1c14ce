// The ready texts a bulk job adds to its stored parts: small consecutive parts built together,
// each part's text the one it has built alone; a part no longer stored gets none.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDb } from '../../src/archive/duckdb.js';
import { storePartPublisher } from '../../src/archive/partPublisher.js';
import { writeParquet } from '../../src/archive/partWriter.js';
import { readyKeyOf, readyTextsOf } from '../../src/archive/sidecars/index.js';
import { addReadyTexts, groupsOf, SMALL_PART_REPORTS, type UntextedPart } from '../../src/ops/addReadyTexts.js';
import { newDayPartKey } from '../../src/store/layout.js';
import { FileObjectStore } from '../../src/store/fileStore.js';
import { random, randomReports } from '../support/randomReports.js';

const HOUR = 3_600_000;

let dir: string;
let db: DuckDb;

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'add-ready-'));
  db = await DuckDb.open({ tempDir: path.join(dir, 'duckdb') });
});
afterAll(async () => {
  db?.close();
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

describe('groups of parts built together', () => {
  const part = (name: string, reports?: number): UntextedPart => ({ key: name, file: name, reports });

  it('join consecutive small parts up to 24,000 reports; a large part, or one of unknown size, goes alone', () => {
    const parts = [part('a', 10_000), part('b', 8_000), part('c', 6_000), part('d', 2), part('e', SMALL_PART_REPORTS + 1), part('f', 100), part('g'), part('h', 100), part('i', 200)];
    expect(groupsOf(parts).map((g) => g.map((p) => p.key).join(''))).toEqual(['a', 'bcd', 'e', 'f', 'g', 'hi']);
  });
});

describe('ready texts added to a bulk job\'s parts', () => {
  it('are each part\'s ready text built alone, for every part still stored, and every part is told done', async () => {
    const store = new FileObjectStore(path.join(dir, 'store'));
    const publisher = storePartPublisher({ store, db, log: { warn: () => undefined } });
    // Days of a file spread over a year (small, built together), a busy day, and one of unknown size.
    const sizes: (number | undefined)[] = [120, 300, 1, 80, SMALL_PART_REPORTS + 500, 200, undefined, 150];
    const parts: UntextedPart[] = [];
    for (const [d, n] of sizes.entries()) {
      const dayMs = Date.UTC(2026, 0, 1 + d);
      const file = path.join(dir, `day-${d}.parquet`);
      await writeParquet(db, randomReports(random(100 + d), n ?? 50, dayMs, 24 * HOUR), file);
      const key = newDayPartKey(dayMs);
      await store.put(key, await fs.readFile(file));
      parts.push({ key, file, reports: n });
    }
    // Merged away (compaction) before its texts: it needs none.
    await store.delete([parts[1]!.key]);
    let done = 0;

    await addReadyTexts({ store, publisher }, parts, dir, () => (done += 1));

    expect(done).toBe(parts.length);
    expect(await store.head(readyKeyOf(parts[1]!.key))).toBeUndefined();
    for (const [d, p] of parts.entries()) {
      if (d === 1) continue;
      const stored = await store.get(readyKeyOf(p.key));
      expect(stored?.body.equals(await readyTextsOf(db, p.file, path.join(dir, `alone-${d}`))), p.key).toBe(true);
    }
  }, 120_000);
});
