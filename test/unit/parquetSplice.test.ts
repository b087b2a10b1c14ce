// The Parquet splice against answers it gave before: test/fixtures/parquet holds two
// answer-form files DuckDB wrote (day.parquet: one row group with bloom filters;
// window.parquet: three row groups and key-value metadata) and what the splice made of them
// when its footer codec was hyparquet's (spliced-*.parquet). Same sources, same bytes.
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { readFooter, spliceParquet, type Footer } from '../../src/archive/parquetSplice.js';
import { sqlString } from '../../src/archive/duckdb.js';
import { scratch } from '../support/scratch.js';

const FIXTURES = path.resolve(import.meta.dirname, '../fixtures/parquet');
const work = scratch('parquet-splice-');

/** A fixture's footer, the file embedded in a larger one (as in a sidecar) when `before`/`after` say so. */
async function source(name: string, before = 0, after = 0): Promise<Footer> {
  const bytes = await fs.readFile(path.join(FIXTURES, name));
  const host = path.join(work.dir, `${before}-${name}`);
  await fs.writeFile(host, Buffer.concat([Buffer.alloc(before, 0x5a), bytes, Buffer.alloc(after, 0xa5)]));
  const handle = await fs.open(host, 'r');
  return readFooter({ handle, offset: before, length: bytes.length });
}

async function bytesOf(footers: Footer[]): Promise<Buffer> {
  const answer = spliceParquet(footers);
  const chunks: Uint8Array[] = [];
  for await (const chunk of answer.chunks()) chunks.push(chunk);
  const bytes = Buffer.concat(chunks);
  expect(bytes.length).toBe(answer.size);
  return bytes;
}

describe('the splice', () => {
  it('gives the answers it gave before, byte for byte', async () => {
    const both = await bytesOf([await source('window.parquet', 100, 50), await source('day.parquet')]);
    expect(both.equals(await fs.readFile(path.join(FIXTURES, 'spliced-window-day.parquet')))).toBe(true);
    const one = await bytesOf([await source('day.parquet')]);
    expect(one.equals(await fs.readFile(path.join(FIXTURES, 'spliced-day.parquet')))).toBe(true);
  });

  it('answers what DuckDB reads as the sources, in order: row groups, bloom filters, key-value metadata, bbox', async () => {
    const file = path.join(work.dir, 'answer.parquet');
    await fs.writeFile(file, await bytesOf([await source('window.parquet', 100, 50), await source('day.parquet')]));
    const rows = (sql: string) => work.db.withConnection(async (conn) => (await conn.runAndReadAll(sql)).getRowObjectsJS());
    const [window, day, answer] = [path.join(FIXTURES, 'window.parquet'), path.join(FIXTURES, 'day.parquet'), file].map(sqlString);
    expect(await rows(`SELECT * FROM read_parquet(${answer})`)).toEqual(await rows(`(SELECT * FROM read_parquet(${window})) UNION ALL (SELECT * FROM read_parquet(${day}))`));
    expect(await rows(`SELECT DISTINCT row_group_id FROM parquet_metadata(${answer}) ORDER BY 1`)).toHaveLength(4);
    // The filters copied where the footer says: present values are not excluded, absent ones are.
    const probe = (value: string) => rows(`SELECT bloom_filter_excludes AS out FROM parquet_bloom_probe(${answer}, 'source', '${value}')`);
    expect((await probe('partner')).map((r) => r.out)).toEqual([false, false, false, false]);
    expect((await probe('nobody')).map((r) => r.out)).toEqual([true, true, true, true]);
    const kv = await rows(`SELECT decode(key) AS k, decode(value) AS v FROM parquet_kv_metadata(${answer})`);
    expect(kv.map((r) => r.k)).toEqual(['note', 'geo']);
    const bbox = (await rows(`SELECT min(lng) AS x0, min(lat) AS y0, max(lng) AS x1, max(lat) AS y1 FROM read_parquet(${answer})`))[0]!;
    expect(JSON.parse(String(kv[1]!.v)).columns.geometry.bbox).toEqual([bbox.x0, bbox.y0, bbox.x1, bbox.y1]);
  });
});

describe('a source that is not a whole Parquet file', () => {
  const fails = async (bytes: Buffer, message: RegExp) => {
    const file = path.join(work.dir, 'bad.parquet');
    await fs.writeFile(file, bytes);
    const handle = await fs.open(file, 'r');
    try {
      await expect(readFooter({ handle, offset: 0, length: bytes.length })).rejects.toThrow(message);
    } finally {
      await handle.close();
    }
  };

  it('is refused with why: cut short, a footer longer than the file, a footer cut short', async () => {
    const day = await fs.readFile(path.join(FIXTURES, 'day.parquet'));
    const length = day.readUInt32LE(day.length - 8);
    await fails(day.subarray(0, day.length - 3), /^not a Parquet file$/);
    await fails(Buffer.from('PAR1PAR1'), /^not a Parquet file \(8 bytes\)$/);
    const long = Buffer.from(day);
    long.writeUInt32LE(day.length, day.length - 8);
    await fails(long, new RegExp(`^Parquet footer of ${day.length} bytes in a file of ${day.length}$`));
    // The footer's last 10 bytes gone, its length and magic still right.
    const cut = Buffer.concat([day.subarray(0, day.length - 18), Buffer.alloc(8)]);
    cut.writeUInt32LE(length - 10, cut.length - 8);
    cut.write('PAR1', cut.length - 4);
    await fails(cut, /^Parquet footer unreadable: truncated: /);
  });
});
