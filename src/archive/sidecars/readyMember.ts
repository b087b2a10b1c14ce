// An hour's section as stored (FORMAT.md, "Members"): a gzip member whose deflate data ends in
// a sync flush and then an empty final block, so that its deflate data, cut out, can be joined
// with others' into the one gzip stream of an answer. Written here, and read here.
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import { crc32Combine } from './crc32Combine.js';

/**
 * One below zlib's default: a reprocess of the benchmark year 6 % faster (deflating is a fifth of
 * its CPU) for ready texts 2.4 % larger (docs/performance.md). Readers do not depend on the level.
 */
const GZIP_LEVEL = 5;
/** A gzip header without a name, comment or extra field (FLG 0): ten bytes. */
const HEADER = Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255]);
/** The end of a sync flush (an empty stored block's LEN and NLEN), then an empty final block. */
const JOINABLE_END = Buffer.from([0, 0, 0xff, 0xff, 3, 0]);
const TRAILER_BYTES = 8;
/** The most bytes a stored block holds. */
const MAX_STORED = 65_535;

const deflateRaw = promisify(zlib.deflateRaw);

/** A member's deflate data ready to be joined: it inflates to `length` bytes whose CRC-32 is `crc`, and ends byte-aligned, not final. */
export interface Deflated {
  bytes: Buffer;
  crc: number;
  length: number;
}

/**
 * Sections up to this size are compressed at once on the calling thread: the thread pool's
 * round trip cost more than the deflating (96 hours of 3.6 KB: 14–22 ms there, 4–5 ms here).
 */
const DEFLATE_HERE_BELOW = 64 * 1024;

/** The stored member of `plain`: compressed on the thread pool, or at once when short. */
export async function gzipMember(plain: Uint8Array): Promise<Buffer> {
  const options = { level: GZIP_LEVEL, finishFlush: zlib.constants.Z_SYNC_FLUSH };
  const deflated = plain.byteLength < DEFLATE_HERE_BELOW ? zlib.deflateRawSync(plain, options) : await deflateRaw(plain, options);
  const trailer = Buffer.allocUnsafe(TRAILER_BYTES);
  trailer.writeUInt32LE(zlib.crc32(plain), 0);
  trailer.writeUInt32LE(plain.byteLength % 2 ** 32, 4);
  return Buffer.concat([HEADER, deflated, JOINABLE_END.subarray(4), trailer]);
}

/**
 * The deflate data of a stored member, ready to be joined; undefined for a member not written
 * by `gzipMember` (whose last block may be final anywhere in its bits).
 */
export function deflatedOf(member: Buffer): Deflated | undefined {
  const end = member.length - TRAILER_BYTES;
  if (end < HEADER.length + JOINABLE_END.length || !member.subarray(0, 4).equals(HEADER.subarray(0, 4))) return undefined;
  if (!member.subarray(end - JOINABLE_END.length, end).equals(JOINABLE_END)) return undefined;
  return { bytes: member.subarray(HEADER.length, end - 2), crc: member.readUInt32LE(end), length: member.readUInt32LE(end + 4) };
}

/**
 * Joins deflate data into one gzip stream (RFC 1952, one member: decoders that read only a
 * first member, as curl does, read it all). Plain pieces between are deflated, or stored when
 * short; every piece ends on a byte boundary, so the next begins on one.
 */
export class GzipJoin {
  private crc = 0;
  private length = 0;
  private started = false;

  /** Bytes of the stream for deflate data already made. */
  joined(piece: Deflated): Buffer[] {
    const out = this.start();
    this.crc = crc32Combine(this.crc, piece.crc, piece.length);
    this.length += piece.length;
    out.push(piece.bytes);
    return out;
  }

  /** Bytes of the stream for plain bytes, deflated on the thread pool, independently of what came before. */
  async plain(bytes: Uint8Array, level: number): Promise<Buffer[]> {
    const out = this.start();
    if (bytes.byteLength === 0) return out;
    this.crc = zlib.crc32(bytes, this.crc);
    this.length += bytes.byteLength;
    out.push(await deflateRaw(bytes, { level, finishFlush: zlib.constants.Z_SYNC_FLUSH }));
    return out;
  }

  /**
   * Bytes of the stream for a few plain bytes (a separator between hours), as they are: stored
   * blocks, made here at once. A round trip to the thread pool for each of a year's 8,760
   * separators cost more than the whole answer's copying.
   */
  stored(bytes: Uint8Array): Buffer[] {
    const out = this.start();
    // (zlib.crc32 of no bytes is 0, whatever CRC it is given to go on from.)
    if (bytes.byteLength === 0) return out;
    this.crc = zlib.crc32(bytes, this.crc);
    this.length += bytes.byteLength;
    for (let at = 0; at < bytes.byteLength; at += MAX_STORED) {
      const n = Math.min(MAX_STORED, bytes.byteLength - at);
      // A stored block, not final, begun on a byte boundary (every piece ends on one): its 3
      // header bits and padding are one zero byte, then its length and the length's complement.
      const header = Buffer.from([0, n & 0xff, n >>> 8, ~n & 0xff, (~n >>> 8) & 0xff]);
      out.push(header, Buffer.from(bytes.buffer, bytes.byteOffset + at, n));
    }
    return out;
  }

  /** The stream's last bytes: an empty final block, the CRC-32 and the length. */
  end(): Buffer[] {
    const out = this.start();
    const trailer = Buffer.allocUnsafe(2 + TRAILER_BYTES);
    trailer.writeUInt16LE(3, 0);
    trailer.writeUInt32LE(this.crc >>> 0, 2);
    trailer.writeUInt32LE(this.length % 2 ** 32, 6);
    out.push(trailer);
    return out;
  }

  private start(): Buffer[] {
    if (this.started) return [];
    this.started = true;
    return [HEADER];
  }
}
