// A name given twice in one object of a JSON text: found however the text is written, and the
// shortcut that counts quotes against the parsed value never misses one the full reading finds.
import { describe, expect, it } from 'vitest';
import { fieldAt, nameGivenTwice } from '../../src/shared/jsonText.js';

/** A small random JSON text, some objects with a name written twice, in various spacings and escapes. */
function randomText(random: () => number): string {
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)]!;
  const space = () => pick(['', '', ' ', '\n  ']);
  const names = ['a', 'b', 'lat', 'post_id', 't\\u0069tle', 'title', '"q"'.replace(/"/g, '\\"')];
  const value = (depth: number): string => {
    const kind = depth > 2 ? pick(['n', 's']) : pick(['n', 's', 'o', 'a']);
    if (kind === 'n') return pick(['1', '-2.5e3', 'true', 'null']);
    if (kind === 's') return pick(['"x"', '""', '"\\"quoted\\""', '"a\\\\"', '"\\"lat\\": 1"']);
    if (kind === 'a') return `[${space()}${Array.from({ length: Math.floor(random() * 3) }, () => value(depth + 1)).join(`,${space()}`)}]`;
    const chosen = Array.from({ length: 1 + Math.floor(random() * 4) }, () => pick(names));
    return `{${space()}${chosen.map((n) => `"${n}"${space()}:${space()}${value(depth + 1)}`).join(`,${space()}`)}}`;
  };
  return value(0);
}

describe('a name given twice', () => {
  it('is found by its path, escaped spellings and nesting included; names in strings or other objects are none', () => {
    expect(nameGivenTwice('{"a":1,"b":{"c":2,"c":3}}')).toEqual({ in: 'body', field: 'b.c', message: 'is given twice in one object: send each name once' });
    expect(nameGivenTwice('{"title":"a","t\\u0069tle":"b"}')?.field).toBe('title');
    expect(nameGivenTwice('{"a":[{"x":1},{"x":2,"x":3}]}')?.field).toBe('a[1].x');
    expect(nameGivenTwice('{"a":{"x":1},"b":{"x":2},"t":"\\"a\\":1,\\"a\\":2"}')).toBeUndefined();
    expect(fieldAt('{"location":{"lat":"12')).toEqual({ field: 'location.lat', inKey: false });
    expect(fieldAt('{"location":{"la')).toEqual({ field: 'location', inKey: true });
  });

  it('the count of quotes against the parsed value agrees with reading the whole text, on a thousand random texts', () => {
    let seed = 7;
    const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
    let repeated = 0;
    for (let i = 0; i < 1000; i++) {
      const text = randomText(random);
      const parsed: unknown = JSON.parse(text);
      const full = nameGivenTwice(text);
      if (full) repeated += 1;
      expect([text, nameGivenTwice(text, parsed)]).toEqual([text, full]);
    }
    // Both kinds were drawn.
    expect(repeated).toBeGreaterThan(50);
    expect(repeated).toBeLessThan(950);
  });
});
