import { describe, expect, it } from 'vitest';
import { defaultBoundaries } from '../../src/boundaries/defaultBoundaries.js';
import { BoundaryRepository, InvalidBoundariesError, PointerMovedError } from '../../src/boundaries/repository.js';
import { BoundaryPointerError, NotPublishedError } from '../../src/shared/errors.js';
import { Tagger } from '../../src/boundaries/tagger.js';
import type { BoundarySet } from '../../src/boundaries/types.js';
import { boundaryProblems } from '../../src/boundaries/validate.js';
import { FileObjectStore } from '../../src/store/fileStore.js';
import type { StoredObject } from '../../src/store/objectStore.js';
import { tempDir } from '../support/env.js';

const shipped = await defaultBoundaries();
const clone = (): BoundarySet => JSON.parse(JSON.stringify(shipped));

/** A process serving the default (re-reading the pointer each time) over `store`, and a version then published by another on the same `dir`. */
async function publishedElsewhere(store: FileObjectStore, dir: string) {
  const serving = new BoundaryRepository(store, 0);
  await serving.seedIfEmpty();
  const seeded = (await serving.current()).version;
  const next = clone();
  next.label = 'published elsewhere';
  const { version: published } = await new BoundaryRepository(new FileObjectStore(dir), 0).publish(next);
  return { serving, seeded, published };
}

/** A promise's value, or 'waiting' when it has not settled within a second. */
const settled = <T>(p: Promise<T>) => Promise.race([p, new Promise<'waiting'>((r) => setTimeout(() => r('waiting'), 1_000))]);

