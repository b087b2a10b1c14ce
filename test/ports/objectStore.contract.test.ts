// One contract, every adapter: the file store and S3 (fauxqs, and moto where it is installed) must agree.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import http from 'node:http';
import { CreateBucketCommand, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { UnavailableError } from '../../src/shared/errors.js';
import { FileObjectStore, isTemporaryName, localFiles } from '../../src/store/fileStore.js';
import { sweepLeftovers } from '../../src/store/leftovers.js';
import type { ObjectStore } from '../../src/store/objectStore.js';
import { S3ObjectStore } from '../../src/store/s3Store.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { HAS_MOTO, MOTO_MISSING, startMoto } from '../support/moto.js';
import { storeProxy } from '../support/storeProxy.js';
import { tempDir } from '../support/env.js';

let emulator: Emulator;
let moto: Emulator | undefined;
let lean: Emulator | undefined;
beforeAll(async () => {
  emulator = await startEmulator();
  if (HAS_MOTO) [moto, lean] = await Promise.all([startMoto(), startMoto({ lean: true })]);
});
afterAll(async () => {
  await emulator.stop();
  await moto?.stop();
  await lean?.stop();
});
if (!HAS_MOTO) console.warn(MOTO_MISSING);

/** The built store, for child processes (the suite's build step makes it). */
const DIST_FILE_STORE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../dist/src/store/fileStore.js');

/** Runs `body` in a process of its own with `store`, a file store on `root`; resolves to what it wrote to stdout. */
async function inStoreProcess(root: string, body: string): Promise<string> {
  const script = `const { FileObjectStore } = await import(process.argv[1]);\nconst store = new FileObjectStore(process.argv[2]);\n${body}`;
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script, DIST_FILE_STORE, root], { timeout: 120_000 });
  return stdout;
}

const s3Store = (peer: () => Emulator) => async () => {
  const bucket = `contract-${randomBytes(4).toString('hex')}`;
  await peer().s3.send(new CreateBucketCommand({ Bucket: bucket }));
  return new S3ObjectStore(peer().s3, { bucket, prefix: 'some/prefix/' });
};

// fauxqs ignores If-Match on a PUT, and checks If-None-Match before it takes in the body, so
// writers creating one key at once all win: it keeps the contract except those two (the tests
// that race writers run on the file store or moto).
const adapters: { name: string; enforcesIfMatch: boolean; createsAtomically: boolean; make: () => Promise<ObjectStore> }[] = [
  { name: 'file', enforcesIfMatch: true, createsAtomically: true, make: async () => new FileObjectStore(await tempDir()) },
  { name: 's3 (fauxqs)', enforcesIfMatch: false, createsAtomically: false, make: s3Store(() => emulator) },
  ...(HAS_MOTO ? [{ name: 's3 (moto)', enforcesIfMatch: true, createsAtomically: true, make: s3Store(() => moto!) }] : []),
  // The benchmarks' moto (its listings by a sorted index of names) keeps the contract too.
  ...(HAS_MOTO ? [{ name: 's3 (moto_lean)', enforcesIfMatch: true, createsAtomically: true, make: s3Store(() => lean!) }] : []),
];

async function collect(it: AsyncIterable<{ key: string }>): Promise<string[]> {
  const out: string[] = [];
  for await (const x of it) out.push(x.key);
  return out;
}

