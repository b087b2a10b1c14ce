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

async function* reports(list: AcceptedReport[]): AsyncIterable<AcceptedReport> {
  yield* list;
}

describe('the acceptances verify reads once', () => {
  it('gives each block its own reports, across flushes, and removes its files', async () => {
    const tmp = await tempDir();
    // More reports than are held before a flush, over five weeks, in no order of time.
    const list: AcceptedReport[] = Array.from({ length: 45_000 }, (_, i) => ({
      pkey: `partner-"${i}"\t`,
      created_at: new Date(Date.UTC(2026, 0, 1) + ((i * 7919) % (35 * DAY / 60_000)) * 60_000).toISOString(),
      pending: i % 5 === 0,
    }));
    list.push({ ...list[3]! }); // read twice (a listing that saw a key twice)
    const spill = await AcceptedSpill.write(reports(list), (ms) => Math.floor(ms / WEEK), tmp);
    expect(spill.earliestMs).toBe(Math.min(...list.map((r) => Date.parse(r.created_at))));
    const weeks = new Set(list.map((r) => Math.floor(Date.parse(r.created_at) / WEEK)));
    let total = 0;
    for (const week of weeks) {
      const held = await spill.block(week);
      const expected = list.filter((r) => Math.floor(Date.parse(r.created_at) / WEEK) === week);
      expect(new Map([...held].map(([k, v]) => [k, v]))).toEqual(new Map(expected.map((r) => [r.pkey, { day: r.created_at.slice(0, 10), pending: r.pending }])));
      total += held.size;
    }
    expect(total).toBe(45_000);
    expect((await spill.block(Math.max(...weeks) + 1)).size).toBe(0);
    await spill.remove();
    expect(await fs.readdir(path.join(tmp, 'verify'))).toEqual([]);
  });

  it('leaves nothing behind when the ledger fails part-way', async () => {
    const tmp = await tempDir();
    async function* failing(): AsyncIterable<AcceptedReport> {
      for (let i = 0; i < 30_000; i++) yield { pkey: `partner-${i}`, created_at: new Date(Date.UTC(2026, 0, 1) + i * 60_000).toISOString(), pending: false };
      throw new Error('the store went away');
    }
    await expect(AcceptedSpill.write(failing(), (ms) => Math.floor(ms / WEEK), tmp)).rejects.toThrow(/went away/);
    expect(await fs.readdir(path.join(tmp, 'verify'))).toEqual([]);
  });

  it('holds no report when the ledger has none in the window', async () => {
    const spill = await AcceptedSpill.write(reports([]), (ms) => Math.floor(ms / WEEK), await tempDir());
    expect(spill.earliestMs).toBeUndefined();
    expect((await spill.block(0)).size).toBe(0);
    await spill.remove();
  });
});
