// ULIDs, the time-sortable names of parts, change logs, import runs and deliveries, with their
// randomness drawn from a pooled buffer of the OS's random bytes: the package's own source asks
// the OS for one byte per character, 16 calls and some 80 µs an id, which a bulk job pays for
// every part it writes.
import { randomFillSync } from 'node:crypto';
import { ulid } from 'ulid';

const pool = Buffer.alloc(4096);
let next = pool.length;

/** A random number in [0, 1) from one random byte, as the package's own source gives it. */
function pooledRandom(): number {
  if (next >= pool.length) {
    randomFillSync(pool);
    next = 0;
  }
  return pool[next++]! / 256;
}

/** A new ULID of `timeMs` (now by default). */
export const newUlid = (timeMs?: number): string => ulid(timeMs, pooledRandom);
