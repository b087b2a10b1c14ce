// The order in which bulk re-tagging tags a part's points: every row in the window once, nearby
// points together (the tags themselves are written back by row, whatever the order).
import { describe, expect, it } from 'vitest';
import { spatialOrder } from '../../src/archive/retag.js';
import { random } from '../support/randomReports.js';

describe('spatial order', () => {
  it('is a permutation of the rows asked for, and puts neighbours next to each other', () => {
    const next = random(3);
    // Points in 50 clusters across the country, in random (time) order.
    const centres = Array.from({ length: 50 }, () => [117 + next() * 9, 5 + next() * 15] as const);
    const lng: number[] = [];
    const lat: number[] = [];
    for (let i = 0; i < 5_000; i++) {
      const [x, y] = centres[Math.floor(next() * centres.length)]!;
      lng.push(x + next() * 0.01);
      lat.push(y + next() * 0.01);
    }
    const rows = lng.map((_, i) => i).filter((i) => i % 3 !== 0);
    const order = spatialOrder(lng, lat, rows);
    expect([...order].sort((a, b) => a - b)).toEqual(rows);
    const path = (o: number[]) => o.slice(1).reduce((d, i, k) => d + Math.hypot(lng[i]! - lng[o[k]!]!, lat[i]! - lat[o[k]!]!), 0);
    // A walk through the clusters one after another, not back and forth across the country.
    expect(path(order)).toBeLessThan(path(rows) / 50);
  });

  it('keeps every row whatever the points: none, one, all the same, not numbers', () => {
    expect(spatialOrder([], [], [])).toEqual([]);
    expect(spatialOrder([121], [14], [0])).toEqual([0]);
    expect(spatialOrder([121, 121, 121], [14, 14, 14], [2, 0, 1]).sort()).toEqual([0, 1, 2]);
    expect(spatialOrder([121, Number.NaN, 120, Infinity], [14, 15, Number.NaN, 16], [0, 1, 2, 3]).sort()).toEqual([0, 1, 2, 3]);
  });
});
