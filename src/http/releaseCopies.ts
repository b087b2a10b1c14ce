// Local copies of published release files, which the API serves (Range, conditional GETs) from
// disk: a file never changes once its release is published, so one copy serves every request.
// They live in one directory of the cache, `release-files/<release>--<file>`, bounded in bytes
// (the copies being fetched counted from their first byte): least recently served first out,
// never one being sent (a year's release is some 190 MB, and a release a month would otherwise
// fill an API task's disk). A copy is kept only with the size
// and SHA-256 its manifest gives, and is on disk before it is named.
import { createHash, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Transform } from 'node:stream';
import { CacheFiles, type CachedFile } from '../archive/cacheFiles.js';
import type { Manifest } from '../releases/documents.js';
import { manifestKey, RELEASES_PREFIX } from '../releases/layout.js';
import { UnavailableError } from '../shared/errors.js';
import { pipeToFile } from '../shared/files.js';
import type { ObjectStore } from '../store/objectStore.js';

/** Where the copies were kept before they were bounded (a directory a release): removed once. */
const UNBOUNDED_DIR = 'releases';

/** A copy being served: its path, and the function that lets it be evicted again. */
export interface HeldCopy {
  file: string;
  /** Its bytes. */
  size: number;
  /** The stored file's ETag and time, when this copy was just fetched (and checked) from it. */
  stored: { etag: string; lastModified: Date } | undefined;
  release(): void;
}

export class ReleaseCopies {
  private readonly files: CacheFiles<CachedFile>;
  private ready: Promise<void> | undefined;
  /** Copies being fetched, by key: requests for one at once share its download. */
  private readonly inflight = new Map<string, Promise<HeldCopy | undefined>>();

  constructor(
    private readonly store: Pick<ObjectStore, 'head' | 'get' | 'getStream'>,
    private readonly cacheDir: string,
    maxBytes: number,
  ) {
    this.files = new CacheFiles(path.join(cacheDir, 'release-files'), '', maxBytes);
  }

  /** The directory the copies are in (a sender's root). */
  get dir(): string {
    return this.files.dir;
  }

  /**
   * The local copy of release `id`'s file `name`, fetched once, held until `release()` is
   * called (the answer is sent); undefined when the store has no such file.
   */
  async held(id: string, name: string): Promise<HeldCopy | undefined> {
    await this.prepare();
    const key = `${id}--${name}`;
    const entry = this.files.get(key);
    // A copy removed by hand (or by another process on the directory) is fetched again.
    if (entry && existsSync(entry.file)) {
      this.files.touch(entry);
      return { file: entry.file, size: entry.size, stored: undefined, release: this.files.hold(entry) };
    }
    const pending = this.inflight.get(key);
    if (pending) {
      // Another request's download: this one holds the copy too, once it is in.
      const copy = await pending;
      const added = copy && this.files.get(key);
      return added ? { file: added.file, size: added.size, stored: copy.stored, release: this.files.hold(added) } : this.held(id, name);
    }
    const fetching = (async () => {
      if (entry) this.files.forget(key, entry);
      const file = this.files.fileOf(key);
      const fetched = await this.fetch(id, name, file);
      if (!fetched) return undefined;
      // Held from the start: no eviction comes between the copy and its first reader.
      const { release } = await this.files.addHeld(key, { file, size: fetched.size });
      return { file, size: fetched.size, stored: fetched.stored, release };
    })().finally(() => this.inflight.delete(key));
    this.inflight.set(key, fetching);
    return fetching;
  }

  /** Adopts the copies an earlier run left (and removes the unbounded layout's), once; a failed scan is tried again. */
  private prepare(): Promise<void> {
    return (this.ready ??= (async () => {
      await fs.rm(path.join(this.cacheDir, UNBOUNDED_DIR), { recursive: true, force: true });
      await this.files.scan();
    })().catch((err: unknown) => {
      this.ready = undefined;
      throw err;
    }));
  }

  /** Fetches the stored file into `file` and checks it: its size and the stored file's validators, or undefined when the store has none. */
  private async fetch(id: string, name: string, file: string): Promise<{ size: number; stored: { etag: string; lastModified: Date } } | undefined> {
    const key = `${RELEASES_PREFIX}${id}/${name}`;
    const info = await this.store.head(key);
    if (!info) return undefined;
    const manifest = await this.store.get(manifestKey(id));
    const expected = manifest && (JSON.parse(manifest.body.toString('utf8')) as Manifest).files.find((f) => f.path === name);
    // Counted from the start of the download: copies served less recently make room for it now,
    // so the bound holds on the disk while it lands (every copy at once being fetched too).
    const giveBack = await this.files.reserve(info.size);
    // Written aside (the cache's temporary name), then renamed: a reader never sees half a file.
    const partial = `${file}.${randomUUID()}.tmp`;
    try {
      // Made before the GET (the directory may have been removed by hand since the scan): nothing
      // may come between a body and the pipeline that reads it (and handles its errors).
      await fs.mkdir(path.dirname(file), { recursive: true });
      const found = await this.store.getStream(key);
      if (!found) return undefined;
      const hash = createHash('sha256');
      let bytes = 0;
      await pipeToFile(
        partial,
        found.body,
        new Transform({
          transform(chunk: Buffer, _encoding, done) {
            hash.update(chunk);
            bytes += chunk.length;
            done(null, chunk);
          },
        }),
      );
      const written = await fs.open(partial, 'r+');
      try {
        await written.sync();
      } finally {
        await written.close();
      }
      if (expected && (bytes !== expected.bytes || hash.digest('hex') !== expected.sha256)) {
        throw new UnavailableError('storage', `${key} as read from the store is not the file its manifest describes (${bytes} bytes; ${expected.bytes} expected)`);
      }
      await fs.rename(partial, file);
      return { size: bytes, stored: { etag: `"${found.etag.replace(/"/g, '')}"`, lastModified: found.lastModified } };
    } finally {
      // Given back as the copy is counted (held() adds it at once) or dropped, whatever the removal of its temporary name does.
      giveBack();
      await fs.rm(partial, { force: true });
    }
  }
}
