// The API's copies of release files: fetched once from the store, bounded in bytes (least
// recently served out first, never one being sent), adopted after a restart, and the layout from
// before the bound removed.
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ReleaseCopies } from '../../src/http/releaseCopies.js';
import { FileObjectStore } from '../../src/store/fileStore.js';
import { tempDir } from '../support/env.js';

const KB = 1024;

/** A store holding release 2025-r1 with three files of `KB` bytes each, and its manifest. */
async function storeWithRelease(): Promise<{ store: FileObjectStore; names: string[] }> {
  const store = new FileObjectStore(await tempDir());
  const names = ['reports-2025-01.parquet', 'reports-2025-02.parquet', 'reports-2025-03.parquet'];
  const files = [];
  for (const [i, name] of names.entries()) {
    const body = Buffer.alloc(KB, i + 1);
    await store.put(`releases/2025-r1/${name}`, body);
    files.push({ path: name, bytes: body.length, sha256: createHash('sha256').update(body).digest('hex') });
  }
  await store.put('releases/2025-r1/manifest.json', JSON.stringify({ release: '2025-r1', files }));
  return { store, names };
}

describe('release copies', () => {
  it('keep the bytes within the bound, the least recently served out first, never one being sent', async () => {
    const { store, names } = await storeWithRelease();
    const cacheDir = await tempDir();
    const copies = new ReleaseCopies(store, cacheDir, 2 * KB);
    const kept = async () => (await fs.readdir(copies.dir)).sort();

    const first = await copies.held('2025-r1', names[0]!);
    expect(await fs.readFile(first!.file)).toEqual(Buffer.alloc(KB, 1));
    first!.release();
    (await copies.held('2025-r1', names[1]!))!.release();
    expect(await kept()).toEqual([`2025-r1--${names[0]}`, `2025-r1--${names[1]}`]);
    // The first served again: the second is now the least recent, and goes for the third.
    (await copies.held('2025-r1', names[0]!))!.release();
    (await copies.held('2025-r1', names[2]!))!.release();
    expect(await kept()).toEqual([`2025-r1--${names[0]}`, `2025-r1--${names[2]}`]);

    // Held copies stay past the bound while they are sent, and go once let go.
    const a = await copies.held('2025-r1', names[0]!);
    const c = await copies.held('2025-r1', names[2]!);
    const b = await copies.held('2025-r1', names[1]!);
    expect(await kept()).toHaveLength(3);
    a!.release();
    await new Promise((r) => setTimeout(r, 50));
    expect(await kept()).toEqual([`2025-r1--${names[1]}`, `2025-r1--${names[2]}`]);
    b!.release();
    c!.release();
  });

  it('count a copy from the start of its download: the least recently served make room before it lands', async () => {
    const { store, names } = await storeWithRelease();
    // The third file's body is held back until the test lets it go: its download is under way.
    let letGo!: () => void;
    const going = new Promise<void>((resolve) => (letGo = resolve));
    let started!: () => void;
    const downloading = new Promise<void>((resolve) => (started = resolve));
    const slow = Object.assign(Object.create(store) as FileObjectStore, {
      getStream: async (key: string) => {
        const got = await store.getStream(key);
        if (!got || !key.endsWith(names[2]!)) return got;
        started();
        const body = got.body;
        return { ...got, body: Readable.from((async function* () { await going; yield* body; })()) };
      },
    });
    const copies = new ReleaseCopies(slow, await tempDir(), 2 * KB);
    for (const name of names.slice(0, 2)) (await copies.held('2025-r1', name))!.release();
    const third = copies.held('2025-r1', names[2]!);
    await downloading;
    // The least recently served copy is gone while the third is still coming (a temporary file).
    expect((await fs.readdir(copies.dir)).filter((f) => !f.endsWith('.tmp'))).toEqual([`2025-r1--${names[1]}`]);
    letGo();
    const copy = await third;
    expect(await fs.readFile(copy!.file)).toEqual(Buffer.alloc(KB, 3));
    copy!.release();
    expect((await fs.readdir(copies.dir)).sort()).toEqual([`2025-r1--${names[1]}`, `2025-r1--${names[2]}`]);
  });

  it('are adopted by the next process on the directory, and the unbounded layout is removed', async () => {
    const { store, names } = await storeWithRelease();
    const cacheDir = await tempDir();
    await fs.mkdir(path.join(cacheDir, 'releases', '2025-r1'), { recursive: true });
    await fs.writeFile(path.join(cacheDir, 'releases', '2025-r1', names[0]!), 'an old copy');
    const before = new ReleaseCopies(store, cacheDir, 10 * KB);
    (await before.held('2025-r1', names[0]!))!.release();
    expect(await fs.stat(path.join(cacheDir, 'releases')).catch(() => undefined)).toBeUndefined();
    // The next process serves the copy without the store.
    await store.delete([`releases/2025-r1/${names[0]}`]);
    const after = new ReleaseCopies(store, cacheDir, 10 * KB);
    const copy = await after.held('2025-r1', names[0]!);
    expect(await fs.readFile(copy!.file)).toEqual(Buffer.alloc(KB, 1));
    copy!.release();
    expect(await after.held('2025-r1', 'reports-2025-04.parquet')).toBeUndefined();
  });
});
