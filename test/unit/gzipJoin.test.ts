// A gzip answer joined from stored members: the CRC-32 of a whole from its pieces' CRCs, and one
// gzip member made of stored deflate data and plain bytes, which any gzip reader reads whole.
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { crc32Combine } from '../../src/archive/sidecars/crc32Combine.js';
import { deflatedOf, GzipJoin, gzipMember } from '../../src/archive/sidecars/readyMember.js';

const run = promisify(execFile);

/** Random text with repeats, as serialised reports have. */
function text(n: number): Buffer {
  const words = ['{"type":"Feature"', '"properties":', 'Baha sa kalsada', '121.03', '\n', ',', 'Quezon City', 'ñ'];
  const parts: string[] = [];
  let size = 0;
  while (size < n) {
    const w = words[randomBytes(1)[0]! % words.length]!;
    parts.push(w);
    size += Buffer.byteLength(w);
  }
  return Buffer.from(parts.join('')).subarray(0, n);
}

describe('crc32Combine', () => {
  it('gives the CRC-32 of two byte strings one after the other, from theirs and the second\'s length', () => {
    for (const [a, b] of [[0, 0], [0, 7], [5, 0], [1, 1], [1000, 3], [65_537, 100_003], [3, 1_000_000]]) {
      const x = randomBytes(a!);
      const y = randomBytes(b!);
      expect(crc32Combine(zlib.crc32(x), zlib.crc32(y), y.length)).toBe(zlib.crc32(Buffer.concat([x, y])));
    }
  });
});

describe('stored members', () => {
  // Short sections are deflated at once, long ones on the thread pool: both.
  it.each([2_000, 200_000])('are gzip members any reader inflates, whose deflate data can be cut out (%i bytes)', async (size) => {
    const plain = text(size);
    const member = await gzipMember(plain);
    expect(zlib.gunzipSync(member).equals(plain)).toBe(true);
    const deflated = deflatedOf(member)!;
    expect(deflated.length).toBe(plain.length);
    expect(deflated.crc).toBe(zlib.crc32(plain));
    // The cut-out data inflates alone to the text (a sync flush: nothing held back).
    expect(zlib.inflateRawSync(deflated.bytes, { finishFlush: zlib.constants.Z_SYNC_FLUSH }).equals(plain)).toBe(true);
    // A member zlib finished itself may end its last block anywhere in its bits: never cut.
    expect(deflatedOf(zlib.gzipSync(plain))).toBeUndefined();
  });

  it('and plain bytes join into one gzip member: gunzip and the zlib of Python read all of it, and nothing after', async () => {
    // Deflated here, joined as stored members, and sent as stored blocks (more than one block's 65,535 bytes too), in turn.
    const pieces = [text(10), text(300_000), text(2), text(1), text(70_000), text(0), text(5_000), text(100), text(70_000), text(0), text(3)];
    const join = new GzipJoin();
    const out: Buffer[] = [];
    for (const [i, piece] of pieces.entries()) {
      if (i % 3 === 0) out.push(...(await join.plain(piece, 5)));
      else if (i % 3 === 1) out.push(...join.joined(deflatedOf(await gzipMember(piece))!));
      else out.push(...join.stored(piece));
    }
    out.push(...join.end());
    const joined = Buffer.concat(out);
    const whole = Buffer.concat(pieces);
    expect(zlib.gunzipSync(joined).equals(whole)).toBe(true);
    // One member: nothing after the first member's trailer.
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'gzip-join-'));
    try {
      const file = path.join(dir, 'joined.gz');
      await fs.writeFile(file, joined);
      const { stdout } = await run('python3', ['-c', 'import sys, zlib; d = zlib.decompressobj(31); out = d.decompress(open(sys.argv[1], "rb").read()); print(len(out), len(d.unused_data), d.eof)', file]);
      expect(stdout.trim()).toBe(`${whole.length} 0 True`);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
