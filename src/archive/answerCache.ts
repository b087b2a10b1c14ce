// Local cache of whole Parquet answers, keyed by the window's strong validator
// (its filters and the (key, ETag) of every part it reads): the same key means
// the same bytes, so an entry never goes stale. Researchers pull the same year
// again and again; writing it takes DuckDB about two seconds, sending it from
// disk a tenth of that. Bounded in bytes, least recently used first out.
import fs, { type FileHandle } from 'node:fs/promises';
import type { Metrics } from '../metrics.js';
import { isCode } from '../files.js';
import { CacheFiles, type CachedFile } from './cacheFiles.js';

export interface CachedAnswer {
  /** Open on the answer: it stays readable if the entry is evicted meanwhile. */
  handle: FileHandle;
  size: number;
}

export class AnswerCache {
  private readonly files: CacheFiles<CachedFile>;
  private ready: Promise<void> | undefined;

  constructor(
    dir: string,
    maxBytes: number,
    private readonly metrics?: Metrics,
  ) {
    this.files = new CacheFiles(dir, '.parquet', maxBytes);
  }

  async open(key: string): Promise<CachedAnswer | undefined> {
    if (this.files.maxBytes <= 0) return undefined;
    await (this.ready ??= this.scan());
    const entry = this.files.get(key);
    if (entry) {
      try {
        const handle = await fs.open(entry.file, 'r');
        this.files.touch(entry);
        this.metrics?.answerCacheRequests.inc({ result: 'hit' });
        return { handle, size: entry.size };
      } catch (err) {
        if (!isCode(err, 'ENOENT')) throw err;
        // Removed behind our back (a cleaned cache directory): write it again.
        this.files.forget(key, entry);
      }
    }
    this.metrics?.answerCacheRequests.inc({ result: 'miss' });
    return undefined;
  }

  /** Moves a finished answer into the cache; false (the file left where it is) when it does not fit. */
  async adopt(key: string, file: string): Promise<boolean> {
    if (this.files.maxBytes <= 0) return false;
    await (this.ready ??= this.scan());
    const { size } = await fs.stat(file);
    if (size > this.files.maxBytes) return false;
    const target = this.files.fileOf(key);
    await fs.rename(file, target);
    await this.files.add(key, { file: target, size });
    this.metrics?.answerCacheBytes.set(this.files.sizeBytes);
    return true;
  }

  private async scan(): Promise<void> {
    await this.files.scan();
    this.metrics?.answerCacheBytes.set(this.files.sizeBytes);
  }
}
