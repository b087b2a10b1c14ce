import { describe, expect, it } from 'vitest';
import { APPROXIMATE_OUTLINES } from '../../src/boundaries/approximateOutlines.js';
import { BoundaryRepository, InvalidBoundariesError } from '../../src/boundaries/repository.js';
import { Tagger } from '../../src/boundaries/tagger.js';
import type { BoundarySet } from '../../src/boundaries/types.js';
import { boundaryProblems } from '../../src/boundaries/validate.js';
import { FileObjectStore } from '../../src/store/fileStore.js';
import { tempDir } from '../support/env.js';

const clone = (): BoundarySet => JSON.parse(JSON.stringify(APPROXIMATE_OUTLINES));

describe('boundary sets', () => {
  it('the shipped approximate outlines are valid and tag the landmark points', () => {
    expect(boundaryProblems(APPROXIMATE_OUTLINES)).toEqual([]);
    const t = new Tagger(APPROXIMATE_OUTLINES);
    expect(t.tag(121.0497, 14.6516).instance_region_code).toBe('PH-QC');
    expect(t.tag(120.6898, 15.0286).instance_region_code).toBe('PH-PG');
    expect(t.tag(120.9812, 14.5896)).toEqual({ instance_region_code: null, local_area_id: null });
  });

  it('rejects open rings, duplicate codes, bad PSGC and orphan local areas', () => {
    const set = clone();
    const ring = (set.cities.features[0]!.geometry.coordinates as number[][][])[0]!;
    ring.pop();
    set.cities.features[1]!.properties.code = 'PH-QC';
    set.localAreas.features.push({
      type: 'Feature',
      properties: { city_code: 'PH-XX', psgc: '123', name: 'Nowhere' },
      geometry: { type: 'Polygon', coordinates: [[[0, 0], [1, 0], [1, 1], [0, 0]]] },
    });
    const problems = boundaryProblems(set);
    expect(problems.join('\n')).toMatch(/ring 0 is not closed/);
    expect(problems.join('\n')).toMatch(/duplicate code PH-QC/);
    expect(problems.join('\n')).toMatch(/psgc must be a 10-digit string/);
    expect(problems.join('\n')).toMatch(/city_code must name a city/);
  });

  it('publishes content-addressed versions, moves the pointer, and rolls back', async () => {
    const repo = new BoundaryRepository(new FileObjectStore(await tempDir()), 0);
    await repo.seedIfEmpty();
    const seeded = (await repo.current()).version;
    expect(seeded).toBe(BoundaryRepository.versionId(APPROXIMATE_OUTLINES));
    await repo.seedIfEmpty();
    expect(await repo.versions()).toEqual([seeded]);

    const next = clone();
    next.label = 'second';
    const published = await repo.publish(next);
    expect(published.changed).toBe(true);
    expect((await repo.current()).version).toBe(published.version);
    expect(await repo.publish(next)).toEqual({ version: published.version, changed: false });

    await repo.rollback(seeded);
    expect((await repo.current()).version).toBe(seeded);
    await expect(repo.rollback('0123456789abcdef01234567')).rejects.toThrow(/missing/);

    const bad = clone();
    bad.cities.features = [];
    await expect(repo.publish(bad)).rejects.toBeInstanceOf(InvalidBoundariesError);
    expect((await repo.current()).version).toBe(seeded);
  });
});
