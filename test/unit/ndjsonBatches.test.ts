// An NDJSON import is read as bytes, a batch of lines at a time, for the validation threads. Its
// lines must be the ones Node's readline gives (LF, CRLF or a lone CR end a line; blank lines are
// no records), whatever the batch size, with a line longer than a read block, and from any
// record on when a run resumes.
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_LINE_BYTES, ndjsonBatches } from '../../src/ops/importRecords.js';

/** The file's records as readline reads them (non-blank lines), each cut as ndjsonBatches cuts a line longer than a report can be. */
async function readlineRecords(file: string): Promise<string[]> {
  const out: string[] = [];
  for await (const line of readline.createInterface({ input: createReadStream(file), crlfDelay: Infinity })) {
    const bytes = Buffer.from(line);
    if (line.trim() !== '') out.push(bytes.length > MAX_LINE_BYTES ? bytes.toString('utf8', 0, MAX_LINE_BYTES + 1) : line);
  }
  return out;
}

async function batched(file: string, size: number, skip = 0): Promise<{ lines: string[]; sizes: number[]; bytes: number }> {
  const lines: string[] = [];
  const sizes: number[] = [];
  let bytes = 0;
  for await (const batch of ndjsonBatches(file, size, skip)) {
    sizes.push(batch.ends.length);
    bytes += batch.bytes;
    batch.ends.forEach((end, i) => lines.push(batch.lines.toString('utf8', i === 0 ? 0 : batch.ends[i - 1], end)));
  }
  return { lines, sizes, bytes };
}

describe('ndjsonBatches', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ndjson-'));
  });
  afterAll(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('gives the lines readline gives, blank ones left out, in batches of the size asked for', async () => {
    const long = `{"title":"${'ü'.repeat(700_000)}"}`;
    const text = [
      '{"post_id":1}\n',
      '\n',
      '   \t \n',
      '{"post_id":2}\r\n',
      '{"post_id":3}\r{"post_id":4}\n',
      '\u00a0\n',
      `${long}\n`,
      ' {"post_id":5} \n',
      'not json\n',
      '\r\n',
      '{"post_id":6}\r',
      '{"post_id":7, "cut": "',
    ].join('');
    const file = path.join(dir, 'mixed.ndjson');
    await fs.writeFile(file, text);
    const expected = await readlineRecords(file);
    expect(expected).toHaveLength(9);
    for (const size of [1, 3, 10_000]) {
      const { lines, sizes, bytes } = await batched(file, size);
      expect(lines).toEqual(expected);
      expect(sizes.slice(0, -1).every((n) => n === size)).toBe(true);
      expect(bytes).toBe(Buffer.byteLength(text));
    }
  });

  it('gives a file of lines a lone CR ends batch by batch as it reads, not once it has read it all, and a CRLF a block boundary cuts as one line end', async () => {
    const records = Array.from({ length: 50_000 }, (_, i) => JSON.stringify({ post_id: i, title: 'x'.repeat(i % 150) }));
    const file = path.join(dir, 'cr.ndjson');
    await fs.writeFile(file, records.join('\r'));
    const size = (await fs.stat(file)).size;
    expect(size).toBeGreaterThan(4 * 1024 * 1024);
    let first: number | undefined;
    const lines: string[] = [];
    for await (const batch of ndjsonBatches(file, 1_000)) {
      first ??= batch.bytes;
      batch.ends.forEach((end, i) => lines.push(batch.lines.toString('utf8', i === 0 ? 0 : batch.ends[i - 1], end)));
    }
    expect(lines).toEqual(records);
    // A read block (1 MiB) or two, not the whole file.
    expect(first).toBeLessThanOrEqual(2 * 1024 * 1024);
    // A CRLF whose CR ends the first read block and whose LF begins the next: one line end.
    const head = `${'{"post_id":1}\r'.repeat(1_000)}`;
    const pad = `{"post_id":2,"pad":"${'p'.repeat(1024 * 1024 - Buffer.byteLength(head) - 23)}"}`;
    const straddling = `${head}${pad}\r\n{"post_id":3}\r{"post_id":4}`;
    expect(straddling.indexOf('\r\n')).toBe(1024 * 1024 - 1);
    const cut = path.join(dir, 'crlf-cut.ndjson');
    await fs.writeFile(cut, straddling);
    const expected = await readlineRecords(cut);
    expect(expected).toHaveLength(1_003);
    for (const n of [1, 7, 10_000]) expect((await batched(cut, n)).lines).toEqual(expected);
  });

  it('holds no more of a line than a report can be: a file of one endless line, and long lines among others, ends cut to MAX_LINE_BYTES + 1', async () => {
    // 24 MiB and no line end at all, then long lines between short ones, a CR in their midst.
    const endless = path.join(dir, 'endless.ndjson');
    await fs.writeFile(endless, `{"text":"${'y'.repeat(24 * 1024 * 1024)}`);
    const one = await batched(endless, 10);
    expect(one.lines.map((l) => l.length)).toEqual([MAX_LINE_BYTES + 1]);
    expect(one.lines[0]).toBe(`{"text":"${'y'.repeat(MAX_LINE_BYTES + 1 - 9)}`);
    expect(one.bytes).toBe(24 * 1024 * 1024 + 9);
    const mixed = path.join(dir, 'long-lines.ndjson');
    const long = (c: string, n: number) => `{"text":"${c.repeat(n)}"}`;
    // A line of spaces past the limit is a record all the same (refused for its length).
    const text = ['{"post_id":1}', long('a', 3 * MAX_LINE_BYTES), `${long('b', MAX_LINE_BYTES - 11)}\r{"post_id":2}`, long('c', MAX_LINE_BYTES + 5), '{"post_id":3}', ' '.repeat(2 * MAX_LINE_BYTES), '{"post_id":4}'].join('\n');
    await fs.writeFile(mixed, text);
    const expected = [...(await readlineRecords(mixed)).slice(0, 6), ' '.repeat(MAX_LINE_BYTES + 1), '{"post_id":4}'];
    expect(expected.map((l) => l.slice(0, 12))).toEqual(['{"post_id":1', `{"text":"aaa`, `{"text":"bbb`, '{"post_id":2', `{"text":"ccc`, '{"post_id":3', '            ', '{"post_id":4']);
    // The 'b' line is exactly as long as a report may be: whole.
    expect(Buffer.byteLength(expected[2]!)).toBe(MAX_LINE_BYTES);
    for (const size of [1, 4, 100]) expect((await batched(mixed, size)).lines).toEqual(expected);
  });

  it('leaves out the records a run before did, counting only non-blank lines', async () => {
    const file = path.join(dir, 'resume.ndjson');
    const records = Array.from({ length: 2_500 }, (_, i) => JSON.stringify({ post_id: i, text: 'x'.repeat(i % 900) }));
    // Blank lines among them, which are no records.
    await fs.writeFile(file, records.map((r, i) => (i % 7 === 0 ? `\n${r}` : r)).join('\n'));
    const { lines } = await batched(file, 400, 1_234);
    expect(lines).toEqual(records.slice(1_234));
  });
});
