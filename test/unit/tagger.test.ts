// The tagger against a plain reference over the national boundaries: every feature's bbox, then
// the even-odd test over all its rings. Points inside barangays, on their vertices and edges (where
// overlapping barangays and cities tie) and anywhere in the country's bbox get the same four tags.
import { describe, expect, it } from 'vitest';
import { compactLevels, contains, type Level } from '../../src/boundaries/compactLevels.js';
import { cityParents } from '../../src/boundaries/hierarchy.js';
import { Tagger, type Tags } from '../../src/boundaries/tagger.js';
import { random } from '../support/randomReports.js';
import { loadNationalBoundaries } from '../support/sharedData.js';

const levels = compactLevels(await loadNationalBoundaries());
const tagger = new Tagger(levels);
const parents = cityParents(levels);

function holders(level: Level<unknown>, x: number, y: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < level.properties.length; i++) {
    const b = level.bboxes;
    if (x < b[4 * i]! || y < b[4 * i + 1]! || x > b[4 * i + 2]! || y > b[4 * i + 3]!) continue;
    if (contains(level.rings[i]!, x, y)) out.push(i);
  }
  return out;
}

/** The first city in the version's order; the barangay of that city, else any, with the lowest PSGC. */
function reference(x: number, y: number): Tags {
  const city = holders(levels.cities, x, y)[0];
  const code = city === undefined ? null : levels.cities.properties[city]!.code;
  const areas = holders(levels.localAreas, x, y).map((i) => levels.localAreas.properties[i]!);
  const ofCity = areas.filter((p) => p.city_code === code);
  const area = (ofCity.length > 0 ? ofCity : areas).map((p) => p.psgc).sort()[0] ?? null;
  return {
    instance_region_code: code,
    local_area_id: area,
    province_code: city === undefined ? null : parents.province[city]!,
    region_code: city === undefined ? null : parents.region[city]!,
  };
}

describe('the tagger over the national boundaries', () => {
  it('answers as the plain reference inside barangays, on their vertices and edges, and anywhere', () => {
    const next = random(7);
    const areas = levels.localAreas;
    const points: [number, number][] = [];
    for (let n = 0; n < 1_500; n++) {
      const i = Math.floor(next() * areas.properties.length);
      const [x0, y0, x1, y1] = areas.bboxes.subarray(4 * i, 4 * i + 4) as unknown as number[];
      points.push([x0! + next() * (x1! - x0!), y0! + next() * (y1! - y0!)]);
      const ring = areas.rings[i]![0]!;
      const v = 2 * Math.floor(next() * (ring.length / 2 - 1));
      points.push([ring[v]!, ring[v + 1]!]);
      points.push([(ring[v]! + ring[v + 2]!) / 2, (ring[v + 1]! + ring[v + 3]!) / 2]);
    }
    for (let n = 0; n < 500; n++) points.push([116.9 + next() * 9.7, 4.5 + next() * 16.7]);
    let inCity = 0;
    let ties = 0;
    for (const [x, y] of points) {
      const want = reference(x, y);
      if (want.instance_region_code !== null) inCity += 1;
      if (holders(areas, x, y).length > 1) ties += 1;
      expect(tagger.tag(x, y), `${x},${y}`).toEqual(want);
    }
    // The sample holds points in cities and points where barangays overlap.
    expect(inCity).toBeGreaterThan(3_000);
    expect(ties).toBeGreaterThan(50);
  });
});