describe.each(adapters)('object store contract: $name', ({ make, enforcesIfMatch, createsAtomically }) => {
  it('reads back what it stored, with size and an etag that changes with content', async () => {
    const store = await make();
    expect(await store.get('a/b.json')).toBeUndefined();
    expect(await store.head('a/b.json')).toBeUndefined();
    await store.put('a/b.json', '{"x":1}');
    const got = await store.get('a/b.json');
    expect(got?.body.toString()).toBe('{"x":1}');
    expect(got?.size).toBe(7);
    const head1 = await store.head('a/b.json');
    expect(head1?.size).toBe(7);
    await store.put('a/b.json', '{"x":22}');
    const head2 = await store.head('a/b.json');
    expect(head2?.size).toBe(8);
    expect(head2?.etag).not.toBe(head1?.etag);
  });

  it('stores empty objects by every kind of write, with nothing printed (the AWS SDK warns of a body of unknown length)', async () => {
    const store = await make();
    const warned = vi.spyOn(console, 'warn');
    try {
      await store.put('empty/put', '');
      expect(await store.putIfAbsent('empty/created', '')).toBe(true);
      expect(await store.putIfMatch('empty/put', '', (await store.head('empty/put'))!.etag)).toBe(true);
      expect(warned).not.toHaveBeenCalled();
    } finally {
      warned.mockRestore();
    }
    for (const key of ['empty/put', 'empty/created']) {
      expect((await store.get(key))?.body.byteLength).toBe(0);
      expect((await store.head(key))?.size).toBe(0);
    }
  });

  it('reads a byte range of an object, shorter at its end, empty past it, with the whole object\'s size and ETag', async () => {
    const store = await make();
    expect(await store.getRange('r/x.bin', 0, 4)).toBeUndefined();
    const body = Buffer.from(Array.from({ length: 300 }, (_, i) => i % 251));
    await store.put('r/x.bin', body);
    const head = await store.head('r/x.bin');
    const first = await store.getRange('r/x.bin', 0, 10);
    expect(first?.body).toEqual(body.subarray(0, 10));
    expect(first?.size).toBe(300);
    expect(first?.etag).toBe(head?.etag);
    expect((await store.getRange('r/x.bin', 120, 50))?.body).toEqual(body.subarray(120, 170));
    expect((await store.getRange('r/x.bin', 290, 64))?.body).toEqual(body.subarray(290));
    const past = await store.getRange('r/x.bin', 400, 8);
    expect(past?.body.length).toBe(0);
    expect(past?.size).toBe(300);
  });

  it('streams a byte range as getRange reads it, with the whole object\'s size and ETag; none of a version replaced', async () => {
    const store = await make();
    const gather = async (got: { body: AsyncIterable<Uint8Array> } | undefined) => {
      if (!got) return undefined;
      const chunks: Uint8Array[] = [];
      for await (const chunk of got.body) chunks.push(chunk);
      return Buffer.concat(chunks);
    };
    expect(await store.getRangeStream('r/s.bin', 0, 4)).toBeUndefined();
    const body = Buffer.from(Array.from({ length: 300_000 }, (_, i) => i % 251));
    await store.put('r/s.bin', body);
    const etag = (await store.head('r/s.bin'))!.etag;
    const first = await store.getRangeStream('r/s.bin', 1_000, 200_000, { ifMatch: etag });
    expect([first?.size, first?.etag]).toEqual([300_000, etag]);
    expect(await gather(first)).toEqual(body.subarray(1_000, 201_000));
    expect(await gather(await store.getRangeStream('r/s.bin', 299_990, 64))).toEqual(body.subarray(299_990));
    const past = await store.getRangeStream('r/s.bin', 400_000, 8);
    expect([past?.size, (await gather(past))?.length]).toEqual([300_000, 0]);
    await store.put('r/s.bin', Buffer.alloc(10));
    expect(await store.getRangeStream('r/s.bin', 0, 5, { ifMatch: etag })).toBeUndefined();
  });

  it('reads a range only of the version asked for: none once the object was replaced', async () => {
    await readsOnlyTheVersionAskedFor(await make(), 'r/v.bin');
  });

  it('creates only if absent, and keeps the first content', async () => {
    const store = await make();
    expect(await store.putIfAbsent('k/1.json', 'first')).toBe(true);
    expect(await store.putIfAbsent('k/1.json', 'second')).toBe(false);
    expect((await store.get('k/1.json'))?.body.toString()).toBe('first');
  });

  if (createsAtomically) {
    it('lets exactly one of many writers creating a key at once win, and keeps its content', async () => {
      // Bodies of 4 MB, so the writers overlap. moto, unpatched, checks the key and then writes
      // it with nothing held between: on a loaded machine two writers both won a scheduler's
      // tick (moto_atomic.py). fauxqs lets every writer here win.
      const store = await make();
      for (let round = 0; round < 4; round++) {
        const key = `race/${round}.json`;
        const bodies = Array.from({ length: 8 }, (_, i) => Buffer.alloc(4 * 1024 * 1024, `writer ${i} `));
        const won = await Promise.all(bodies.map((body) => store.putIfAbsent(key, body)));
        expect(won.filter(Boolean), key).toHaveLength(1);
        expect((await store.get(key))!.body.equals(bodies[won.indexOf(true)]!), key).toBe(true);
      }
    });
  }

  if (enforcesIfMatch) {
    it('replaces only the version it read: not one written or deleted since', async () => {
      const store = await make();
      expect(await store.putIfMatch('m/1.json', 'new', '"not-an-etag"')).toBe(false);
      expect(await store.head('m/1.json')).toBeUndefined();
      await store.put('m/1.json', 'one');
      const read = (await store.get('m/1.json'))!;
      expect(await store.putIfMatch('m/1.json', 'two', read.etag)).toBe(true);
      const two = (await store.get('m/1.json'))!;
      expect(two.body.toString()).toBe('two');
      expect(two.etag).not.toBe(read.etag);
      // Another writer replaced it since it was read: left as the other writer made it.
      expect(await store.putIfMatch('m/1.json', 'three', read.etag)).toBe(false);
      expect((await store.get('m/1.json'))!.body.toString()).toBe('two');
      // Deleted since it was read: stays deleted.
      await store.delete(['m/1.json']);
      expect(await store.putIfMatch('m/1.json', 'four', two.etag)).toBe(false);
      expect(await store.get('m/1.json')).toBeUndefined();
      expect(await collect(store.list({ prefix: 'm/' }))).toEqual([]);
    });
  }

  it('lists in key order, within the prefix, after startAfter', async () => {
    const store = await make();
    const keys = [
      'reports/v1/year=2026/month=11/day=21/hour=13/part-b.parquet',
      'reports/v1/year=2026/month=11/day=21/hour=13/part-a.parquet',
      'reports/v1/year=2026/month=11/day=21/hour=02/part-c.parquet',
      'reports/v1/year=2025/month=01/day=01/hour=00/part-d.parquet',
      'reports/v10/x.parquet',
      'reports-other/y',
      'cities/current.json',
    ];
    for (const k of keys) await store.put(k, 'x');
    expect(await collect(store.list({ prefix: 'reports/v1/' }))).toEqual([
      'reports/v1/year=2025/month=01/day=01/hour=00/part-d.parquet',
      'reports/v1/year=2026/month=11/day=21/hour=02/part-c.parquet',
      'reports/v1/year=2026/month=11/day=21/hour=13/part-a.parquet',
      'reports/v1/year=2026/month=11/day=21/hour=13/part-b.parquet',
    ]);
    expect(
      await collect(store.list({ prefix: 'reports/v1/', startAfter: 'reports/v1/year=2026/month=11/day=21/hour=13/' })),
    ).toEqual([
      'reports/v1/year=2026/month=11/day=21/hour=13/part-a.parquet',
      'reports/v1/year=2026/month=11/day=21/hour=13/part-b.parquet',
    ]);
    expect(await collect(store.list({ prefix: 'reports' }))).toEqual([
      'reports-other/y',
      ...[
        'reports/v1/year=2025/month=01/day=01/hour=00/part-d.parquet',
        'reports/v1/year=2026/month=11/day=21/hour=02/part-c.parquet',
        'reports/v1/year=2026/month=11/day=21/hour=13/part-a.parquet',
        'reports/v1/year=2026/month=11/day=21/hour=13/part-b.parquet',
      ],
      'reports/v10/x.parquet',
    ]);
  });

  it('deletes, ignoring keys that are already gone', async () => {
    const store = await make();
    await store.put('d/1', 'x');
    await store.put('d/2', 'x');
    await store.delete(['d/1', 'd/missing']);
    expect(await collect(store.list({ prefix: 'd/' }))).toEqual(['d/2']);
  });

  it('copies an object to another key, which keeps it once the first is replaced or deleted; none from a key that is absent', async () => {
    const store = await make();
    const body = randomBytes(300_000);
    await store.put('ready/v7/year=2025/month=08/day=01/hour=all/part-A.ready', body);
    expect(await store.copy('ready/v7/year=2025/month=08/day=01/hour=all/part-A.ready', 'ready/v7/year=2025/month=08/day=01/hour=all/part-B.ready')).toBe(true);
    await store.put('ready/v7/year=2025/month=08/day=01/hour=all/part-A.ready', 'replaced');
    expect((await store.get('ready/v7/year=2025/month=08/day=01/hour=all/part-B.ready'))?.body.equals(body)).toBe(true);
    await store.delete(['ready/v7/year=2025/month=08/day=01/hour=all/part-A.ready']);
    const copied = await store.head('ready/v7/year=2025/month=08/day=01/hour=all/part-B.ready');
    expect(copied?.size).toBe(body.length);
    expect(await store.copy('ready/v7/year=2025/month=08/day=01/hour=all/part-A.ready', 'c/elsewhere')).toBe(false);
    expect(await store.head('c/elsewhere')).toBeUndefined();
  });

  it('streams an object, to a local file as the part cache does', async () => {
    const store = await make();
    const body = randomBytes(300_000);
    await store.put('bin/blob', body);
    const got = await store.getStream('bin/blob');
    expect(got?.size).toBe(body.length);
    expect(got?.etag).toBe((await store.head('bin/blob'))?.etag);
    const file = path.join(await tempDir(), 'blob');
    await pipeline(got!.body, createWriteStream(file));
    expect((await fs.readFile(file)).equals(body)).toBe(true);
    expect(await store.getStream('bin/missing')).toBeUndefined();
  });

  it('streams the bytes it had when the stream began, and a stream left unread can be destroyed', async () => {
    const store = await make();
    await store.put('bin/v', 'first');
    const first = await store.getStream('bin/v');
    await store.put('bin/v', 'second, longer');
    const chunks: Buffer[] = [];
    for await (const chunk of first!.body) chunks.push(chunk as Buffer);
    expect(Buffer.concat(chunks).toString()).toBe('first');
    const unread = await store.getStream('bin/v');
    unread!.body.destroy();
    expect((await store.get('bin/v'))?.body.toString()).toBe('second, longer');
  });

  it('refuses keys that could escape the store', async () => {
    const store = await make();
    await expect(store.put('../escape', 'x')).rejects.toThrow(/invalid object key/);
    await expect(store.get('a//b')).rejects.toThrow(/invalid object key/);
  });
});

