// Boundary versions in the object store: each version an immutable object
// named by its content hash, plus a pointer to the current one. Publishing
// writes the version, then moves the pointer; rollback moves it back.
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import type { ObjectStore } from '../store/objectStore.js';
import { defaultBoundaries } from './defaultBoundaries.js';
import { AdminAreas } from './adminAreas.js';
import type { CompactLevels } from './compactLevels.js';
import { cityParents } from './hierarchy.js';
import { PlaceNames } from './placeNames.js';
import { Tagger } from './tagger.js';
import type { BoundarySet } from './types.js';
import { boundaryProblems } from './validate.js';
import { parseStoredVersion, PARSE_ON_THREAD_FROM_BYTES } from './versionParse.js';
import { BoundaryPointerError, NotPublishedError } from '../shared/errors.js';

const VERSIONS_PREFIX = 'cities/versions/';
const POINTER_KEY = 'cities/current.json';
/** A version's object: `<id>.json.gz`, or `<id>.json` for versions written before they were gzipped. */
const VERSION_SUFFIX = '.json.gz';
const PLAIN_SUFFIX = '.json';

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
  /** The credit its source asks for, where it names one. */
  attribution: string | undefined;
  /** Its regions, provinces, cities and barangays, kept compact (compactLevels.ts). */
  levels: CompactLevels;
  tagger: Tagger;
  /** What admin= may name in this version, and the cities each covers. */
  adminAreas: AdminAreas;
  /** What partner_city may name in this version. */
  placeNames: PlaceNames;
  citiesGeoJson: string;
  citiesTopoJson: string;
}

export class InvalidBoundariesError extends Error {
  override name = 'InvalidBoundariesError';
  constructor(readonly problems: string[]) {
    super(`boundaries rejected: ${problems.slice(0, 5).join('; ')}${problems.length > 5 ? ` (+${problems.length - 5} more)` : ''}`);
  }
}

/** Another publish or rollback moved the pointer between this one's read of it and its write. */
export class PointerMovedError extends Error {
  override name = 'PointerMovedError';
}

/**
 * Versions kept loaded at once: the current one and the one before (a national version is some
 * 100 MB in memory; one kept per publish and rollback ran a worker out of its memory). The one
 * requests are answered with counts among them, and is never the one let go.
 */
const LOADED_VERSIONS = 2;

/** A version that failed to load is tried again by requests no sooner than this: each try is a read and a parse. */
const LOAD_RETRY_MS = 30_000;

