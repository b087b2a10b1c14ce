import { decodeTime, isValid } from 'ulid';
import { describe, expect, it } from 'vitest';
import { newUlid } from '../../src/shared/ulid.js';

describe('newUlid', () => {
  it('names a time, and gives ids of one millisecond that never repeat across many refills of its random pool', () => {
    const timeMs = Date.UTC(2026, 10, 21, 5, 5);
    const ids = Array.from({ length: 20_000 }, () => newUlid(timeMs));
    expect(ids.every((id) => isValid(id) && decodeTime(id) === timeMs)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    // Every character of the random part is used: the pool's bytes are not stuck at a few values.
    const used = new Set(ids.flatMap((id) => [...id.slice(10)]));
    expect(used.size).toBe(32);
  });

  it('is now by default, so names sort by time of writing', () => {
    const before = Date.now();
    const id = newUlid();
    expect(decodeTime(id)).toBeGreaterThanOrEqual(before);
    expect(decodeTime(id)).toBeLessThanOrEqual(Date.now());
    expect(newUlid(before - 1000) < newUlid(before)).toBe(true);
  });
});
