// A release's STAC geometry from its bbox: valid whatever the reports' spread (a Polygon of one
// point, or of one line, has no area and fails GEOS's validity checks).
import { describe, expect, it } from 'vitest';
import { footprintOf } from '../../src/releases/documents.js';

describe('a release footprint', () => {
  it('is a Point for reports at one place, a LineString for reports on one meridian or parallel, a Polygon otherwise', () => {
    expect(footprintOf([121.05, 14.65, 121.05, 14.65])).toEqual({ type: 'Point', coordinates: [121.05, 14.65] });
    expect(footprintOf([121.05, 14.6, 121.05, 14.7])).toEqual({ type: 'LineString', coordinates: [[121.05, 14.6], [121.05, 14.7]] });
    expect(footprintOf([120.9, 14.65, 121.1, 14.65])).toEqual({ type: 'LineString', coordinates: [[120.9, 14.65], [121.1, 14.65]] });
    expect(footprintOf([120.9, 14.6, 121.1, 14.7])).toEqual({ type: 'Polygon', coordinates: [[[120.9, 14.6], [121.1, 14.6], [121.1, 14.7], [120.9, 14.7], [120.9, 14.6]]] });
  });
});
