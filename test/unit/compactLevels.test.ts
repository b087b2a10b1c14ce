// The point-in-polygon test over a feature's horizontal bands answers as the plain even-odd test
// over every edge, for every point, on the national boundaries' large outlines.
import { describe, expect, it } from 'vitest';
import { compactLevels, contains, containsAt, intersectsBox, isBanded } from '../../src/boundaries/compactLevels.js';
import type { BoundarySet } from '../../src/boundaries/types.js';
import { random } from '../support/randomReports.js';
import { loadNationalBoundaries } from '../support/sharedData.js';

const levels = compactLevels(await loadNationalBoundaries());

describe('a point on an edge two features share', () => {
  it('lies in exactly one of them, whichever way each runs the edge', () => {
    // A square cut along its diagonal: the two halves run the diagonal in opposite directions.
    // Its corners and the points on the diagonal have six decimals, as the data's do: computed
    // from either end, the diagonal's x at the third point's height differs in the last bit.
    const [x0, y0, x1, y1] = [120.361592, 14.563467, 120.363872, 14.565887];
    const below = [Float64Array.of(x0, y0, x1, y0, x1, y1, x0, y0)];
    const above = [Float64Array.of(x0, y0, x1, y1, x0, y1, x0, y0)];
    const held: string[] = [];
    for (let k = 1; k < 10; k++) {
      const [x, y] = [(120_361_592 + 228 * k) / 1e6, (14_563_467 + 242 * k) / 1e6];
      held.push(`${x},${y}: ${[contains(below, x, y) ? 'below' : '', contains(above, x, y) ? 'above' : ''].filter(Boolean).join(' and ') || 'neither'}`);
    }
    for (const line of held) expect(line).toMatch(/: (below|above)$/);
  });
});

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

describe('a feature meeting a box (OGC bbox on the boundary collections)', () => {
  it('meets a box by its area: not in its bounding box\'s empty corner or its hole, yes on an edge or wholly inside', () => {
    const set: BoundarySet = {
      label: 'shapes',
      cities: { type: 'FeatureCollection', features: [{ type: 'Feature', properties: { code: 'PH-T', name: 'Triangle' }, geometry: { type: 'Polygon', coordinates: [[[0, 0], [10, 0], [0, 10], [0, 0]]] } }] },
      localAreas: {
        type: 'FeatureCollection',
        features: [
          {
            type: 'Feature',
            properties: { psgc: '1', name: 'Ring', city_code: 'PH-T' },
            geometry: { type: 'Polygon', coordinates: [[[0, 0], [10, 0], [10, 10], [0, 10], [0, 0]], [[2, 2], [8, 2], [8, 8], [2, 8], [2, 2]]] },
          },
        ],
      },
    };
    const shapes = compactLevels(set);
    expect(intersectsBox(shapes.cities, 0, [8, 8, 9, 9])).toBe(false); // the bbox's empty corner
    expect(intersectsBox(shapes.cities, 0, [4, 4, 6, 6])).toBe(true); // across the hypotenuse
    expect(intersectsBox(shapes.cities, 0, [1, 1, 1, 1])).toBe(true); // a point inside
    expect(intersectsBox(shapes.cities, 0, [-5, -5, 20, 20])).toBe(true); // the whole of it
    expect(intersectsBox(shapes.cities, 0, [11, 0, 12, 1])).toBe(false); // beside it
    expect(intersectsBox(shapes.localAreas, 0, [4, 4, 6, 6])).toBe(false); // in the hole
    expect(intersectsBox(shapes.localAreas, 0, [1, 4, 3, 6])).toBe(true); // across the hole's edge
    expect(intersectsBox(shapes.localAreas, 0, [0.5, 0.5, 1.5, 1.5])).toBe(true); // within the ring's band
  });

  it('meets every box that holds one of its vertices or a point inside it, on the national outlines', () => {
    const next = random(7);
    let misses = 0;
    for (const level of [levels.cities, levels.localAreas]) {
      for (let n = 0; n < 200; n++) {
        const i = Math.floor(next() * level.properties.length);
        const [x0, y0, x1, y1] = level.bboxes.subarray(4 * i, 4 * i + 4) as unknown as number[];
        const w = (x1! - x0!) / 4;
        const h = (y1! - y0!) / 4;
        const bx = x0! - w + next() * (x1! - x0! + w);
        const by = y0! - h + next() * (y1! - y0! + h);
        const box = [bx, by, bx + w, by + h] as [number, number, number, number];
        const got = intersectsBox(level, i, box);
        // Found without it: a vertex in the box, or a point of a 12 × 12 grid of the box inside the feature.
        let meets = false;
        for (const ring of level.rings[i]!) for (let k = 0; k < ring.length && !meets; k += 2) meets = ring[k]! >= box[0] && ring[k]! <= box[2] && ring[k + 1]! >= box[1] && ring[k + 1]! <= box[3];
        for (let gx = 0; gx <= 11 && !meets; gx++) for (let gy = 0; gy <= 11 && !meets; gy++) meets = contains(level.rings[i]!, box[0] + (gx * w) / 11, box[1] + (gy * h) / 11);
        if (meets) expect(got, `${i} ${box.join(',')}`).toBe(true);
        if (!got) misses += 1;
      }
    }
    // Boxes in the bounding box's empty parts are told apart.
    expect(misses).toBeGreaterThan(20);
  });
});
