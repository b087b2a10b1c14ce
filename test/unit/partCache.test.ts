// The local copy of a remote store's parts: bounded in bytes, fetched once, kept across a restart;
// ranged copies of ready texts holding the bytes asked for, at their own offsets.
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { shapedProxy } from '../../bench/shapedProxy.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PartCache } from '../../src/archive/partCache.js';
import { statsInfoOf } from '../../src/archive/sidecars/keys.js';
import { coalesce, subtract } from '../../src/archive/rangedCopy.js';
import { OverloadedError } from '../../src/shared/errors.js';
import { S3ObjectStore } from '../../src/store/s3Store.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { storeProxy } from '../support/storeProxy.js';

let peer: Emulator;
let store: S3ObjectStore;
let bucket: string;
let dir: string;

beforeAll(async () => {
  peer = await startEmulator();
  bucket = `cache-${randomBytes(4).toString('hex')}`;
  await peer.s3.send(new CreateBucketCommand({ Bucket: bucket }));
  store = new S3ObjectStore(peer.s3, { bucket, prefix: '' });
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'part-cache-'));
});

afterAll(async () => {
  await peer?.stop();
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

async function putPart(key: string, bytes: number) {
  await store.put(key, randomBytes(bytes));
  return (await store.head(key))!;
}

const cached = async () => (await fs.readdir(dir)).filter((n) => n.endsWith('.parquet'));

describe('PartCache on a remote store', () => {
  it('keeps at most its byte bound, least recently used out, and a restart adopts what is there', async () => {
    const a = await putPart('reports/v1/a.parquet', 1000);
    const b = await putPart('reports/v1/b.parquet', 1000);
    const c = await putPart('ready/v1/reports/v1/c.parquet', 1000);
    const cache = new PartCache(store, dir, 2500);

    const fileA = await cache.localFile(a);
    expect(await fs.readFile(fileA)).toEqual((await store.get(a.key))!.body);
    await cache.localFile(b);
    expect(await cache.localFile(a)).toBe(fileA); // a used again: b is now the oldest
    await cache.localFile(c);
    expect(cache.sizeBytes).toBe(2000);
    expect((await cached()).length).toBe(2);
    await expect(fs.access(fileA)).resolves.toBeUndefined();

    const restarted = new PartCache(store, dir, 2500);
    await store.delete([a.key]); // served from the adopted file, not fetched again
    expect(await fs.readFile(await restarted.localFile(a))).toHaveLength(1000);
    expect(restarted.sizeBytes).toBe(2000);
  });

  it('adopts what an earlier run left once prepared, before any read; a scan that failed is tried again by the next read', async () => {
    const cacheDir = path.join(dir, 'prepared');
    const a = await putPart('reports/v1/prepared-a.parquet', 1000);
    await new PartCache(store, cacheDir, 10_000).localFile(a);
    const restarted = new PartCache(store, cacheDir, 10_000);
    expect(restarted.sizeBytes).toBe(0);
    await restarted.prepare();
    expect(restarted.sizeBytes).toBe(1000);

    // Where its ranged copies go is taken by a file: the scan fails, and is not kept failed.
    const blocked = path.join(dir, 'blocked');
    await fs.mkdir(blocked);
    await fs.writeFile(path.join(blocked, 'ranged'), '');
    const failing = new PartCache(store, blocked, 10_000);
    await expect(failing.prepare()).rejects.toThrow();
    await fs.rm(path.join(blocked, 'ranged'));
    expect(await fs.readFile(await failing.localFile(a))).toEqual((await store.get(a.key))!.body);
  });

  it('fetches again a whole copy removed behind its back (another process on the directory evicted it), and distrusts one written before the machine booted', async () => {
    const cacheDir = path.join(dir, 'shared');
    const a = await putPart('reports/v1/shared-a.parquet', 1000);
    const body = (await store.get(a.key))!.body;
    const cache = new PartCache(store, cacheDir, 10_000);
    const file = await cache.localFile(a);
    await fs.rm(file);
    expect(await fs.readFile(await cache.localFile(a))).toEqual(body);
    // Renamed into place before a power cut, perhaps before its bytes reached the disk: a restart does not adopt it.
    const copy = await cache.localFile(a);
    await fs.truncate(copy, 10);
    const beforeBoot = new Date(Date.now() - os.uptime() * 1000 - 60_000);
    await fs.utimes(copy, beforeBoot, beforeBoot);
    const restarted = new PartCache(store, cacheDir, 10_000);
    await restarted.prepare();
    expect(restarted.sizeBytes).toBe(0);
    expect(await fs.readFile(await restarted.localFile(a))).toEqual(body);
  });

  it("reads a part's stats sidecar (asked for with its part's facts) from its copy once fetched", async () => {
    const part = await putPart('reports/v1/stats-a.parquet', 1000);
    await store.put(statsInfoOf(part).key, randomBytes(50));
    let gets = 0;
    const counting = { getStream: (key: string) => ((gets += 1), store.getStream(key)), getRangeStream: store.getRangeStream.bind(store) };
    const cache = new PartCache(counting, path.join(dir, 'stats'), 10_000);
    for (let i = 0; i < 3; i++) expect(await fs.readFile((await cache.localFileIfPresent(statsInfoOf(part)))!)).toHaveLength(50);
    expect(gets).toBe(1);
  });

  it("leaves a download another process may still be writing, and removes one idle for a quarter hour", async () => {
    const cacheDir = path.join(dir, 'downloads');
    await fs.mkdir(cacheDir, { recursive: true });
    const writing = path.join(cacheDir, '0123456789abcdef01234567-x.parquet.1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed.tmp');
    const idle = path.join(cacheDir, '0123456789abcdef01234567-y.parquet.2b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed.tmp');
    await fs.writeFile(writing, 'half');
    await fs.writeFile(idle, 'half');
    const hourAgo = new Date(Date.now() - 3_600_000);
    await fs.utimes(idle, hourAgo, hourAgo);
    await new PartCache(store, cacheDir, 10_000).prepare();
    expect((await fs.readdir(cacheDir)).filter((n) => n.endsWith('.tmp'))).toEqual([path.basename(writing)]);
  });

  it('answers undefined for an absent companion and never leaves a temporary file', async () => {
    const cache = new PartCache(store, dir, 10_000);
    const missing = { key: 'ready/v1/reports/v1/none.parquet', etag: '"x"', size: 1, lastModified: new Date() };
    expect(await cache.localFileIfPresent(missing)).toBeUndefined();
    await expect(cache.localFile(missing)).rejects.toThrow(/vanished/);
    expect((await fs.readdir(dir)).filter((n) => n.endsWith('.tmp'))).toEqual([]);
  });

  it('keeps a ranged copy: the first bytes at once, then the ranges asked for at their offsets, each fetched once', async () => {
    const body = randomBytes(3_000_000);
    await store.put('ready/v7/r1.ready', body);
    const info = { ...(await store.head('ready/v7/r1.ready'))!, etag: '"part-1"' };
    const cache = new PartCache(store, path.join(dir, 'ranged'), 10_000_000);
        const copy = (await cache.rangedFileIfPresent(info, 1000))!;
    expect(copy.size).toBe(body.length);
    expect((await fs.stat(copy.file)).size).toBe(body.length);
    expect(cache.sizeBytes).toBe(1000);
    const bytesAt = async (a: number, b: number) => {
      const handle = await fs.open(copy.file, 'r');
      try {
        const out = Buffer.alloc(b - a);
        await handle.read(out, 0, b - a, a);
        return out;
      } finally {
        await handle.close();
      }
    };
    expect(await bytesAt(0, 1000)).toEqual(body.subarray(0, 1000));
    // Two answers at once, overlapping: each byte fetched once, and the file's version (mtime) unchanged.
    const mtime = (await fs.stat(copy.file)).mtimeMs;
    await Promise.all([copy.ensure([[300_000, 310_000]]), copy.ensure([[305_000, 320_000], [590_000, 600_000]])]);
    expect(await bytesAt(300_000, 320_000)).toEqual(body.subarray(300_000, 320_000));
    expect(await bytesAt(590_000, 600_000)).toEqual(body.subarray(590_000, 600_000));
    // Not asked for: never fetched (a hole reads as zeros).
    expect((await bytesAt(100_000, 100_100)).every((b) => b === 0)).toBe(true);
    expect(cache.sizeBytes).toBe(1000 + 20_000 + 10_000);
    expect((await fs.stat(copy.file)).mtimeMs).toBe(mtime);
    // The same copy for the same object, the same bytes: nothing fetched again.
    const again = (await cache.rangedFileIfPresent(info, 1000))!;
    expect(again).toBe(copy);
    await again.ensure([[300_000, 320_000]]);
    expect(cache.sizeBytes).toBe(31_000);
    // A range of megabytes, its chunks written several at a time: every byte at its offset.
    await copy.ensure([[700_000, 2_950_000]]);
    const digest = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');
    expect(digest(await bytesAt(700_000, 2_950_000))).toBe(digest(body.subarray(700_000, 2_950_000)));
    expect(cache.sizeBytes).toBe(31_000 + 2_250_000);
  });

  it('adopts after a restart the ranged copies it or an ended process left, with the ranges they hold: nothing fetched again', async () => {
    const cacheDir = path.join(dir, 'adopt');
    const body = randomBytes(600_000);
    await store.put('ready/v7/r3.ready', body);
    const info = (await store.head('ready/v7/r3.ready'))!;
    const first = new PartCache(store, cacheDir, 10_000_000);
    const copy = (await first.rangedFileIfPresent(info, 1000))!;
    // While it runs, the journal follows what the copy holds, a second after each change at most.
    const journaled = async (bytes: number) => {
      for (let waited = 0; waited < 10_000; waited += 100) {
        const text = await fs.readFile(path.join(cacheDir, 'ranged', String(process.pid), 'journal.json'), 'utf8').catch(() => '{}');
        const copies = Object.values((JSON.parse(text) as { copies?: Record<string, { state: { present: [number, number][] } }> }).copies ?? {});
        if (copies.length === 1 && copies[0]!.state.present.reduce((n, [a, b]) => n + b - a, 0) === bytes) return true;
        await new Promise((r) => setTimeout(r, 100));
      }
      return false;
    };
    expect(await journaled(1000)).toBe(true);
    await copy.ensure([[300_000, 320_000]]);
    expect(await journaled(21_000)).toBe(true);
    await first.close();
    // Gone from the store: anything fetched from here on would fail.
    await store.delete([info.key]);
    const read = async (c: PartCache) => {
      const again = (await c.rangedFileIfPresent(info, 1000))!;
      await again.ensure([[0, 1000], [300_000, 320_000]]);
      const bytes = await fs.readFile(again.file);
      return { again, bytes, size: c.sizeBytes, cache: c };
    };
    // This process again (a container's process has the same pid each run).
    const restarted = await read(new PartCache(store, cacheDir, 10_000_000));
    expect(restarted.bytes.subarray(0, 1000)).toEqual(body.subarray(0, 1000));
    expect(restarted.bytes.subarray(300_000, 320_000)).toEqual(body.subarray(300_000, 320_000));
    expect(restarted.size).toBe(21_000);
    // A process that has ended: its directory is claimed, its copies taken over.
    const gone = spawnSync(process.execPath, ['-e', '']).pid!;
    await fs.rename(path.join(cacheDir, 'ranged', String(process.pid)), path.join(cacheDir, 'ranged', String(gone)));
    const takenOver = await read(new PartCache(store, cacheDir, 10_000_000));
    expect(takenOver.bytes.subarray(300_000, 320_000)).toEqual(body.subarray(300_000, 320_000));
    expect(takenOver.again.file.startsWith(path.join(cacheDir, 'ranged', String(process.pid)))).toBe(true);
    expect((await fs.readdir(path.join(cacheDir, 'ranged'))).sort()).toEqual([String(process.pid)]);
    // A journal from before the machine booted is not trusted: the copy goes, and is fetched anew (here: gone).
    const taker = takenOver.cache;
    await taker.close();
    const journal = path.join(cacheDir, 'ranged', String(process.pid), 'journal.json');
    const beforeBoot = new Date(Date.now() - os.uptime() * 1000 - 60_000);
    await fs.utimes(journal, beforeBoot, beforeBoot);
    const distrusting = new PartCache(store, cacheDir, 10_000_000);
    expect(await distrusting.rangedFileIfPresent(info, 1000)).toBeUndefined();
    await expect(fs.access(takenOver.again.file)).rejects.toThrow();
  });

  it('answers undefined for an absent object, fails a range of an object replaced since, and a restart keeps its journaled ranged copies, removes those the journal does not name, and never touches another running process\'s', async () => {
    const cacheDir = path.join(dir, 'restart');
    // Ranged copies left by a process that has ended, and by one still running (this one's parent).
    const gone = spawnSync(process.execPath, ['-e', '']).pid!;
    for (const pid of [gone, process.ppid]) {
      await fs.mkdir(path.join(cacheDir, 'ranged', String(pid)), { recursive: true });
      await fs.writeFile(path.join(cacheDir, 'ranged', String(pid), 'x.ranged.parquet'), 'x');
    }
    const cache = new PartCache(store, cacheDir, 10_000_000);
    expect(await cache.rangedFileIfPresent({ key: 'ready/v7/none.ready', etag: '"x"', size: 1, lastModified: new Date() }, 1000)).toBeUndefined();
    await store.put('ready/v7/r2.ready', randomBytes(50_000));
    const info = (await store.head('ready/v7/r2.ready'))!;
    const copy = (await cache.rangedFileIfPresent(info, 1000))!;
    await store.put('ready/v7/r2.ready', randomBytes(50_000));
    await expect(copy.ensure([[10_000, 20_000]])).rejects.toBeInstanceOf(OverloadedError);
    // A failed ensure does not fail the next one: bytes already present are there to read.
    await expect(copy.ensure([[0, 500]])).resolves.toBeUndefined();
    await fs.access(copy.file);
    await expect(fs.access(path.join(cacheDir, 'ranged', String(gone)))).rejects.toThrow();
    await fs.access(path.join(cacheDir, 'ranged', String(process.ppid), 'x.ranged.parquet'));
    const stray = path.join(path.dirname(copy.file), 'y.ranged.parquet');
    await fs.writeFile(stray, 'y');
    await cache.close();
    await new PartCache(store, cacheDir, 10_000_000).localFileIfPresent({ key: 'ready/v7/none.ready', etag: '"y"', size: 1, lastModified: new Date() });
    await fs.access(copy.file);
    await expect(fs.access(stray)).rejects.toThrow();
    await fs.access(path.join(cacheDir, 'ranged', String(process.ppid), 'x.ranged.parquet'));
  });

  it('fails a ranged read longer than asked (a store that ignored the range) before it lands over the bytes held, and leaves no file for a copy it could not make', async () => {
    const body = randomBytes(600_000);
    await store.put('ready/v7/r3.ready', body);
    const info = (await store.head('ready/v7/r3.ready'))!;
    // The store as a server that ignores a Range answers it: the whole object (every read, or
    // every read after the first), or from the range's start to the object's end.
    const ignoring = (from: 'zero' | 'start') =>
      Object.assign(Object.create(store) as S3ObjectStore, {
        getRangeStream: (key: string, start: number, length: number, options?: { ifMatch?: string }) =>
          from === 'zero' ? store.getRangeStream(key, 0, body.length, options) : store.getRangeStream(key, start, start === 0 ? length : body.length - start, options),
      });
    const headless = path.join(dir, 'ignoring-head');
    await expect(new PartCache(ignoring('zero'), headless, 10_000_000).rangedFileIfPresent(info, 1000)).rejects.toThrow(/longer than asked/);
    expect((await fs.readdir(headless, { recursive: true })).filter((n) => n.endsWith('.ready') || n.includes('.ranged'))).toEqual([]);

    const cache = new PartCache(ignoring('start'), path.join(dir, 'ignoring-range'), 10_000_000);
    const copy = (await cache.rangedFileIfPresent(info, 1000))!;
    await copy.ensure([[400_000, 600_000]]);
    await expect(copy.ensure([[100_000, 110_000]])).rejects.toThrow(/longer than asked/);
    const handle = await fs.open(copy.file, 'r');
    try {
      const held = Buffer.alloc(200_000);
      await handle.read(held, 0, held.length, 400_000);
      expect(held).toEqual(body.subarray(400_000));
      expect((await handle.stat()).size).toBe(body.length);
    } finally {
      await handle.close();
    }
  });

  it('fetches again what was deleted from its directory while it runs (emptied by hand), whole copies and ranged ones', async () => {
    const cacheDir = path.join(dir, 'emptied');
    const cache = new PartCache(store, cacheDir, 10_000_000);
    const texts = await putPart('ready/v1/reports/v1/emptied.parquet', 300_000);
    const part = await putPart('reports/v1/emptied-whole.parquet', 100_000);
    await (await cache.rangedFileIfPresent(texts, 100_000))!.ensure([[0, 300_000]]);
    await cache.localFile(part);
    // Its contents, then the directory itself.
    for (const emptied of [async () => { for (const f of await fs.readdir(cacheDir)) await fs.rm(path.join(cacheDir, f), { recursive: true, force: true }); }, () => fs.rm(cacheDir, { recursive: true, force: true })]) {
      await emptied();
      const again = (await cache.rangedFileIfPresent(texts, 100_000))!;
      await again.ensure([[0, 300_000]]);
      expect(await fs.readFile(again.file)).toEqual((await store.get(texts.key))!.body);
      expect(await fs.readFile(await cache.localFile(part))).toEqual((await store.get(part.key))!.body);
    }
  });

  it('fetches the ranges missing, nearby ones as one', () => {
    expect(subtract([0, 100], [[10, 20], [50, 60]])).toEqual([[0, 10], [20, 50], [60, 100]]);
    expect(subtract([15, 55], [[10, 20], [50, 60]])).toEqual([[20, 50]]);
    expect(subtract([10, 20], [[0, 30]])).toEqual([]);
    expect(coalesce([[500_000, 600_000], [0, 10], [20, 30], [29, 40]])).toEqual([[0, 40], [500_000, 600_000]]);
  });

  it('asks again for a part whose body was cut off (a reset mid-body), as a whole GET of the store does', async () => {
    // Each key's first GET is answered with its headers and half its body, then the connection is dropped.
    const cut = new Set<string>();
    const { client, close } = await storeProxy(
      () => peer.endpoint,
      (req) => {
        const key = (req.url ?? '').split('?')[0]!;
        const first = req.method === 'GET' && !cut.has(key);
        cut.add(key);
        return { headers: req.headers, cutBody: first };
      },
    );
    try {
      const cutting = new S3ObjectStore(client, { bucket, prefix: '' });
      const info = await putPart('reports/v1/cut.parquet', 200_000);
      const file = await new PartCache(cutting, path.join(dir, 'cut'), 10_000_000).localFileIfPresent(info);
      expect(await fs.readFile(file!)).toEqual((await store.get(info.key))!.body);
      const other = await putPart('reports/v1/cut-whole.parquet', 200_000);
      expect((await cutting.get(other.key))!.body).toEqual((await store.get(other.key))!.body);
      expect(cut.size).toBe(2);
    } finally {
      await close();
    }
  });

  it('asks again for a range whose body was cut off, the first bytes and a later range alike', async () => {
    // Each ranged GET (by key and range) is answered with its headers and half its body the first time.
    const cut = new Set<string>();
    const { client, close } = await storeProxy(
      () => peer.endpoint,
      (req) => {
        const asked = `${(req.url ?? '').split('?')[0]} ${req.headers.range}`;
        const first = req.method === 'GET' && req.headers.range !== undefined && !cut.has(asked);
        cut.add(asked);
        return { headers: req.headers, cutBody: first };
      },
    );
    try {
      const cutting = new S3ObjectStore(client, { bucket, prefix: '' });
      const info = await putPart('ready/v1/reports/v1/cut-ranges.parquet', 2_000_000);
      const whole = (await store.get(info.key))!.body;
      const copy = (await new PartCache(cutting, path.join(dir, 'cut-ranges'), 10_000_000).rangedFileIfPresent(info, 100_000))!;
      await copy.ensure([[1_000_000, 1_600_000]]);
      const handle = await fs.open(copy.file, 'r');
      try {
        for (const [at, length] of [[0, 100_000], [1_000_000, 600_000]] as const) {
          const held = Buffer.alloc(length);
          await handle.read(held, 0, length, at);
          expect(held).toEqual(whole.subarray(at, at + length));
        }
      } finally {
        await handle.close();
      }
      expect(cut.size).toBe(2);
    } finally {
      await close();
    }
  });

  it('fetches a year of objects asked for at once from a slow store, none timing out while it waits for a connection', async () => {
    // 200 ms before each answer's first byte, and an SDK client that gives up on a connection
    // after 1 s, its time counted while a request waits for one of the agent's 50 sockets.
    const proxy = await shapedProxy(peer.endpoint, { firstByteMs: 200, bytesPerSecond: 100e6 });
    const client = new S3Client({ endpoint: proxy.url, region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' }, forcePathStyle: true, maxAttempts: 1, requestHandler: { connectionTimeout: 1000 } });
    try {
      const slow = new S3ObjectStore(client, { bucket, prefix: '' });
      const infos = await Promise.all(Array.from({ length: 365 }, (_, i) => putPart(`stats/v2/day-${i}.stats`, 100)));
      const cache = new PartCache(slow, path.join(dir, 'slow'), 100_000_000);
      const files = await Promise.all(infos.map((info) => cache.localFileIfPresent(info)));
      expect(files.every((f) => f !== undefined)).toBe(true);
      const ranged = await Promise.all(infos.map((info) => cache.rangedFileIfPresent({ ...info, etag: `${info.etag}-ranged` }, 10)));
      expect(ranged.every((r) => r?.size === 100)).toBe(true);
    } finally {
      client.destroy();
      await proxy.close();
    }
  }, 60_000);
});
