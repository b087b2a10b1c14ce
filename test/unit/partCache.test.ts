// The local copy of a remote store's parts: bounded in bytes, fetched once, kept across a restart.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PartCache } from '../../src/archive/partCache.js';
import { S3ObjectStore } from '../../src/store/s3Store.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';

let peer: Emulator;
let store: S3ObjectStore;
let dir: string;

beforeAll(async () => {
  peer = await startEmulator();
  const bucket = `cache-${randomBytes(4).toString('hex')}`;
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

  it('answers undefined for an absent companion and never leaves a temporary file', async () => {
    const cache = new PartCache(store, dir, 10_000);
    const missing = { key: 'ready/v1/reports/v1/none.parquet', etag: '"x"', size: 1, lastModified: new Date() };
    expect(await cache.localFileIfPresent(missing)).toBeUndefined();
    await expect(cache.localFile(missing)).rejects.toThrow(/vanished/);
    expect((await fs.readdir(dir)).filter((n) => n.endsWith('.tmp'))).toEqual([]);
  });
});
