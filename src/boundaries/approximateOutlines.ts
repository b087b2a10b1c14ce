// APPROXIMATE OUTLINES, NOT OFFICIAL BOUNDARIES.
// Hand-drawn polygons of a dozen vertices each, so that a fresh clone can tag
// reports with a city before anyone publishes real boundaries. They are off by
// up to a kilometre or more near the edges and carry no barangays, so every
// report tagged under them has local_area_id null. Publish official boundaries
// (e.g. PSA/NAMRIA) with `cities publish`, then reprocess.
import type { BoundarySet } from './types.js';

export const APPROXIMATE_OUTLINES: BoundarySet = {
  label: 'approximate outlines (hand-drawn, not official; publish official boundaries to replace)',
  cities: {
    type: 'FeatureCollection',
    features: [
      {
        type: 'Feature',
        properties: { code: 'PH-QC', name: 'Quezon City' },
        geometry: {
          type: 'Polygon',
          coordinates: [
            [
              [121.03, 14.59],
              [121.07, 14.605],
              [121.085, 14.63],
              [121.1, 14.67],
              [121.125, 14.72],
              [121.11, 14.76],
              [121.07, 14.777],
              [121.03, 14.76],
              [121.01, 14.72],
              [120.995, 14.68],
              [120.995, 14.65],
              [121.01, 14.615],
              [121.03, 14.59],
            ],
          ],
        },
      },
      {
        type: 'Feature',
        properties: { code: 'PH-PG', name: 'Pampanga' },
        geometry: {
          type: 'Polygon',
          coordinates: [
            [
              [120.5, 14.8],
              [120.62, 14.77],
              [120.75, 14.78],
              [120.88, 14.82],
              [120.95, 14.9],
              [120.93, 15.05],
              [120.87, 15.17],
              [120.78, 15.25],
              [120.65, 15.27],
              [120.52, 15.24],
              [120.4, 15.2],
              [120.36, 15.1],
              [120.4, 14.95],
              [120.5, 14.8],
            ],
          ],
        },
      },
    ],
  },
  localAreas: { type: 'FeatureCollection', features: [] },
};
