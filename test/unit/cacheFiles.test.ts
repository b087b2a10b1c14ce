// The part cache's files against their bound: eviction passes run at once (each answer that
// adds, grows or lets go of a file starts one), each over the entries as it listed them. A pass
// that reaches an entry another pass evicted since, and whose key was fetched again to the same
// file, must leave that file: it removed it, and every later hit on the key found no file.
import fs from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { CacheFiles, type CachedFile } from '../../src/archive/cacheFiles.js';
import { tempDir } from '../support/env.js';

const exists = (file: string) => fs.access(file).then(() => true, () => false);

describe('cache files', () => {
  it('a pass over a stale listing leaves the file of a key fetched again since', async () => {
    const dir = await tempDir('flood-cache-files-');
    const cache = new CacheFiles<CachedFile>(dir, '.parquet', 10_000);
    const put = async (key: string, size: number) => {
      const file = cache.fileOf(key);
      await fs.writeFile(file, Buffer.alloc(size));
      await cache.add(key, { file, size });
      return cache.get(key)!;
    };
    // Many small files, then the key K, all held while the cache is filled past its bound.
    const small: CachedFile[] = [];
    for (let i = 0; i < 400; i++) small.push(await put(`x${i}`, 1));
    const first = await put('K', 1);
    const releases = [...small, first].map((e) => cache.hold(e));
    await put('big', 20_000);
    const holdBig = cache.hold(cache.get('big')!);
    // Each small file let go starts a pass: all of them list the small files, then K, in that order.
    for (const release of releases.slice(0, -1)) release();
    // K used again (so a new pass finds it first), then let go: that pass evicts it at once.
    cache.touch(first);
    for (const e of small) cache.touch(e);
    releases.at(-1)!();
    while (await exists(first.file)) await new Promise((r) => setImmediate(r));
    // K fetched again, to the same file, while the earlier passes are still at their small files.
    const again = await put('K', 1);
    expect(again.file).toBe(first.file);
    // Every pass ends: the small files are gone.
    while ((await fs.readdir(dir)).some((n) => n.startsWith('x'))) await new Promise((r) => setTimeout(r, 5));
    await new Promise((r) => setTimeout(r, 50));
    expect(cache.get('K')).toBe(again);
    expect(await exists(again.file)).toBe(true);
    holdBig();
  });
});