describe('object store failures', () => {
  it('S3 unreachable becomes UnavailableError, not an SDK error', async () => {
    const other = await startEmulator();
    const store = new S3ObjectStore(other.s3, { bucket: 'gone', prefix: '' });
    await other.s3.send(new CreateBucketCommand({ Bucket: 'gone' }));
    await other.stop();
    await expect(store.put('a', 'x')).rejects.toBeInstanceOf(UnavailableError);
    await expect(store.head('a')).rejects.toBeInstanceOf(UnavailableError);
    await expect(store.ping()).rejects.toBeInstanceOf(UnavailableError);
  });

  it('a file store whose directory cannot be written becomes UnavailableError', async () => {
    const dir = await tempDir();
    const blocker = path.join(dir, 'not-a-dir');
    await fs.writeFile(blocker, 'x');
    const store = new FileObjectStore(blocker);
    await expect(store.put('a/b', 'x')).rejects.toBeInstanceOf(UnavailableError);
  });
});

describe('file store folders', () => {
  it('leaves no empty folder behind a delete (as S3 has none), and never removes its root', async () => {
    const root = await tempDir();
    const store = new FileObjectStore(root);
    await store.put('reports/v1/day=01/hour=00/part-a.parquet', 'x');
    await store.put('reports/v1/day=01/hour=all/part-b.parquet', 'x');
    await store.delete(['reports/v1/day=01/hour=00/part-a.parquet']);
    expect(await fs.readdir(path.join(root, 'reports/v1/day=01'))).toEqual(['hour=all']);
    await store.delete(['reports/v1/day=01/hour=all/part-b.parquet']);
    expect(await fs.readdir(root)).toEqual([]);
  });

  it('a process that exits part-way through its writes (an ops command stopped by Ctrl-C) leaves none of their temporary files', async () => {
    const root = await tempDir();
    // Exits as soon as both writes' temporary files stand (they are flushed to the disk then).
    const child = `
      const { readdirSync } = await import('node:fs');
      const dir = process.argv[2] + '/releases/2026-11-r1';
      setInterval(() => {
        let names = [];
        try { names = readdirSync(dir); } catch {}
        if (names.filter((n) => n.includes('.tmp-')).length === 2) { process.stdout.write(names.join(',')); process.exit(0); }
      }, 0);
      void store.put('releases/2026-11-r1/reports.csv.gz', Buffer.alloc(128 << 20, 1));
      void store.putIfAbsent('releases/2026-11-r1/reports.parquet', Buffer.alloc(128 << 20, 2));
    `;
    const seen = (await inStoreProcess(root, child)).split(',');
    expect(seen.filter((n) => n.includes('.tmp-'))).toHaveLength(2);
    expect(await fs.readdir(path.join(root, 'releases/2026-11-r1'))).toEqual(seen.filter((n) => !n.includes('.tmp-')));
  });

  it('a write into a folder another process pruned meanwhile still lands', async () => {
    const root = await tempDir();
    const writer = new FileObjectStore(root);
    const other = new FileObjectStore(root);
    await writer.put('ingest/pending/p/1.json', '1');
    // `other` deletes the last key: the folder `writer` knows it made is gone.
    await other.delete(['ingest/pending/p/1.json']);
    await expect(fs.stat(path.join(root, 'ingest'))).rejects.toMatchObject({ code: 'ENOENT' });
    await writer.put('ingest/pending/p/2.json', '2');
    expect(await writer.putIfAbsent('ingest/pending/p/3.json', '3')).toBe(true);
    expect(await collect(other.list({ prefix: 'ingest/' }))).toEqual(['ingest/pending/p/2.json', 'ingest/pending/p/3.json']);
  });

  it('writes into new folders land while another process keeps deleting, and pruning, every key under them', async () => {
    const root = await tempDir();
    // Parts and sidecars written into hours whose folders a job's retirements empty and prune
    // meanwhile: Node's recursive mkdir fails (ENOENT, ENOTDIR) when a folder of the path it is
    // making goes before it is done.
    const writer = (name: string) => `
      const failures = [];
      let n = 0;
      const until = Date.now() + 3000;
      for (; Date.now() < until; n++) {
        await store.put('reports/' + (n % 7) + '/day/hour/${name}-' + n + '.parquet', 'x').catch((err) => failures.push(err.message));
      }
      process.stdout.write(JSON.stringify({ n, failures: failures.slice(0, 3), failed: failures.length }));`;
    const deleter = `
      const until = Date.now() + 3000;
      while (Date.now() < until) {
        const keys = [];
        for await (const info of store.list({ prefix: 'reports/' })) keys.push(info.key);
        await store.delete(keys);
      }`;
    const [a, b] = await Promise.all([inStoreProcess(root, writer('a')), inStoreProcess(root, writer('b')), inStoreProcess(root, deleter)]);
    for (const out of [a, b]) {
      const { n, failed, failures } = JSON.parse(out) as { n: number; failed: number; failures: string[] };
      expect(n).toBeGreaterThan(100);
      expect({ failed, failures }).toEqual({ failed: 0, failures: [] });
    }
  });

  it('a pinned file stays readable after its object is deleted, until let go; pins are never listed, and are swept once a dead process leaves them', async () => {
    const root = await tempDir();
    const store = new FileObjectStore(root);
    const files = localFiles(root);
    const key = 'reports/v1/day=01/hour=all/part-b.parquet';
    await store.put(key, 'the part');
    // Written long ago: a pin made now is young all the same.
    const dayAgo = new Date(Date.now() - 86_400_000);
    await fs.utimes(files.fileOf(key), dayAgo, dayAgo);
    const pin = files.pin(key)!;
    const second = files.pin(key)!;
    await store.delete([key]);
    expect(await store.get(key)).toBeUndefined();
    expect(await fs.readFile(pin.file, 'utf8')).toBe('the part');
    expect(await collect(store.list({ prefix: '' }))).toEqual([]);
    pin.release();
    await expect(fs.stat(pin.file)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await fs.readFile(second.file, 'utf8')).toBe('the part');
    expect(files.pin(key)).toBeUndefined();
    // A process killed while it held `second`: its pin is swept once its inode has not changed for the age.
    expect((await sweepLeftovers([root], (name) => (isTemporaryName(name) ? 60_000 : undefined))).removed).toBe(0);
    expect((await sweepLeftovers([root], (name) => (isTemporaryName(name) ? 60_000 : undefined), Date.now() + 120_000)).removed).toBe(1);
    await expect(fs.stat(second.file)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('lets one of several processes replacing the version they all read win, never two, each over the body it read', async () => {
    // The embedded store shared by `all` and a CLI job: a lock taken over from a dead holder, a
    // scheduler's lease. Each process reads the key and replaces what it read, again and again.
    const root = await tempDir();
    const store = new FileObjectStore(root);
    await store.put('jobs/locks/compact.json', JSON.stringify({ n: 0 }));
    const child = `
      const won = [];
      for (let i = 0; i < 300; i++) {
        const read = await store.get('jobs/locks/compact.json');
        const n = JSON.parse(read.body.toString()).n + 1;
        if (await store.putIfMatch('jobs/locks/compact.json', JSON.stringify({ n }), read.etag)) won.push(read.etag);
      }
      process.stdout.write(JSON.stringify(won));`;
    const outs = await Promise.all(Array.from({ length: 4 }, () => inStoreProcess(root, child)));
    const won = outs.flatMap((o) => JSON.parse(o) as string[]);
    // Every win replaced a version no other win replaced, so the count kept its every step.
    expect(won.length).toBeGreaterThan(4);
    expect(new Set(won).size).toBe(won.length);
    expect(JSON.parse((await store.get('jobs/locks/compact.json'))!.body.toString()).n).toBe(won.length);
    expect((await fs.readdir(path.join(root, 'jobs/locks'))).sort()).toEqual(['compact.json']);
  });

  it('a replace waits while another process compares, and takes over what a process killed meanwhile left', async () => {
    const root = await tempDir();
    const store = new FileObjectStore(root);
    await store.put('jobs/leases/verify.json', '1');
    const mutex = `${localFiles(root).fileOf('jobs/leases/verify.json')}.tmp-cas`;
    // Held by another process, comparing now.
    await fs.writeFile(mutex, '');
    const read = (await store.get('jobs/leases/verify.json'))!;
    let settled = false;
    const replacing = store.putIfMatch('jobs/leases/verify.json', '2', read.etag).finally(() => (settled = true));
    await new Promise((r) => setTimeout(r, 200));
    expect(settled).toBe(false);
    await fs.unlink(mutex);
    expect(await replacing).toBe(true);
    // Left by a process killed while it compared, a minute ago: taken over, and never listed.
    await fs.writeFile(mutex, '');
    const minuteAgo = new Date(Date.now() - 60_000);
    await fs.utimes(mutex, minuteAgo, minuteAgo);
    expect(await collect(store.list({ prefix: 'jobs/' }))).toEqual(['jobs/leases/verify.json']);
    expect(await store.putIfMatch('jobs/leases/verify.json', '3', (await store.get('jobs/leases/verify.json'))!.etag)).toBe(true);
    expect((await store.get('jobs/leases/verify.json'))!.body.toString()).toBe('3');
    expect(await fs.readdir(path.dirname(mutex))).toEqual(['verify.json']);
  });

  it('a put or a delete waits while another process compares: a replace neither undoes them nor is undone', async () => {
    const root = await tempDir();
    const store = new FileObjectStore(root);
    await store.put('jobs/leases/verify.json', '1');
    await store.put('jobs/leases/compact.json', '1');
    const mutexOf = (key: string) => `${localFiles(root).fileOf(key)}.tmp-cas`;
    // Another process is between its compare and its rename for both keys.
    await fs.writeFile(mutexOf('jobs/leases/verify.json'), '');
    await fs.writeFile(mutexOf('jobs/leases/compact.json'), '');
    const settled: string[] = [];
    const putting = store.put('jobs/leases/verify.json', '2').then(() => settled.push('put'));
    const deleting = store.delete(['jobs/leases/compact.json']).then(() => settled.push('delete'));
    await new Promise((r) => setTimeout(r, 200));
    expect(settled).toEqual([]);
    expect((await store.get('jobs/leases/verify.json'))!.body.toString()).toBe('1');
    expect(await store.get('jobs/leases/compact.json')).toBeDefined();
    await fs.unlink(mutexOf('jobs/leases/verify.json'));
    await fs.unlink(mutexOf('jobs/leases/compact.json'));
    await Promise.all([putting, deleting]);
    expect((await store.get('jobs/leases/verify.json'))!.body.toString()).toBe('2');
    expect(await store.get('jobs/leases/compact.json')).toBeUndefined();
    // A key never stored, or whose folder is gone, is deleted at once.
    await store.delete(['jobs/none/x.json', 'jobs/leases/none.json']);
    expect(await fs.readdir(path.join(root, 'jobs/leases'))).toEqual(['verify.json']);
  });

  it('a key one process deletes is not brought back by another replacing the version it read before', async () => {
    const root = await tempDir();
    const store = new FileObjectStore(root);
    await store.put('events/v1/set-aside/sub_a/batch.json', JSON.stringify({ n: 0 }));
    // Two processes replace the key as they read it (a purge scrubbing a set-aside batch); a third
    // deletes it (a redrive), looks, and creates it again for the next round.
    const replacer = `
      const until = Date.now() + 6000;
      while (Date.now() < until) {
        const read = await store.get('events/v1/set-aside/sub_a/batch.json');
        if (read) await store.putIfMatch('events/v1/set-aside/sub_a/batch.json', JSON.stringify({ n: JSON.parse(read.body.toString()).n + 1 }), read.etag);
      }`;
    const deleter = `
      let back = 0;
      const until = Date.now() + 5000;
      while (Date.now() < until) {
        await store.delete(['events/v1/set-aside/sub_a/batch.json']);
        if (await store.get('events/v1/set-aside/sub_a/batch.json')) back++;
        await store.putIfAbsent('events/v1/set-aside/sub_a/batch.json', JSON.stringify({ n: 0 }));
      }
      process.stdout.write(String(back));`;
    const [, , broughtBack] = await Promise.all([inStoreProcess(root, replacer), inStoreProcess(root, replacer), inStoreProcess(root, deleter)]);
    expect(Number(broughtBack)).toBe(0);
  });

  it('a listing removes the empty folders it meets (left by older releases)', async () => {
    const root = await tempDir();
    const store = new FileObjectStore(root);
    await store.put('reports/v1/day=01/hour=all/part-b.parquet', 'x');
    for (const h of ['00', '01', '02']) await fs.mkdir(path.join(root, `reports/v1/day=01/hour=${h}`));
    expect(await collect(store.list({ prefix: 'reports/' }))).toEqual(['reports/v1/day=01/hour=all/part-b.parquet']);
    expect(await fs.readdir(path.join(root, 'reports/v1/day=01'))).toEqual(['hour=all']);
  });
});

describe.skipIf(!HAS_MOTO)('moto_lean keeps connections open, as S3 does', () => {
  it('answers every request on one connection, refused conditional PUTs with unread bodies among them', async () => {
    let connections = 0;
    class CountingAgent extends http.Agent {
      override createConnection(...args: Parameters<http.Agent['createConnection']>): ReturnType<http.Agent['createConnection']> {
        connections += 1;
        return super.createConnection(...args);
      }
    }
    const agent = new CountingAgent({ keepAlive: true, maxSockets: 1 });
    const s3 = new S3Client({
      endpoint: lean!.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
      maxAttempts: 1,
      forcePathStyle: true,
      requestHandler: { httpAgent: agent },
    });
    try {
      const bucket = `keep-${randomBytes(4).toString('hex')}`;
      await s3.send(new CreateBucketCommand({ Bucket: bucket }));
      const store = new S3ObjectStore(s3, { bucket, prefix: '' });
      const first = randomBytes(200_000);
      expect(await store.putIfAbsent('k.bin', first, { seenAbsent: true })).toBe(true);
      const { etag } = (await store.head('k.bin'))!;
      // Refused before moto reads their bodies: what is left of each must not be read as the next request.
      expect(await store.putIfAbsent('k.bin', randomBytes(300_000), { seenAbsent: true })).toBe(false);
      expect(await store.putIfMatch('k.bin', randomBytes(300_000), '"not-its-etag"')).toBe(false);
      expect((await store.get('k.bin'))!.body.equals(first)).toBe(true);
      expect((await store.getRange('k.bin', 1_000, 10, { ifMatch: etag }))!.body.equals(first.subarray(1_000, 1_010))).toBe(true);
      expect(await collect(store.list({ prefix: '' }))).toEqual(['k.bin']);
      expect(connections).toBe(1);
    } finally {
      s3.destroy();
      agent.destroy();
    }
  });
});

describe.skipIf(!HAS_MOTO)('S3 answering a conditional create with 409 ConditionalRequestConflict (moto)', () => {
  // S3 answers 409 to a create that met another write of the key still under way (often the
  // SDK's retry meeting its own first attempt): "retry", not "it exists". Injected in the SDK's
  // stack around the real request to moto.
  let conflict: { key: string; committed: boolean; times: number } | undefined;
  async function store(): Promise<S3ObjectStore> {
    const client = new S3Client({ endpoint: moto!.endpoint, region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' }, forcePathStyle: true });
    client.middlewareStack.add(
      (next) => async (args) => {
        const input = args.input as { IfNoneMatch?: string; Key?: string };
        const planned = conflict;
        if (!planned || input.IfNoneMatch !== '*' || !input.Key?.endsWith(planned.key)) return next(args);
        if (--planned.times === 0) conflict = undefined;
        if (planned.committed) await next(args);
        throw new S3ServiceException({ name: 'ConditionalRequestConflict', $fault: 'client', $metadata: { httpStatusCode: 409 }, message: 'A conflicting conditional operation is in progress' });
      },
      { step: 'initialize' },
    );
    const bucket = `conflict-${randomBytes(4).toString('hex')}`;
    await client.send(new CreateBucketCommand({ Bucket: bucket }));
    return new S3ObjectStore(client, { bucket, prefix: 'p/' });
  }

  it('is asked again: taken when the other write stood (412), created when it did not', async () => {
    const s3 = await store();
    conflict = { key: 'a.json', committed: true, times: 1 };
    expect(await s3.putIfAbsent('a.json', 'first', { seenAbsent: true })).toBe(false);
    expect((await s3.get('a.json'))?.body.toString()).toBe('first');
    conflict = { key: 'b.json', committed: false, times: 2 };
    expect(await s3.putIfAbsent('b.json', 'second', { seenAbsent: true })).toBe(true);
    expect((await s3.get('b.json'))?.body.toString()).toBe('second');
  });

  it('is the store unavailable (try again) while S3 goes on answering 409 and nothing stands, never "it exists"', async () => {
    const s3 = await store();
    conflict = { key: 'c.json', committed: false, times: 100 };
    await expect(s3.putIfAbsent('c.json', 'first', { seenAbsent: true })).rejects.toBeInstanceOf(UnavailableError);
    expect(await s3.head('c.json')).toBeUndefined();
    conflict = undefined;
    expect(await s3.putIfAbsent('c.json', 'first', { seenAbsent: true })).toBe(true);
  });
});

/** A range read of the version asked for gets its bytes, and none once the object was replaced, read whole or streamed. */
async function readsOnlyTheVersionAskedFor(store: ObjectStore, key: string): Promise<void> {
  await store.put(key, Buffer.alloc(100, 1));
  const etag = (await store.head(key))!.etag;
  expect((await store.getRange(key, 10, 5, { ifMatch: etag }))?.body).toEqual(Buffer.alloc(5, 1));
  await store.put(key, Buffer.alloc(120, 2));
  expect(await store.getRange(key, 10, 5, { ifMatch: etag })).toBeUndefined();
  expect(await store.getRange(key, 500, 5, { ifMatch: etag })).toBeUndefined();
  expect(await store.getRangeStream(key, 10, 5, { ifMatch: etag })).toBeUndefined();
  expect((await store.getRange(key, 10, 5))?.body).toEqual(Buffer.alloc(5, 2));
}

describe('S3 failing a HEAD (its answer has no body to name the error by)', () => {
  it('names the failure by its status, not as "Unknown"', async () => {
    const failing = http.createServer((req, res) => {
      req.resume();
      res.writeHead(500).end();
    });
    await new Promise<void>((resolve) => failing.listen(0, '127.0.0.1', resolve));
    const s3 = new S3Client({ endpoint: `http://127.0.0.1:${(failing.address() as { port: number }).port}`, region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' }, maxAttempts: 1, forcePathStyle: true });
    try {
      await expect(new S3ObjectStore(s3, { bucket: 'b', prefix: '' }).head('k')).rejects.toThrow('object store request failed (HTTP 500)');
    } finally {
      s3.destroy();
      await new Promise<void>((resolve) => failing.close(() => resolve()));
    }
  });
});

describe('S3 behind something that drops If-Match from a GET', () => {
  it('reads a range of the version asked for or none, whichever way the GET is sent', async () => {
    // A proxy (or a store) that serves a GET whatever its If-Match: the version is checked on the answer.
    const { client: s3, close } = await storeProxy(() => emulator.endpoint, (req) => {
      const headers = { ...req.headers };
      delete headers['if-match'];
      return { headers };
    });
    try {
      const bucket = `ifmatch-${randomBytes(4).toString('hex')}`;
      await s3.send(new CreateBucketCommand({ Bucket: bucket }));
      await readsOnlyTheVersionAskedFor(new S3ObjectStore(s3, { bucket, prefix: '' }), 'v.bin');
    } finally {
      await close();
    }
  });
});

describe.skipIf(!HAS_MOTO)('S3 conditional writes whose answer is lost (moto, which enforces If-Match on a PUT)', () => {
  it('are the writer\'s own when its retry is refused over the bytes its first attempt wrote; another\'s bytes stay another\'s', async () => {
    // A proxy that lets a PUT reach the store and then drops its answer (a reset connection),
    // once for each key named: the SDK asks again, and the store refuses the repeat (412).
    const lose = new Set<string>();
    const { client: s3, close } = await storeProxy(
      () => moto!.endpoint,
      (req) => ({ headers: req.headers, dropAnswer: req.method === 'PUT' && lose.delete(decodeURIComponent((req.url ?? '').split('?')[0]!.split('/').pop() ?? '')) }),
    );
    try {
      const bucket = `lost-${randomBytes(4).toString('hex')}`;
      await s3.send(new CreateBucketCommand({ Bucket: bucket }));
      const store = new S3ObjectStore(s3, { bucket, prefix: '' });
      lose.add('created.json');
      expect(await store.putIfAbsent('created.json', '{"mine":1}', { seenAbsent: true })).toBe(true);
      expect(lose.has('created.json')).toBe(false);
      const { etag } = (await store.head('created.json'))!;
      lose.add('created.json');
      expect(await store.putIfMatch('created.json', '{"mine":2}', etag)).toBe(true);
      expect((await store.get('created.json'))!.body.toString()).toBe('{"mine":2}');
      // Refused on a first attempt: another writer's, whatever the bytes.
      expect(await store.putIfAbsent('created.json', '{"mine":2}', { seenAbsent: true })).toBe(false);
      expect(await store.putIfMatch('created.json', '{"mine":3}', etag)).toBe(false);
    } finally {
      await close();
    }
  });
});
