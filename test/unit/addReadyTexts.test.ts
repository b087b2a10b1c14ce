// The ready texts a bulk job adds to its stored parts: small consecutive parts built together,
// each part's text the one it has built alone; a part no longer stored gets none.
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { storePartPublisher } from '../../src/archive/partPublisher.js';
import { writeParquet } from '../../src/archive/partWriter.js';
import { readyKeyOf, readyTextsOf } from '../../src/archive/sidecars/index.js';
import { addReadyTexts, groupsOf, SMALL_PART_REPORTS, type UntextedPart } from '../../src/ops/addReadyTexts.js';
import { newDayPartKey } from '../../src/store/layout.js';
import { FileObjectStore } from '../../src/store/fileStore.js';
import { random, randomReports } from '../support/randomReports.js';
import { scratch } from '../support/scratch.js';

const HOUR = 3_600_000;

const work = scratch('add-ready-');

describe('groups of parts built together', () => {
  const part = (name: string, reports?: number): UntextedPart => ({ key: name, file: name, reports });

  it('join consecutive small parts up to 24,000 reports; a large part, or one of unknown size, goes alone', () => {
    const parts = [part('a', 10_000), part('b', 8_000), part('c', 6_000), part('d', 2), part('e', SMALL_PART_REPORTS + 1), part('f', 100), part('g'), part('h', 100), part('i', 200)];
    expect(groupsOf(parts).map((g) => g.map((p) => p.key).join(''))).toEqual(['a', 'bcd', 'e', 'f', 'g', 'hi']);
  });
});

describe('ready texts added to a bulk job\'s parts', () => {
  it('are each part\'s ready text built alone, for every part still stored, and every part is told done', async () => {
    const store = new FileObjectStore(path.join(work.dir, 'store'));
    const publisher = storePartPublisher({ store, db: work.db, log: { warn: () => undefined } });
    // Days of a file spread over a year (small, built together), a busy day, and one of unknown size.
    const sizes: (number | undefined)[] = [120, 300, 1, 80, SMALL_PART_REPORTS + 500, 200, undefined, 150];
    const parts: UntextedPart[] = [];
    for (const [d, n] of sizes.entries()) {
      const dayMs = Date.UTC(2026, 0, 1 + d);
      const file = path.join(work.dir, `day-${d}.parquet`);
      await writeParquet(work.db, randomReports(random(100 + d), n ?? 50, dayMs, 24 * HOUR), file);
      const key = newDayPartKey(dayMs);
      await store.put(key, await fs.readFile(file));
      parts.push({ key, file, reports: n });
    }
    // Merged away (compaction) before its texts: it needs none.
    await store.delete([parts[1]!.key]);
    let done = 0;

    await addReadyTexts({ store, publisher }, parts, work.dir, () => (done += 1));

    expect(done).toBe(parts.length);
    expect(await store.head(readyKeyOf(parts[1]!.key))).toBeUndefined();
    for (const [d, p] of parts.entries()) {
      if (d === 1) continue;
      const stored = await store.get(readyKeyOf(p.key));
      expect(stored?.body.equals(await readyTextsOf(work.db, p.file, path.join(work.dir, `alone-${d}`))), p.key).toBe(true);
    }
  }, 120_000);
});