export class BoundaryRepository {
  /** Versions loaded or loading, the least recently asked for first; `value` once loaded. */
  private loaded = new Map<string, { promise: Promise<LoadedBoundaries>; value?: LoadedBoundaries }>();
  /** The version requests were last answered with: they still are while a newer one loads. */
  private served: LoadedBoundaries | undefined;
  /** When a version last failed to load (requests go on with `served` until it is tried again). */
  private failedAt = new Map<string, number>();
  private pointerCache: { pointer: Pointer; readAt: number } | undefined;
  /** The one pointer read under way, shared by every caller that needs it. */
  private refreshing: Promise<Pointer | undefined> | undefined;
  /** The one pointer read for a pinned version under way. */
  private pinnedRead: Promise<Pointer | undefined> | undefined;
  /** Re-reads the pointer every TTL once requests are served (keepFresh); stopped by close(). */
  private freshTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly store: ObjectStore,
    /** How long a read pointer is trusted before it is read again (other processes may publish). */
    private readonly pointerTtlMs = 5_000,
    /** A stored version at least this large is parsed on a thread of its own (versionParse.ts). */
    private readonly parseOnThreadFromBytes = PARSE_ON_THREAD_FROM_BYTES,
    /** Told of a version published that could not be loaded (requests go on with the one before). */
    private readonly onLoadFailed: (version: string, err: unknown) => void = () => undefined,
  ) {}

  static versionId(set: BoundarySet): string {
    // Members a set lacks are left out, so versions published before they existed keep their ids.
    const canonical = JSON.stringify({
      label: set.label,
      ...(set.attribution !== undefined && { attribution: set.attribution }),
      ...(set.regions !== undefined && { regions: set.regions }),
      ...(set.provinces !== undefined && { provinces: set.provinces }),
      cities: set.cities,
      localAreas: set.localAreas,
    });
    return createHash('sha256').update(canonical).digest('hex').slice(0, 24);
  }

  /**
   * The version to serve a request with: the pointer last read, re-read in the background once
   * it is older than the TTL. A request never waits on that read when a version is already
   * known, so a stalled store cannot hold every post and page behind it; nor on the loading of a
   * version newly published (about a second for the national set): until it is loaded, requests
   * are answered with the version they were a moment before.
   */
  async current(): Promise<LoadedBoundaries> {
    this.keepFresh();
    const pointer = await this.pointer();
    if (!pointer) throw new NotPublishedError('no boundary version is published yet: run bootstrap, or cities publish');
    // A version that failed to load is tried again a while later; the version before serves meanwhile.
    if (this.served && Date.now() - (this.failedAt.get(pointer.version) ?? -Infinity) < LOAD_RETRY_MS) return this.served;
    const entry = this.entry(pointer.version);
    if (!entry.value && this.served) return this.served;
    const loaded = entry.value ?? (await entry.promise);
    // Served from now on only while it is still the one pointed at (a publish here may have moved on meanwhile).
    if (this.pointerCache?.pointer.version === loaded.version) this.served = loaded;
    return loaded;
  }

  /**
   * From the first current() on (a service asks at start), the pointer is re-read every TTL and
   * a version newly pointed at begins loading, whether or not anything asks: a worker idle since
   * a publish elsewhere tags its next batch with the new version, not its next one or two
   * batches with the old one (a request answered from a stale pointer only starts the read). A
   * TTL of 0 re-reads on demand.
   */
  private keepFresh(): void {
    if (this.freshTimer || this.closed || this.pointerTtlMs <= 0) return;
    let reading = false;
    this.freshTimer = setInterval(() => {
      if (reading) return;
      reading = true;
      void this.refresh().finally(() => (reading = false));
    }, this.pointerTtlMs);
    // A process ends when its work does, not when this says so.
    this.freshTimer.unref();
  }

  /** The pointer read again, and the version it names loading unless it is (or failed a moment ago). */
  private async refresh(): Promise<void> {
    // A store unreachable for a moment: the next tick reads again, and requests go on meanwhile.
    const pointer = await this.readPointer().catch(() => undefined);
    if (!pointer || this.closed || this.loaded.has(pointer.version)) return;
    if (Date.now() - (this.failedAt.get(pointer.version) ?? -Infinity) < LOAD_RETRY_MS) return;
    // Its failure is handled (and told) where the entry is made.
    this.entry(pointer.version);
  }

  /** Stops re-reading the pointer (the process is shutting down). */
  close(): void {
    this.closed = true;
    clearInterval(this.freshTimer);
    this.freshTimer = undefined;
  }

  /** The version published now, read from the store: for jobs that must not tag with an older one. */
  /**
   * The version published now, the pointer read afresh and the version loaded if need be: what a
   * worker's flush stores with, since a reprocess run just after a publish reads no other. While
   * that version failed to load within LOAD_RETRY_MS, the one this process serves (current()'s):
   * a version that cannot be loaded is not read and parsed again for every flush.
   */
  async published(): Promise<LoadedBoundaries> {
    const pointer = await this.pointer(true);
    if (!pointer) throw new NotPublishedError('no boundary version is published yet: run bootstrap, or cities publish');
    if (this.served && Date.now() - (this.failedAt.get(pointer.version) ?? -Infinity) < LOAD_RETRY_MS) return this.served;
    return this.entry(pointer.version).promise;
  }

  async latest(): Promise<LoadedBoundaries> {
    const pointer = await this.pointer(true);
    if (!pointer) throw new NotPublishedError('no boundary version is published yet: run bootstrap, or cities publish');
    return this.load(pointer.version);
  }

  load(version: string): Promise<LoadedBoundaries> {
    return this.entry(version).promise;
  }

  /**
   * A version a client began with (`version=`, as /cities/levels gave it): one this process keeps
   * loaded, or the one published now or just before it, loaded if need be (this process may not
   * have seen a publish made elsewhere yet, or may have started after it). Undefined for any
   * other: a client naming ids cannot make the process read and parse every version stored (an
   * id the pointer does not name costs a read of the pointer, shared by the requests at once).
   */
  async pinned(version: string): Promise<LoadedBoundaries | undefined> {
    const kept = this.loaded.get(version)?.value;
    if (kept) return kept;
    let pointer = this.pointerCache?.pointer;
    if (pointer?.version !== version && pointer?.previous !== version) {
      // Requests naming versions at once share one read.
      this.pinnedRead ??= this.readPointer().finally(() => (this.pinnedRead = undefined));
      pointer = await this.pinnedRead;
    }
    if (pointer?.version !== version && pointer?.previous !== version) return undefined;
    return this.load(version);
  }

  /** A version's entry, its loading begun if it was not loaded or loading, and made the most recently asked for. */
  private entry(version: string): { promise: Promise<LoadedBoundaries>; value?: LoadedBoundaries } {
    let entry = this.loaded.get(version);
    if (entry) {
      // The most recently asked for last.
      this.loaded.delete(version);
    } else {
      // One read and parse per version, however many requests ask for it at once.
      const loading: { promise: Promise<LoadedBoundaries>; value?: LoadedBoundaries } = { promise: this.read(version) };
      loading.promise.then(
        (value) => {
          loading.value = value;
          this.failedAt.delete(version);
        },
        (err: unknown) => {
          if (this.loaded.get(version) === loading) this.loaded.delete(version);
          this.failedAt.set(version, Date.now());
          this.onLoadFailed(version, err);
        },
      );
      entry = loading;
    }
    this.loaded.set(version, entry);
    // The least recently asked for go, but not the one requests are answered with (a request
    // holding another keeps it until it is done).
    for (const [old, { value }] of this.loaded) {
      if (this.loaded.size <= LOADED_VERSIONS) break;
      if (value === undefined || value !== this.served) this.loaded.delete(old);
    }
    return entry;
  }

  private async read(version: string): Promise<LoadedBoundaries> {
    if (!/^[0-9a-f]{24}$/.test(version)) throw new Error(`not a boundary version id: ${version}`);
    // Versions are gzipped JSON (the national set is 27 MB of JSON, 6 MB gzipped); versions
    // published before that are plain JSON.
    const zipped = await this.store.get(`${VERSIONS_PREFIX}${version}${VERSION_SUFFIX}`);
    const obj = zipped ?? (await this.store.get(`${VERSIONS_PREFIX}${version}${PLAIN_SUFFIX}`));
    if (!obj) throw new Error(`boundary version ${version} is missing from the store`);
    const parsed = await parseStoredVersion({ body: obj.body, gzipped: zipped !== undefined }, this.parseOnThreadFromBytes);
    const { levels } = parsed;
    return {
      version,
      label: parsed.label,
      attribution: parsed.attribution,
      levels,
      tagger: new Tagger(levels),
      placeNames: new PlaceNames(parsed.places),
      adminAreas: new AdminAreas(levels, version, cityParents(levels)),
      citiesGeoJson: parsed.citiesGeoJson,
      citiesTopoJson: parsed.citiesTopoJson,
    };
  }

  /** Validates and publishes; returns the version id (publishing the same content twice is a no-op). */
  async publish(set: BoundarySet): Promise<{ version: string; changed: boolean }> {
    const problems = boundaryProblems(set);
    if (problems.length > 0) throw new InvalidBoundariesError(problems);
    const version = BoundaryRepository.versionId(set);
    const stored: StoredBoundarySet = { id: version, ...set };
    await this.store.putIfAbsent(`${VERSIONS_PREFIX}${version}${VERSION_SUFFIX}`, gzipSync(JSON.stringify(stored)));
    // An unreadable pointer is replaced: publishing is one of the ways to mend it.
    const read = await this.readPointerStored();
    if (read?.pointer?.version === version) {
      // What this process publishes is what its next request sees, whatever it served before.
      this.served = undefined;
      return { version, changed: false };
    }
    await this.movePointer(version, read);
    return { version, changed: true };
  }

  async rollback(version: string): Promise<void> {
    await this.load(version); // must exist and parse
    // An unreadable or lost pointer is written again: rolling back is how an operator mends it.
    await this.movePointer(version, await this.readPointerStored());
  }

  async versions(): Promise<string[]> {
    return (await this.storedVersions()).map((v) => v.version);
  }

  /** Each stored version, with when it was stored (a version stored twice, in two forms: the first). */
  async storedVersions(): Promise<{ version: string; storedAt: Date }[]> {
    const out = new Map<string, Date>();
    for await (const info of this.store.list({ prefix: VERSIONS_PREFIX })) {
      const version = info.key.slice(VERSIONS_PREFIX.length).replace(/\.json(\.gz)?$/, '');
      const known = out.get(version);
      if (!known || info.lastModified < known) out.set(version, info.lastModified);
    }
    return [...out].map(([version, storedAt]) => ({ version, storedAt }));
  }

  /**
   * First start: publish the project's default boundaries (PSA/NAMRIA, two cities) so the service
   * runs. Only where no version is stored but the default: a pointer lost while other versions
   * are stored (deleted by hand, a partial restore) is not silently replaced by the default
   * (BoundaryPointerError, naming the newest stored), nor is an unreadable one.
   */
  async seedIfEmpty(): Promise<void> {
    if (await this.readPointerStored()) return;
    const set = await defaultBoundaries();
    const seeded = BoundaryRepository.versionId(set);
    const others = (await this.storedVersions()).filter((v) => v.version !== seeded);
    // A pointer a publish wrote meanwhile (its version stored first, then the pointer) stands.
    if (others.length > 0 && (await this.readPointerStored())) return;
    if (others.length > 0) {
      const newest = others.reduce((a, b) => (b.storedAt > a.storedAt ? b : a));
      throw new BoundaryPointerError(
        `${POINTER_KEY} is missing while ${others.length} published boundary version${others.length === 1 ? ' is' : 's are'} stored (the newest stored: ${newest.version}, ${newest.storedAt.toISOString()}): point at the one to serve with \`flood-archive cities rollback --to VERSION\` (\`cities list\` lists them)`,
      );
    }
    // One published meanwhile (`cities publish` as this process starts) stays.
    await this.publish(set).catch((err: unknown) => {
      if (!(err instanceof PointerMovedError)) throw err;
    });
  }

  private async pointer(fresh = false): Promise<Pointer | undefined> {
    if (fresh) return this.readPointer();
    const cached = this.pointerCache;
    if (cached && Date.now() - cached.readAt < this.pointerTtlMs) return cached.pointer;
    if (!this.refreshing) {
      const read = this.readPointer();
      this.refreshing = read;
      // Settled here, so a failed background read is never unhandled; the next caller tries again.
      void read.catch(() => undefined).finally(() => {
        if (this.refreshing === read) this.refreshing = undefined;
      });
    }
    // Stale while the read is under way (or has failed: the store unreachable for a moment).
    if (cached) return cached.pointer;
    return this.refreshing;
  }

  private async readPointer(): Promise<Pointer | undefined> {
    return (await this.readPointerObject())?.pointer;
  }

  /** The pointer and the version of its object, read from the store; one that cannot be read throws BoundaryPointerError. */
  private async readPointerObject(): Promise<{ pointer: Pointer; etag: string } | undefined> {
    const readAt = Date.now();
    const stored = await this.readPointerStored();
    if (!stored) return undefined;
    const { pointer, etag, problem } = stored;
    if (!pointer) {
      throw new BoundaryPointerError(
        `${POINTER_KEY} cannot be read (${problem}): point at a version again with \`flood-archive cities rollback --to VERSION\` (\`cities list\` lists them)`,
      );
    }
    // A read that began before a pointer was written here must not put the older one back.
    if (!this.pointerCache || this.pointerCache.readAt <= readAt) this.pointerCache = { pointer, readAt };
    return { pointer, etag };
  }

  /** The pointer object as stored: its version (etag), and the pointer or why it cannot be read. */
  private async readPointerStored(): Promise<{ etag: string; pointer?: Pointer; problem?: string } | undefined> {
    const obj = await this.store.get(POINTER_KEY);
    if (!obj) return undefined;
    try {
      const pointer = JSON.parse(obj.body.toString('utf8')) as Partial<Pointer> | null;
      if (typeof pointer?.version !== 'string' || pointer.version === '') return { etag: obj.etag, problem: 'it names no version' };
      return { etag: obj.etag, pointer: pointer as Pointer };
    } catch (err) {
      return { etag: obj.etag, problem: `not JSON: ${(err as Error).message}` };
    }
  }

  /**
   * Points at `version`, over the pointer as `read` (created if there was none): a publish or
   * rollback that moved it meanwhile, from any host, is not undone (PointerMovedError), as two
   * writers both reading the old pointer would otherwise each think theirs stands.
   */
  private async movePointer(version: string, read: { pointer?: Pointer; etag: string } | undefined): Promise<void> {
    const pointer: Pointer = { version, published_at: new Date().toISOString(), previous: read?.pointer?.version ?? null };
    const body = JSON.stringify(pointer);
    const moved = read ? await this.store.putIfMatch(POINTER_KEY, body, read.etag) : await this.store.putIfAbsent(POINTER_KEY, body);
    if (!moved) {
      const now = await this.readPointer();
      if (now?.version === version) {
        this.served = undefined;
        return;
      }
      throw new PointerMovedError(`another publish or rollback made ${now?.version ?? 'no version'} current meanwhile; this one changed nothing: run it again if it should win`);
    }
    this.pointerCache = { pointer, readAt: Date.now() };
    // A publish or rollback of this process is what its next request sees (waiting for its load).
    this.served = undefined;
  }
}
