// verify's acceptances, read from the ledger once and kept on disk a block at a time: each
// block gives back exactly its reports, a pkey read twice once, and nothing is left behind.
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { AcceptedReport } from '../../src/ledger/ledger.js';
import { AcceptedSpill } from '../../src/ops/acceptedSpill.js';
import { tempDir } from '../support/env.js';

const DAY = 86_400_000;
const WEEK = 7 * DAY;
const weekOf = (ms: number) => Math.floor(ms / WEEK);

/** The reports in pages of `size`, as a ledger gives them. */
async function* pages(list: AcceptedReport[], size = 1_000): AsyncIterable<AcceptedReport[]> {
  for (let i = 0; i < list.length; i += size) yield list.slice(i, i + size);
}

describe('the acceptances verify reads once', () => {
  it('gives each block its own reports with their days, across flushes, and removes its files', async () => {
    const tmp = await tempDir();
    // More reports than are held before a flush, over five weeks, in no order of time.
    const list: AcceptedReport[] = Array.from({ length: 45_000 }, (_, i) => ({
      pkey: `partner-key.name_${i % 3}-${i}`,
      createdMs: Date.UTC(2026, 0, 1) + ((i * 7919) % ((35 * DAY) / 60_000)) * 60_000,
      pending: i % 5 === 0,
    }));
    list.push({ ...list[3]! }); // read twice (a listing that saw a key twice)
    const spill = await AcceptedSpill.write(pages(list), weekOf, tmp);
    expect(spill.earliestMs).toBe(Math.min(...list.map((r) => r.createdMs)));
    const weeks = new Set(list.map((r) => weekOf(r.createdMs)));
    expect(weeks.size).toBeGreaterThan(4);
    let total = 0;
    for (const week of weeks) {
      const expected = list.filter((r) => weekOf(r.createdMs) === week);
      expect(await spill.block(week)).toEqual(new Map(expected.map((r) => [r.pkey, { day: new Date(r.createdMs).toISOString().slice(0, 10), pending: r.pending }])));
      total += (await spill.block(week)).size;
    }
    expect(total).toBe(45_000);
    expect((await spill.block(Math.max(...weeks) + 1)).size).toBe(0);
    await spill.remove();
    expect(await fs.readdir(path.join(tmp, 'verify'))).toEqual([]);
  });

  it('leaves nothing behind when the ledger fails part-way', async () => {
    const tmp = await tempDir();
    async function* failing(): AsyncIterable<AcceptedReport[]> {
      yield* pages(Array.from({ length: 30_000 }, (_, i) => ({ pkey: `partner-${i}`, createdMs: Date.UTC(2026, 0, 1) + i * 60_000, pending: false })));
      throw new Error('the store went away');
    }
    await expect(AcceptedSpill.write(failing(), weekOf, tmp)).rejects.toThrow(/went away/);
    expect(await fs.readdir(path.join(tmp, 'verify'))).toEqual([]);
  });

  it('holds no report when the ledger has none in the window', async () => {
    const spill = await AcceptedSpill.write(pages([]), weekOf, await tempDir());
    expect(spill.earliestMs).toBeUndefined();
    expect((await spill.block(0)).size).toBe(0);
    await spill.remove();
  });
});
