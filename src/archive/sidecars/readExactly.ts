// Synchronous reads of a ready text's byte ranges: a page-cached read takes well under a
// millisecond, and a thread-pool round trip per read would mostly wait.
import { readSync } from 'node:fs';

/** Fills `out` from `position` of the open file, or fails if the file ends first. */
export function readExactly(fd: number, out: Uint8Array, position: number, file: string): void {
  for (let off = 0; off < out.byteLength; ) {
    const n = readSync(fd, out, off, out.byteLength - off, position + off);
    if (n === 0) throw new Error(`ready texts truncated: ${file}`);
    off += n;
  }
}
