// Boundary versions in the object store: each version an immutable object
// named by its content hash, plus a pointer to the current one. Publishing
// writes the version, then moves the pointer; rollback moves it back.
import { createHash } from 'node:crypto';
import { topology } from 'topojson-server';
import type { ObjectStore } from '../store/objectStore.js';
import { APPROXIMATE_OUTLINES } from './approximateOutlines.js';
import { Tagger } from './tagger.js';
import type { BoundarySet } from './types.js';
import { boundaryProblems } from './validate.js';

const VERSIONS_PREFIX = 'cities/versions/';
const POINTER_KEY = 'cities/current.json';
/** Quantization of the /cities TopoJSON: about a metre over the Philippines' extent. */
const CITIES_QUANTIZATION = 1e5;

interface Pointer {
  version: string;
  published_at: string;
  previous: string | null;
}

export interface StoredBoundarySet extends BoundarySet {
  id: string;
}

/** A version ready to serve: its tagger and its prebuilt /cities bodies. */
export interface LoadedBoundaries {
  version: string;
  label: string;
  set: StoredBoundarySet;
  tagger: Tagger;
  citiesGeoJson: string;
  citiesTopoJson: string;
}

export class InvalidBoundariesError extends Error {
  override name = 'InvalidBoundariesError';
  constructor(readonly problems: string[]) {
    super(`boundaries rejected: ${problems.slice(0, 5).join('; ')}${problems.length > 5 ? ` (+${problems.length - 5} more)` : ''}`);
  }
}

export class BoundaryRepository {
  private loaded = new Map<string, LoadedBoundaries>();
  private pointerCache: { pointer: Pointer; readAt: number } | undefined;

  constructor(
    private readonly store: ObjectStore,
    /** How long a read pointer is trusted before it is read again (other processes may publish). */
    private readonly pointerTtlMs = 5_000,
  ) {}

  static versionId(set: BoundarySet): string {
    const canonical = JSON.stringify({ label: set.label, cities: set.cities, localAreas: set.localAreas });
    return createHash('sha256').update(canonical).digest('hex').slice(0, 24);
  }

  async current(): Promise<LoadedBoundaries> {
    const pointer = await this.pointer();
    if (!pointer) throw new Error('no boundary version is published');
    return this.load(pointer.version);
  }

  async load(version: string): Promise<LoadedBoundaries> {
    const hit = this.loaded.get(version);
    if (hit) return hit;
    if (!/^[0-9a-f]{24}$/.test(version)) throw new Error(`not a boundary version id: ${version}`);
    const obj = await this.store.get(`${VERSIONS_PREFIX}${version}.json`);
    if (!obj) throw new Error(`boundary version ${version} is missing from the store`);
    const set = JSON.parse(obj.body.toString('utf8')) as StoredBoundarySet;
    const cities = set.cities.features.map((f) => ({
      type: 'Feature' as const,
      geometry: f.geometry,
      properties: { code: f.properties.code, name: f.properties.name },
    }));
    const collection = { type: 'FeatureCollection' as const, features: cities };
    const result: LoadedBoundaries = {
      version,
      label: set.label,
      set,
      tagger: new Tagger(set),
      citiesGeoJson: JSON.stringify({ statusCode: 200, result: collection }),
      citiesTopoJson: JSON.stringify({ statusCode: 200, result: topology({ output: collection }, CITIES_QUANTIZATION) }),
    };
    this.loaded.set(version, result);
    return result;
  }

  /** Validates and publishes; returns the version id (publishing the same content twice is a no-op). */
  async publish(set: BoundarySet): Promise<{ version: string; changed: boolean }> {
    const problems = boundaryProblems(set);
    if (problems.length > 0) throw new InvalidBoundariesError(problems);
    const version = BoundaryRepository.versionId(set);
    const stored: StoredBoundarySet = { id: version, label: set.label, cities: set.cities, localAreas: set.localAreas };
    await this.store.putIfAbsent(`${VERSIONS_PREFIX}${version}.json`, JSON.stringify(stored));
    const pointer = await this.pointer(true);
    if (pointer?.version === version) return { version, changed: false };
    await this.writePointer(version, pointer?.version ?? null);
    return { version, changed: true };
  }

  async rollback(version: string): Promise<void> {
    await this.load(version); // must exist and parse
    const pointer = await this.pointer(true);
    await this.writePointer(version, pointer?.version ?? null);
  }

  async versions(): Promise<string[]> {
    const out: string[] = [];
    for await (const info of this.store.list({ prefix: VERSIONS_PREFIX })) {
      out.push(info.key.slice(VERSIONS_PREFIX.length).replace(/\.json$/, ''));
    }
    return out;
  }

  /** First start: publish the project's approximate outlines so the service runs. */
  async seedIfEmpty(): Promise<void> {
    if (!(await this.pointer(true))) await this.publish(APPROXIMATE_OUTLINES);
  }

  private async pointer(fresh = false): Promise<Pointer | undefined> {
    const now = Date.now();
    if (!fresh && this.pointerCache && now - this.pointerCache.readAt < this.pointerTtlMs) {
      return this.pointerCache.pointer;
    }
    const obj = await this.store.get(POINTER_KEY);
    if (!obj) return undefined;
    const pointer = JSON.parse(obj.body.toString('utf8')) as Pointer;
    this.pointerCache = { pointer, readAt: now };
    return pointer;
  }

  private async writePointer(version: string, previous: string | null): Promise<void> {
    const pointer: Pointer = { version, published_at: new Date().toISOString(), previous };
    await this.store.put(POINTER_KEY, JSON.stringify(pointer));
    this.pointerCache = { pointer, readAt: Date.now() };
  }
}
