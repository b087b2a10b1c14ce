// A part's seal (partSeal.ts) on Parquet files DuckDB writes as it writes parts (zstd): a sealed
// file reads as before, and a byte changed anywhere in it is found.
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { sqlString } from '../../src/archive/duckdb.js';
import { checkSeal, checkSealOf, SEAL_KEY, sealPart } from '../../src/archive/partSeal.js';
import { scratch } from '../support/scratch.js';

const work = scratch('part-seal-');
const rows = (sql: string) => work.db.withConnection(async (conn) => (await conn.runAndReadAll(sql)).getRowObjectsJS());

/** A small zstd Parquet file as DuckDB writes one, with `kv` as its key-value metadata. */
async function written(name: string, kv = ''): Promise<Buffer> {
  const file = path.join(work.dir, name);
  await rows(
    `COPY (SELECT i AS n, 'report ' || i AS title, 121.0 + i / 1000 AS lng FROM range(200) t(i)) TO ${sqlString(file)} (FORMAT parquet, COMPRESSION zstd${kv})`,
  );
  return fs.readFile(file);
}

async function readBack(bytes: Buffer, name: string) {
  const file = path.join(work.dir, name);
  await fs.writeFile(file, bytes);
  return {
    rows: await rows(`SELECT * FROM read_parquet(${sqlString(file)}) ORDER BY n`),
    kv: await rows(`SELECT decode(key) AS k FROM parquet_kv_metadata(${sqlString(file)})`),
  };
}

describe('a part sealed', () => {
  it('reads as it did, its other key-value metadata kept, the seal one more entry', async () => {
    for (const [name, kv] of [
      ['plain.parquet', ''],
      ['with-kv.parquet', ", KV_METADATA {note: 'kept'}"],
    ] as const) {
      const bytes = await written(name, kv);
      expect(await checkSeal(bytes)).toEqual({ state: 'unsealed' });
      const sealed = sealPart(bytes);
      expect(await checkSeal(sealed)).toEqual({ state: 'sealed' });
      const [before, after] = [await readBack(bytes, `before-${name}`), await readBack(sealed, `after-${name}`)];
      expect(after.rows).toEqual(before.rows);
      expect(after.rows).toHaveLength(200);
      expect(after.kv.map((r) => r.k)).toEqual([...before.kv.map((r) => r.k), SEAL_KEY]);
      // Sealed again (a part rewritten with its seal, as compaction's second publish does): the same bytes.
      expect(sealPart(sealed).equals(sealed)).toBe(true);
    }
  });

  it('is found damaged whatever bit changes, but in a few footer bytes: the seal entry\'s key and the headers that lead to it (the part then reads as one from before seals)', async () => {
    const sealed = sealPart(await written('flip.parquet'));
    const footerAt = sealed.length - 8 - sealed.readUInt32LE(sealed.length - 8);
    const unsealedAt = new Set<number>();
    for (let at = 0; at < sealed.length; at++) {
      for (let bit = 1; bit < 256; bit <<= 1) {
        const flipped = Buffer.from(sealed);
        flipped[at] = flipped[at]! ^ bit;
        const { state } = await checkSeal(flipped);
        expect(state, `byte ${at} of ${sealed.length}, bit ${bit}`).not.toBe('sealed');
        if (state === 'unsealed') unsealedAt.add(at);
      }
    }
    // The pages whole; of the footer, at most the seal's key and a dozen header bytes.
    expect(Math.min(...unsealedAt)).toBeGreaterThanOrEqual(footerAt);
    expect(unsealedAt.size).toBeLessThanOrEqual(SEAL_KEY.length + 12);
  });

  it('reads a file as it reads its bytes (its pages streamed)', async () => {
    const sealed = sealPart(await written('file.parquet'));
    const file = path.join(work.dir, 'sealed-file.parquet');
    await fs.writeFile(file, sealed);
    expect(await checkSealOf(file)).toEqual({ state: 'sealed' });
    const flipped = Buffer.from(sealed);
    flipped[100] = flipped[100]! ^ 1;
    await fs.writeFile(file, flipped);
    expect(await checkSealOf(file)).toEqual(await checkSeal(flipped));
    expect((await checkSealOf(file)).state).toBe('damaged');
    await fs.writeFile(file, sealed.subarray(0, 5));
    expect(await checkSealOf(file)).toMatchObject({ state: 'damaged', reason: expect.stringMatching(/not a Parquet file/) });
  });

  it('names what is wrong: a file cut short, its seal not its bytes', async () => {
    const sealed = sealPart(await written('cut.parquet'));
    expect(await checkSeal(sealed.subarray(0, sealed.length - 100))).toMatchObject({ state: 'damaged', reason: expect.stringMatching(/not a Parquet file/) });
    const flipped = Buffer.from(sealed);
    flipped[10] = flipped[10]! ^ 0xff;
    expect(await checkSeal(flipped)).toMatchObject({ state: 'damaged', reason: expect.stringMatching(/^its SHA-256 is [0-9a-f]{16}…, sealed as [0-9a-f]{16}…$/) });
  });
});
