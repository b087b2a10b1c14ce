// A stored boundary version is parsed on a thread of its own when it is large (the national set),
// so a process keeps answering while it loads one; what comes back is the version parsed in place.
import { gzipSync } from 'node:zlib';
import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { defaultBoundaries } from '../../src/boundaries/defaultBoundaries.js';
import { BoundaryRepository, type LoadedBoundaries } from '../../src/boundaries/repository.js';
import { FileObjectStore } from '../../src/store/fileStore.js';
import { tempDir } from '../support/env.js';
import { loadNationalBoundaries } from '../support/sharedData.js';

/** What a request sees of a loaded version. */
function served(loaded: LoadedBoundaries) {
  return {
    version: loaded.version,
    label: loaded.label,
    attribution: loaded.attribution,
    levels: loaded.levels,
    places: loaded.placeNames.places,
    cities: [loaded.citiesGeoJson, loaded.citiesTopoJson],
    areas: ['PH-QC', 'PH-PG', 'PH-0305400000', 'PH-0300000000'].map((code) => loaded.adminAreas.get(code) ?? null),
    levelsNamed: [...loaded.adminAreas.levels],
    // Quezon Memorial Circle; San Fernando, Pampanga; Manila City Hall
    tags: [
      [121.0497, 14.6516],
      [120.6898, 15.0286],
      [120.9812, 14.5896],
    ].map(([x, y]) => loaded.tagger.tag(x!, y!)),
  };
}

describe('boundary versions parsed on a thread', () => {
  it('a version parsed on its thread is the version parsed in place: levels, names, tags and the /cities bodies', async () => {
    const store = new FileObjectStore(await tempDir());
    const { version } = await new BoundaryRepository(store).publish(await defaultBoundaries());
    const here = await new BoundaryRepository(store, 5_000, Infinity).load(version);
    const there = await new BoundaryRepository(store, 5_000, 0).load(version);
    expect(served(there)).toEqual(served(here));
    expect(there.tagger.tag(121.0497, 14.6516)).toEqual({ instance_region_code: 'PH-QC', local_area_id: '1381300020', province_code: null, region_code: null });
    expect(there.placeNames.places.map((p) => p.code)).toEqual(['PH-QC', 'PH-PG']);
  });

  it('loads the national set with the event loop free: the parsing is the thread\'s', async () => {
    const store = new FileObjectStore(await tempDir());
    const national = await loadNationalBoundaries();
    const { version } = await new BoundaryRepository(store).publish(national);
    const repository = new BoundaryRepository(store);
    const before = performance.eventLoopUtilization();
    const loaded = await repository.load(version);
    const during = performance.eventLoopUtilization(before);
    // In place, parsing, flattening and the TopoJSON of the cities held the loop nearly all the
    // load (about a second); on the thread it is busy a fraction of it (taking the result, the
    // tagger's index, the place names).
    expect(during.utilization).toBeLessThan(0.5);
    expect(loaded.levels.localAreas.properties).toHaveLength(41_096);
    expect(loaded.tagger.tag(120.6898, 15.0286)).toMatchObject({ instance_region_code: expect.stringMatching(/^PH-/), province_code: 'PH-0305400000' });
    expect(loaded.adminAreas.get('PH-0305400000')).toMatchObject({ level: 'province', name: 'Pampanga' });
  });

  it('a stored version that does not parse fails its load with the reason, on the thread as in place', async () => {
    const store = new FileObjectStore(await tempDir());
    const version = 'ab'.repeat(12);
    await store.put(`cities/versions/${version}.json.gz`, gzipSync('{"label": "cut off'));
    for (const fromBytes of [0, Infinity]) {
      await expect(new BoundaryRepository(store, 5_000, fromBytes).load(version)).rejects.toThrow(/JSON/);
    }
  });
});
