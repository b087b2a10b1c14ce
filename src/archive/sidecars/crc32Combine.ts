// The CRC-32 of two byte strings one after the other, from their own CRCs and the second's
// length (zlib's crc32_combine, which Node does not expose): a gzip answer joined from stored
// members needs its whole text's CRC without inflating them.

/** The CRC-32 polynomial, reflected. */
const POLY = 0xedb88320;

/** a(x) b(x) modulo p(x), in the reflected bit order of the CRC. */
function multModP(a: number, b: number): number {
  let m = 0x80000000;
  let p = 0;
  for (;;) {
    if (a & m) {
      p ^= b;
      if ((a & (m - 1)) === 0) break;
    }
    m >>>= 1;
    b = b & 1 ? (b >>> 1) ^ POLY : b >>> 1;
  }
  return p >>> 0;
}

/** x^(2^k) modulo p(x), for k = 0..31. */
const X2N: number[] = [];
{
  let p = 0x40000000; // x^1
  for (let k = 0; k < 32; k++) {
    X2N.push(p);
    p = multModP(p, p);
  }
}

/** x^(n * 2^k) modulo p(x). */
function x2nModP(n: number, k: number): number {
  let p = 0x80000000; // x^0
  while (n > 0) {
    if (n % 2 === 1) p = multModP(X2N[k & 31]!, p);
    n = Math.floor(n / 2);
    k++;
  }
  return p;
}

/** The CRC-32 of A then B, from crcA, crcB and B's length in bytes. */
export function crc32Combine(crcA: number, crcB: number, lengthB: number): number {
  return (multModP(x2nModP(lengthB, 3), crcA >>> 0) ^ crcB) >>> 0;
}
