// The point-in-polygon test over a feature's horizontal bands answers as the plain even-odd test
// over every edge, for every point, on the national boundaries' large outlines.
import { describe, expect, it } from 'vitest';
import { compactLevels, contains, containsAt, isBanded } from '../../src/boundaries/compactLevels.js';
import { random } from '../support/randomReports.js';
import { loadNationalBoundaries } from '../support/sharedData.js';

const levels = compactLevels(await loadNationalBoundaries());

describe('banded point-in-polygon', () => {
  it('agrees with the test over every edge, inside, outside and on the rows of vertices', () => {
    const next = random(42);
    let banded = 0;
    let inside = 0;
    for (const level of [levels.cities, levels.provinces!, levels.localAreas]) {
      for (let n = 0; n < 300; n++) {
        const i = Math.floor(next() * level.properties.length);
        if (isBanded(level, i)) banded += 1;
        const [x0, y0, x1, y1] = level.bboxes.subarray(4 * i, 4 * i + 4) as unknown as number[];
        const ring = level.rings[i]![0]!;
        for (let k = 0; k < 40; k++) {
          // Random points in the bbox, and points at a vertex's height (where bands meet edges' ends).
          const v = 2 * Math.floor(next() * (ring.length / 2));
          const [x, y] = k % 4 === 0 ? [x0! + next() * (x1! - x0!), ring[v + 1]!] : [x0! + next() * (x1! - x0!), y0! + next() * (y1! - y0!)];
          const want = contains(level.rings[i]!, x, y);
          if (want) inside += 1;
          expect(containsAt(level, i, x, y), `${i} at ${x},${y}`).toBe(want);
        }
        // Beyond the bbox's top and bottom: outside.
        expect(containsAt(level, i, x0!, y1! + 1)).toBe(false);
        expect(containsAt(level, i, x0!, y0! - 1)).toBe(false);
      }
    }
    // The sample holds banded features and points on both sides.
    expect(banded).toBeGreaterThan(100);
    expect(inside).toBeGreaterThan(1000);
  });
});
