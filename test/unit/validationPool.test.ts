// An NDJSON import's records are validated on threads of their own. What comes back must be
// what the import's own thread makes of the same records (the GeoJSON and CSV path), and a thread
// that cannot work must fail the import, not leave it waiting.
import { describe, expect, it } from 'vitest';
import { compactLevels } from '../../src/boundaries/compactLevels.js';
import { defaultBoundaries } from '../../src/boundaries/defaultBoundaries.js';
import { PlaceNames, placesOf } from '../../src/boundaries/placeNames.js';
import { Tagger } from '../../src/boundaries/tagger.js';
import { emptyBatch, recordOfLine, validateInto } from '../../src/ops/validateRecords.js';
import { ValidationPool } from '../../src/ops/validationPool.js';

const set = await defaultBoundaries();
const levels = compactLevels(set);
const boundaries = { levels, placeNames: new PlaceNames(placesOf(set)) };
const tagger = new Tagger(levels);

/** Lines as ndjsonBatches hands them on: end to end, with where each ends. */
function linesOf(lines: string[]): { bytes: Buffer; ends: Int32Array } {
  const parts = lines.map((l) => Buffer.from(l));
  const ends = new Int32Array(parts.length);
  parts.reduce((at, p, i) => (ends[i] = at + p.length), 0);
  return { bytes: Buffer.concat(parts), ends };
}

const lines = [
  JSON.stringify({ post_id: 1, created_at: '2025-03-01T08:00:00+08:00', partner_city: 'quezon city', disaster_type: 'flood', location: { lat: 14.65, lng: 121.05 }, title: 'Baha', text: 'Hanggang tuhod' }),
  // No partner_city: the city holding the point names it.
  JSON.stringify({ post_id: '2', created_at: '2025-03-01 09:00:00+08', disaster_type: 'flood', location: 'POINT (120.65 15.05)' }),
  '{"post_id": 3, "created_at": ',
  JSON.stringify({ post_id: 4, created_at: '2025-03-01T08:00:00Z', partner_city: 'Atlantis', disaster_type: 'flood', location: { lat: 14.65, lng: 121.05 } }),
  JSON.stringify({ post_id: 5, created_at: '2025-02-30T08:00:00Z', partner_city: 'Pampanga', disaster_type: 'flood', location: { lat: 15.05, lng: 120.65 }, text: 'tubig \udc00' }),
  JSON.stringify({ type: 'Feature', geometry: { type: 'Point', coordinates: [121.05, 14.65] }, properties: { post_id: 6, created_at: '2025-03-01T08:00:00Z', disaster_type: 'flood', title: 'ünï "quoted"' } }),
  '[1, 2]',
];

describe('the validation threads', () => {
  for (const partner of [undefined, 'pasig-app']) {
    it(`validate as the import's thread does, record for record (${partner ? "a partner's import" : "the operators'"})`, async () => {
      const here = emptyBatch();
      lines.forEach((line, i) => validateInto(here, i, recordOfLine(line), { tagger, placeNames: boundaries.placeNames, partner }));
      expect(here.valid.index).toEqual([0, 1, 5]);
      expect(here.rejects.map((r) => r.index)).toEqual([2, 3, 4, 6]);

      const pool = new ValidationPool(boundaries, partner, 2);
      try {
        const { bytes, ends } = linesOf(lines);
        // Two batches at once, one on each thread, both as the import's thread makes them.
        const [a, b] = await Promise.all([pool.validate(bytes, ends), pool.validate(bytes, ends)]);
        expect(a).toEqual(here);
        expect(b).toEqual(here);
      } finally {
        await pool.close();
      }
    });
  }

  it('fail what they were given when a thread cannot start, and refuse more', async () => {
    // Boundaries a Tagger cannot be made from: the thread dies as it starts.
    const pool = new ValidationPool({ levels: {} as typeof levels, placeNames: boundaries.placeNames }, undefined, 1);
    try {
      const { bytes, ends } = linesOf(lines);
      await expect(pool.validate(bytes, ends)).rejects.toThrow();
      await expect(pool.validate(bytes, ends)).rejects.toThrow();
    } finally {
      await pool.close();
    }
  });
});
