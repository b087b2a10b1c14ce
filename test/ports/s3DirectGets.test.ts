// Ranged GETs of S3 objects straight from the bucket's URL, signed with the client's
// credentials: the same bytes, sizes and ETags as the SDK's GetObject, on fauxqs and moto;
// nothing but the range's bytes taken from them; the URL the SDK's own endpoint rules give on
// AWS, and AWS's own example signature; and the store's ranged reads of present objects made
// without one GetObject command.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { buffer } from 'node:stream/consumers';
import { CreateBucketCommand, HeadObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { S3DirectGets } from '../../src/store/s3DirectGets.js';
import { S3ObjectStore } from '../../src/store/s3Store.js';
import { startEmulator, type Emulator } from '../support/fauxqs.js';
import { HAS_MOTO, MOTO_MISSING, startMoto } from '../support/moto.js';
import { testConfig, testRuntime } from '../support/env.js';

let fauxqs: Emulator;
let moto: Emulator | undefined;
beforeAll(async () => {
  [fauxqs, moto] = await Promise.all([startEmulator(), HAS_MOTO ? startMoto() : undefined]);
});
afterAll(async () => {
  await fauxqs?.stop();
  await moto?.stop();
});
if (!HAS_MOTO) console.warn(MOTO_MISSING);

const peers = [{ name: 'fauxqs', peer: () => fauxqs }, ...(HAS_MOTO ? [{ name: 'moto', peer: () => moto! }] : [])];
/** A key with what a path must encode: `=`, a space, `+`, parentheses, an apostrophe, a non-ASCII letter. */
const KEY = "some/prefix/reports/v1/year=2025/hour=all/part one+(x)'ü.ready";
/** A key as the store names its objects. */
const STORE_KEY = 'reports/v1/year=2025/month=01/day=01/hour=all/part-01.ready';

describe.each(peers)('direct GETs on $name', ({ peer }) => {
  let bucket: string;
  let body: Buffer;
  beforeAll(async () => {
    bucket = `direct-${randomBytes(4).toString('hex')}`;
    await peer().s3.send(new CreateBucketCommand({ Bucket: bucket }));
    body = randomBytes(300_000);
    await peer().s3.send(new PutObjectCommand({ Bucket: bucket, Key: KEY, Body: body }));
    await peer().s3.send(new PutObjectCommand({ Bucket: bucket, Key: `some/prefix/${STORE_KEY}`, Body: body }));
  });

  it("reads a range of an object, with the whole object's size and its ETag", async () => {
    const direct = new S3DirectGets(peer().s3, bucket);
    const etag = (await peer().s3.send(new HeadObjectCommand({ Bucket: bucket, Key: KEY }))).ETag;
    const range = await direct.get(KEY, { start: 1000, length: 5000 }, etag);
    expect(range).toBeDefined();
    expect(await buffer(range!.body)).toEqual(body.subarray(1000, 6000));
    expect([range!.size, range!.etag]).toEqual([body.length, etag]);
    expect(range!.lastModified.getTime()).toBeGreaterThan(Date.now() - 600_000);
    const tail = await direct.get(KEY, { start: body.length - 10, length: 100 });
    expect(await buffer(tail!.body)).toEqual(body.subarray(body.length - 10));
  });

  it('takes nothing but the bytes: an absent key, a bucket that is not there, another version are left to the SDK, each told', async () => {
    const reasons: string[] = [];
    const direct = new S3DirectGets(peer().s3, bucket, (reason) => reasons.push(reason));
    expect(await direct.get(`${KEY}.absent`, { start: 0, length: 10 })).toBeUndefined();
    expect(await new S3DirectGets(peer().s3, `${bucket}-gone`).get(KEY, { start: 0, length: 10 })).toBeUndefined();
    expect(await direct.get(KEY, { start: 0, length: 10 }, '"0123456789abcdef0123456789abcdef"')).toBeUndefined();
    expect(reasons[0]).toBe('404');
    expect(reasons.length).toBe(2);
    expect(await direct.get(KEY, { start: 0, length: 10 })).toBeDefined();
    expect(reasons.length).toBe(2);
  });

  it("counts the service's fallbacks in its metrics, by reason", async () => {
    const rt = await testRuntime(await testConfig('aws', peer()), peer());
    try {
      expect(await rt.store.getRange('reports/v1/absent.ready', 0, 10)).toBeUndefined();
      expect(await rt.metrics.registry.metrics()).toMatch(/^s3_direct_get_fallbacks_total\{reason="404"\} 1$/m);
    } finally {
      await rt.close();
    }
  });

  it("serves the store's ranged reads of present objects without one GetObject command; whole objects and misses by the SDK", async () => {
    const commands: string[] = [];
    const client = new S3Client({ region: 'us-east-1', endpoint: peer().endpoint, forcePathStyle: true, credentials: { accessKeyId: 'test', secretAccessKey: 'test' } });
    client.middlewareStack.add((next, context) => (args) => {
      commands.push(String(context.commandName));
      return next(args);
    });
    const store = new S3ObjectStore(client, { bucket, prefix: 'some/prefix/' });
    const key = STORE_KEY;
    const ranged = await store.getRange(key, 10, 100);
    expect(ranged?.body).toEqual(body.subarray(10, 110));
    expect(commands).toEqual([]);
    expect(await store.getRange(`${key}.absent`, 0, 10)).toBeUndefined();
    expect(commands).toEqual(['GetObjectCommand']);
    const streamed = await store.getStream(key);
    expect(await buffer(streamed!.body)).toEqual(body);
    expect(commands).toEqual(['GetObjectCommand', 'GetObjectCommand']);
  });
});

describe('direct GETs on AWS', () => {
  const credentials = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'secret' };
  it("read from the URL the SDK's endpoint rules give: the bucket's regional virtual host, or the custom endpoint's path", async () => {
    const aws = new S3Client({ region: 'ap-southeast-1', credentials });
    expect(await new S3DirectGets(aws, 'flood-archive').urlOf('reports/v1/year=2025/a b.ready')).toBe('https://flood-archive.s3.ap-southeast-1.amazonaws.com/reports/v1/year%3D2025/a%20b.ready');
    const dualStack = new S3Client({ region: 'ap-southeast-1', credentials, useDualstackEndpoint: true });
    expect(await new S3DirectGets(dualStack, 'flood-archive').urlOf('k')).toBe('https://flood-archive.s3.dualstack.ap-southeast-1.amazonaws.com/k');
    const custom = new S3Client({ region: 'ap-southeast-1', credentials, endpoint: 'http://localhost:4566', forcePathStyle: true });
    expect(await new S3DirectGets(custom, 'flood-archive').urlOf('k')).toBe('http://localhost:4566/flood-archive/k');
  });

  it("sign as AWS's own example of a ranged GET (Signature Version 4, GET Object)", async () => {
    const example = new S3Client({ region: 'us-east-1', endpoint: 'https://s3.amazonaws.com', forcePathStyle: false, credentials: { accessKeyId: 'AKIAIOSFODNN7EXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY' } });
    const request = await new S3DirectGets(example, 'examplebucket').signed('test.txt', { start: 0, length: 10 }, undefined, new Date('2013-05-24T00:00:00Z'));
    expect(request!.hostname).toBe('examplebucket.s3.amazonaws.com');
    expect(request!.headers.authorization).toBe(
      'AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41',
    );
  });

  it('leave a directory bucket (S3 Express, signed otherwise) to the SDK', async () => {
    const aws = new S3Client({ region: 'ap-southeast-1', credentials });
    const express = new S3DirectGets(aws, 'flood--apse1-az1--x-s3');
    expect(await express.urlOf('k')).toBeUndefined();
    expect(await express.get('k', { start: 0, length: 10 })).toBeUndefined();
  });
});