describe('boundary sets', () => {
  it('the shipped PSA/NAMRIA set is valid, credited, and tags landmarks with their city and barangay', () => {
    expect(boundaryProblems(shipped)).toEqual([]);
    expect(shipped.attribution).toMatch(/PSA and NAMRIA/);
    expect(shipped.cities.features.map((f) => f.properties.code)).toEqual(['PH-QC', 'PH-PG']);
    expect(shipped.localAreas.features).toHaveLength(680);
    const t = new Tagger(shipped);
    expect(t.tag(121.0497, 14.6516)).toEqual({ instance_region_code: 'PH-QC', local_area_id: '1381300020', province_code: null, region_code: null }); // Quezon Memorial Circle, Central
    expect(t.tag(120.6898, 15.0286)).toEqual({ instance_region_code: 'PH-PG', local_area_id: '0305416013', province_code: null, region_code: null }); // City of San Fernando, Lourdes
    expect(t.tag(120.5885, 15.1371)).toEqual({ instance_region_code: 'PH-PG', local_area_id: '0330100029', province_code: null, region_code: null }); // Angeles, Sto. Rosario
    expect(t.tag(120.9812, 14.5896)).toEqual({ instance_region_code: null, local_area_id: null, province_code: null, region_code: null }); // Manila City Hall
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

  it('lists the problems of malformed files instead of failing on them: a geometry without coordinates, null features and rings, a level that is no collection, a PSGC twice', () => {
    const set = clone() as any;
    set.cities.features[0].geometry = { type: 'Polygon' };
    set.cities.features[1].geometry = { type: 'MultiPolygon', coordinates: [null, [null, [[0, 0], 'x', [1, 1], [0, 0]]]] };
    set.cities.features.push(null);
    set.localAreas.features.push(null, { type: 'Feature', properties: null, geometry: { type: 'Polygon', coordinates: [[[0, 0], [1, 0], [1, 1], [0, 0]], [null, null, null, null]] } });
    set.provinces = {};
    const problems: string[] = boundaryProblems(set);
    expect(problems).toEqual(
      expect.arrayContaining([
        'cities[0]: geometry must have coordinates',
        'cities[1]: a polygon needs an outer ring',
        'cities[1]: ring 1 has a position outside longitude/latitude range',
        'cities[2]: must be a GeoJSON Feature',
        'localAreas[680]: must be a GeoJSON Feature',
        'localAreas[681]: psgc must be a 10-digit string',
        'localAreas[681]: ring 1 has a position outside longitude/latitude range',
        'provinces: must be a GeoJSON FeatureCollection',
      ]),
    );
    const twice = clone();
    twice.cities.features[0]!.properties.psgc = '1381300000';
    twice.cities.features[1]!.properties.psgc = '1381300000';
    expect(boundaryProblems(twice)).toContain('cities[1]: duplicate psgc 1381300000');
  });

  it('refuses a ring drawn across the antimeridian (it would claim every point of its latitudes), and names no partner could write or a line could show', () => {
    const set = clone();
    set.localAreas.features.push({
      type: 'Feature',
      properties: { city_code: 'PH-QC', psgc: '1399999999', name: 'Across' },
      geometry: { type: 'Polygon', coordinates: [[[179, 10], [-179, 10], [-179, 11], [179, 11], [179, 10]]] },
    });
    set.cities.features[0]!.properties.name = 'x'.repeat(201);
    set.cities.features[1]!.properties.name = 'Two\nlines';
    set.localAreas.features[0]!.properties.name = '   ';
    expect(boundaryProblems(set)).toEqual([
      'cities[0]: name must be at most 200 characters (a post\'s partner_city is), not 201',
      'cities[1]: name must not hold control characters (a line break, a tab)',
      'localAreas[0]: name is required',
      'localAreas[680]: ring 0 crosses the antimeridian (an edge spans more than 180° of longitude): cut it in two at ±180 (RFC 7946, 3.1.9)',
    ]);
    // Up to ±180 on one side, as a shape cut there is drawn: valid.
    const cut = clone();
    cut.localAreas.features.push({
      type: 'Feature',
      properties: { city_code: 'PH-QC', psgc: '1399999999', name: 'East of it' },
      geometry: { type: 'Polygon', coordinates: [[[179, 10], [180, 10], [180, 11], [179, 11], [179, 10]]] },
    });
    cut.cities.features[0]!.properties.name = 'x'.repeat(200);
    expect(boundaryProblems(cut)).toEqual([]);
  });

  it('refuses a set with no local areas (an empty file by mistake would tag no report with a barangay), and one with no cities', () => {
    const none = clone();
    none.localAreas.features = [];
    expect(boundaryProblems(none)).toEqual(['local areas: at least one local area (barangay) is needed']);
    const noCities = clone();
    noCities.cities.features = [];
    expect(boundaryProblems(noCities)).toContain('cities: at least one city is needed');
  });

  it('refuses cities that name provinces or regions the set leaves out (every tag at that level would be empty)', () => {
    const partial = clone();
    partial.cities.features[0]!.properties = { ...partial.cities.features[0]!.properties, province_psgc: '0305400000', region_psgc: '0300000000' };
    expect(boundaryProblems(partial)).toEqual([
      'cities name regions (region_psgc), but the set has no regions.geojson: add it, or publish a folder whose cities name none',
      'cities name provinces (province_psgc), but the set has no provinces.geojson: add it, or publish a folder whose cities name none',
    ]);
    // Cities that name neither need neither file.
    const { province_psgc: _province, region_psgc: _region, ...plain } = partial.cities.features[0]!.properties;
    partial.cities.features[0]!.properties = plain;
    expect(boundaryProblems(partial)).toEqual([]);
  });

  it('publishes content-addressed versions, moves the pointer, and rolls back', async () => {
    const repo = new BoundaryRepository(new FileObjectStore(await tempDir()), 0);
    await repo.seedIfEmpty();
    const seeded = (await repo.current()).version;
    expect(seeded).toBe(BoundaryRepository.versionId(shipped));
    expect((await repo.current()).label).toBe(shipped.label);
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

  it('a lost pointer is not replaced by the default while other versions are stored, an unreadable one is refused by name; rollback and publish write it again', async () => {
    const store = new FileObjectStore(await tempDir());
    const repo = new BoundaryRepository(store, 0);
    await repo.seedIfEmpty();
    const seeded = (await repo.current()).version;
    // Only the default stored: seeded again, as at a first start.
    await store.delete(['cities/current.json']);
    await repo.seedIfEmpty();
    expect((await repo.current()).version).toBe(seeded);

    const next = clone();
    next.label = 'published';
    const { version: published } = await repo.publish(next);
    await store.delete(['cities/current.json']);
    const lost = repo.seedIfEmpty();
    await expect(lost).rejects.toBeInstanceOf(BoundaryPointerError);
    await expect(lost).rejects.toThrow(new RegExp(`cities/current\\.json is missing while 1 published boundary version is stored \\(the newest stored: ${published}, .*cities rollback --to VERSION`));
    expect(await store.head('cities/current.json')).toBeUndefined();
    // A process that starts now serves none (one serving already goes on with the version it knows).
    await expect(new BoundaryRepository(store, 0).current()).rejects.toBeInstanceOf(NotPublishedError);
    await repo.rollback(published);
    expect((await repo.current()).version).toBe(published);

    for (const garbled of ['{"version":"06baf0a1b4', 'null', '{"version":""}']) {
      await store.put('cities/current.json', garbled);
      const reader = new BoundaryRepository(store, 0);
      await expect(reader.current(), garbled).rejects.toThrow(/^cities\/current\.json cannot be read \((not JSON|it names no version).*cities rollback --to VERSION/);
      // Not seeded over: the default would be served without a word.
      await reader.seedIfEmpty();
      expect((await store.get('cities/current.json'))!.body.toString()).toBe(garbled);
    }
    await repo.rollback(seeded);
    expect((await repo.current()).version).toBe(seeded);
    await store.put('cities/current.json', '{');
    expect(await repo.publish(next)).toEqual({ version: published, changed: true });
    expect((await new BoundaryRepository(store, 0).current()).version).toBe(published);
  });

  it('keeps the current version and the one before loaded, not every version ever asked for', async () => {
    const repo = new BoundaryRepository(new FileObjectStore(await tempDir()), 0);
    const versions: string[] = [];
    for (const label of ['one', 'two', 'three']) versions.push((await repo.publish({ ...clone(), label })).version);
    const [one, two, three] = versions as [string, string, string];
    const first = await repo.load(one);
    await repo.load(two);
    // Asked for again: the same, loaded once.
    expect(await repo.load(one)).toBe(first);
    const third = await repo.load(three);
    // The least recently asked for (two) went; one and three stay.
    expect(await repo.load(one)).toBe(first);
    expect(await repo.load(three)).toBe(third);
    await repo.load(two);
    expect(await repo.load(one)).not.toBe(first);
  });

  it('never undoes a publish made meanwhile elsewhere: the pointer moves only over the version read', async () => {
    const dir = await tempDir();
    // Another host publishes between this one's read of the pointer and its write.
    let elsewhere: (() => Promise<unknown>) | undefined;
    class RacedStore extends FileObjectStore {
      override async putIfMatch(key: string, body: Buffer | string, etag: string): Promise<boolean> {
        const race = elsewhere;
        elsewhere = undefined;
        await race?.();
        return super.putIfMatch(key, body, etag);
      }
      override async putIfAbsent(key: string, body: Buffer | string): Promise<boolean> {
        if (key === 'cities/current.json') {
          const race = elsewhere;
          elsewhere = undefined;
          await race?.();
        }
        return super.putIfAbsent(key, body);
      }
    }
    const here = new BoundaryRepository(new RacedStore(dir), 0);
    const other = new BoundaryRepository(new FileObjectStore(dir), 0);
    // A first start seeding the default while a first publish lands: the publish stays.
    elsewhere = () => other.publish({ ...clone(), label: 'published at the first start' });
    await here.seedIfEmpty();
    const won = (await other.latest()).version;
    expect((await here.latest()).label).toBe('published at the first start');
    // Two publishes at once: the later write is refused, and says so.
    elsewhere = () => other.publish({ ...clone(), label: 'the other publish' });
    await expect(here.publish({ ...clone(), label: 'this publish' })).rejects.toBeInstanceOf(PointerMovedError);
    expect((await here.latest()).label).toBe('the other publish');
    expect((await here.latest()).version).not.toBe(won);
  });

  it('serves the version it knows while the pointer is re-read, so a stalled store holds no request', async () => {
    // The store as a stalled endpoint makes it: reads wait until it answers, or fail.
    class StallableStore extends FileObjectStore {
      gets = 0;
      private gate: { opened: Promise<void>; open: () => void } | undefined;
      failing = false;
      stall() {
        let open!: () => void;
        this.gate = { opened: new Promise<void>((r) => (open = r)), open };
      }
      resume() {
        this.gate?.open();
        this.gate = undefined;
      }
      override async get(key: string): Promise<StoredObject | undefined> {
        this.gets += 1;
        await this.gate?.opened;
        if (this.failing) throw new Error('store unreachable');
        return super.get(key);
      }
    }
    const dir = await tempDir();
    const store = new StallableStore(dir);
    const { serving, seeded, published } = await publishedElsewhere(store, dir);

    store.stall();
    const before = store.gets;
    // Many requests at once: each answered with the known version, one read of the pointer between them.
    const answers = await Promise.all(Array.from({ length: 5 }, () => settled(serving.current())));
    expect(answers.map((a) => (a === 'waiting' ? a : a.version))).toEqual(Array(5).fill(seeded));
    expect(store.gets - before).toBe(1);
    // A job that must tag with what is published waits for the store instead.
    const latest = serving.latest();
    expect(await settled(latest)).toBe('waiting');
    store.resume();
    expect((await latest).version).toBe(published);
    expect((await serving.current()).version).toBe(published);

    // A store that fails: the known version still serves, and the failed read is handled.
    store.failing = true;
    expect((await serving.current()).version).toBe(published);
    await expect(serving.latest()).rejects.toThrow(/unreachable/);
  });

  it('an idle process answers its first request after a publish elsewhere with the new version: it re-reads the pointer and loads the version meanwhile', async () => {
    const dir = await tempDir();
    const ttlMs = 100;
    // A worker (or an API) that served the default, then sat idle.
    const serving = new BoundaryRepository(new FileObjectStore(dir), ttlMs);
    try {
      await serving.seedIfEmpty();
      const seeded = (await serving.current()).version;
      const next = clone();
      next.label = 'published while the process was idle';
      const { version: published } = await new BoundaryRepository(new FileObjectStore(dir), 0).publish(next);
      expect(published).not.toBe(seeded);
      // Long past the TTL, with nothing asked meanwhile: its next batch is tagged with the new version.
      await new Promise((resolve) => setTimeout(resolve, 10 * ttlMs + 1_000));
      expect((await serving.current()).version).toBe(published);
      // And a rollback made elsewhere likewise.
      await new BoundaryRepository(new FileObjectStore(dir), 0).rollback(seeded);
      await new Promise((resolve) => setTimeout(resolve, 10 * ttlMs + 1_000));
      expect((await serving.current()).version).toBe(seeded);
    } finally {
      serving.close();
    }
  });

  it('answers with the version before while a version newly published loads, then with the new one', async () => {
    // Reading a version's object waits at a gate; the pointer's reads are told as they are answered.
    class GatedStore extends FileObjectStore {
      gate: Promise<void> | undefined;
      pointerRead: (() => void) | undefined;
      override async get(key: string): Promise<StoredObject | undefined> {
        if (key.startsWith('cities/versions/')) await this.gate;
        const got = await super.get(key);
        if (key === 'cities/current.json') this.pointerRead?.();
        return got;
      }
    }
    const dir = await tempDir();
    const store = new GatedStore(dir);
    const { serving, seeded, published } = await publishedElsewhere(store, dir);

    let open!: () => void;
    store.gate = new Promise<void>((resolve) => (open = resolve));
    // A job reads the pointer (now the new version's) and waits for the version itself.
    const pointerRead = new Promise<void>((resolve) => (store.pointerRead = resolve));
    const latest = serving.latest();
    await pointerRead;
    await new Promise((resolve) => setImmediate(resolve));
    // Requests meanwhile: answered at once, with the version they had.
    const during = await Promise.all(Array.from({ length: 3 }, () => settled(serving.current())));
    expect(during.map((a) => (a === 'waiting' ? a : a.version))).toEqual(Array(3).fill(seeded));
    open();
    expect((await latest).version).toBe(published);
    expect((await serving.current()).version).toBe(published);
  });

  it('goes on with the version before when a version published cannot be loaded, says so, and tries it again only a while later', async () => {
    class CountingStore extends FileObjectStore {
      versionReads = 0;
      override async get(key: string): Promise<StoredObject | undefined> {
        if (key.startsWith('cities/versions/')) this.versionReads += 1;
        return super.get(key);
      }
    }
    const dir = await tempDir();
    const store = new CountingStore(dir);
    const failures: string[] = [];
    let failed!: () => void;
    const failedOnce = new Promise<void>((resolve) => (failed = resolve));
    const serving = new BoundaryRepository(store, 0, undefined, (version, err) => {
      failures.push(`${version}: ${String(err)}`);
      failed();
    });
    await serving.seedIfEmpty();
    const seeded = (await serving.current()).version;
    const next = clone();
    next.label = 'published elsewhere, then damaged';
    const { version: broken } = await new BoundaryRepository(new FileObjectStore(dir), 0).publish(next);
    await store.put(`cities/versions/${broken}.json.gz`, Buffer.from('not gzip at all'));

    // Requests go on with the version they had while the new one (once the pointer is read again) fails to load.
    while (failures.length === 0) {
      expect((await serving.current()).version).toBe(seeded);
      await Promise.race([failedOnce, new Promise((resolve) => setTimeout(resolve, 10))]);
    }
    expect(failures).toEqual([expect.stringMatching(new RegExp(`^${broken}: `))]);
    const reads = store.versionReads;
    for (let i = 0; i < 5; i++) expect((await serving.current()).version).toBe(seeded);
    // Not read and parsed again by every request.
    expect(store.versionReads).toBe(reads);
    // A worker's flush asking for what is published now (the pointer read afresh) is given the
    // version served, without reading the broken one again either.
    for (let i = 0; i < 5; i++) expect((await serving.published()).version).toBe(seeded);
    expect(store.versionReads).toBe(reads);
    // A job asking for what is published is told it cannot be loaded.
    await expect(serving.latest()).rejects.toThrow();
  });
});
