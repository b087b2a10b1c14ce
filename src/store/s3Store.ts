// Object store on S3 (or anything speaking its protocol). SDK errors are
// translated here: "not found" and "precondition failed" are answers, every
// other failure is UnavailableError.
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import {
  CopyObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { failureName, UnavailableError } from '../shared/errors.js';
import { assertValidKey, InvalidKeyError, storeStream, type ListOptions, type ObjectInfo, type ObjectStore, type StoredObject, type StreamedObject } from './objectStore.js';
import type { S3Location } from './s3Location.js';
import { whileCut } from './cutBodies.js';
import { objectSizeOf, S3DirectGets } from './s3DirectGets.js';

export { parseS3Url, type S3Location } from './s3Location.js';

/** Conditional creates tried at most this often while S3 answers 409 (a write of the key under way). */
const CONFLICT_ATTEMPTS = 4;

/**
 * A body as the SDK sends it with its length. An empty string is falsy, so the SDK would add no
 * Content-Length (the HTTP layer sends 0 after all) and print a warning of a stream of unknown
 * length to stderr on every such PUT (a retraction's marker): it goes as an empty buffer.
 */
function sendable(body: Buffer | string): Buffer | string {
  return body === '' ? EMPTY : body;
}
const EMPTY = Buffer.alloc(0);

export class S3ObjectStore implements ObjectStore {
  readonly description: string;
  /** Ranged reads taken straight from S3 where it sends the bytes; the SDK's commands for everything else. */
  private readonly direct: S3DirectGets;

  constructor(
    private readonly client: S3Client,
    private readonly location: S3Location,
    /** Told why a ranged GET sent straight to the bucket was asked again through the SDK (s3DirectGets.ts). */
    directFellBack?: (reason: string) => void,
  ) {
    this.description = `s3://${location.bucket}/${location.prefix}`;
    this.direct = new S3DirectGets(client, location.bucket, directFellBack);
  }

  private full(key: string): string {
    assertValidKey(key);
    return this.location.prefix + key;
  }

  async get(key: string): Promise<StoredObject | undefined> {
    return whileCut(async (answered) => {
      let out;
      try {
        out = await this.client.send(new GetObjectCommand({ Bucket: this.location.bucket, Key: this.full(key) }));
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw unavailable(err);
      }
      answered();
      let body;
      try {
        body = bufferOf(await out.Body!.transformToByteArray());
      } catch (err) {
        throw unavailable(err);
      }
      return { key, body, size: body.length, etag: out.ETag ?? '', lastModified: out.LastModified ?? new Date(0) };
    });
  }

  /** The range gathered: getRangeStream's bytes in one buffer. */
  async getRange(key: string, start: number, length: number, options: { ifMatch?: string } = {}): Promise<StoredObject | undefined> {
    const got = await this.getRangeStream(key, start, length, options);
    if (!got) return undefined;
    const { body, ...info } = got;
    return { ...info, body: await buffer(body) };
  }

  async getRangeStream(key: string, start: number, length: number, options: { ifMatch?: string } = {}): Promise<StreamedObject | undefined> {
    // No bytes asked for, or none there: the object's facts alone (a HEAD), the version checked as a GET's If-Match would.
    const empty = async (): Promise<StreamedObject | undefined> => {
      const info = await this.head(key);
      if (!info || (options.ifMatch !== undefined && info.etag !== options.ifMatch)) return undefined;
      return { ...info, body: Readable.from([]) };
    };
    if (length <= 0) return empty();
    // Another version than the one asked for (a store that does not enforce If-Match on a GET):
    // its bytes must not be merged into a copy of the first.
    const otherVersion = (etag: string, body: Readable | undefined) => {
      if (options.ifMatch === undefined || etag === options.ifMatch) return false;
      body?.destroy();
      return true;
    };
    const direct = await this.direct.get(this.full(key), { start, length }, options.ifMatch);
    if (direct) {
      if (otherVersion(direct.etag, direct.body)) return undefined;
      return { key, size: direct.size, etag: direct.etag, lastModified: direct.lastModified, body: storeStream(direct.body, unavailable) };
    }
    try {
      const out = await this.client.send(
        new GetObjectCommand({ Bucket: this.location.bucket, Key: this.full(key), Range: `bytes=${start}-${start + length - 1}`, IfMatch: options.ifMatch }),
      );
      if (otherVersion(out.ETag ?? '', out.Body as Readable | undefined)) return undefined;
      const stated = objectSizeOf(out.ContentRange);
      const size = Number.isFinite(stated) ? stated : start + (out.ContentLength ?? 0);
      return { key, size, etag: out.ETag ?? '', lastModified: out.LastModified ?? new Date(0), body: storeStream(out.Body as Readable, unavailable) };
    } catch (err) {
      if (isNotFound(err) || statusOf(err) === 412) return undefined;
      // A range that starts past the end (InvalidRange, 416): nothing there.
      if (statusOf(err) === 416) return empty();
      throw unavailable(err);
    }
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    try {
      const out = await this.client.send(new HeadObjectCommand({ Bucket: this.location.bucket, Key: this.full(key) }));
      return { key, size: out.ContentLength ?? 0, etag: out.ETag ?? '', lastModified: out.LastModified ?? new Date(0) };
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw unavailable(err);
    }
  }

  async put(key: string, body: Buffer | string): Promise<void> {
    try {
      await this.client.send(new PutObjectCommand({ Bucket: this.location.bucket, Key: this.full(key), Body: sendable(body) }));
    } catch (err) {
      throw unavailable(err);
    }
  }

  /** S3's own copy (one request, objects up to 5 GB: sidecars are megabytes). */
  async copy(from: string, to: string): Promise<boolean> {
    const source = `${this.location.bucket}/${this.full(from).split('/').map(encodeURIComponent).join('/')}`;
    try {
      await this.client.send(new CopyObjectCommand({ Bucket: this.location.bucket, Key: this.full(to), CopySource: source }));
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw unavailable(err);
    }
  }

  async putIfAbsent(key: string, body: Buffer | string, options: { seenAbsent?: boolean } = {}): Promise<boolean> {
    // HEAD first: the common "already exists" answer costs no write. The
    // conditional PUT closes the race on stores that enforce If-None-Match
    // (S3, LocalStack, MinIO).
    if (!options.seenAbsent && (await this.head(key))) return false;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.client.send(new PutObjectCommand({ Bucket: this.location.bucket, Key: this.full(key), Body: sendable(body), IfNoneMatch: '*' }));
        return true;
      } catch (err) {
        const status = statusOf(err);
        if (status === 412) return this.ownRetry(err, key, body);
        // 409 ConditionalRequestConflict: another write of the key was under way (writers racing
        // by design, or our own first attempt that the SDK retried). Asked again, it settles to
        // created or taken; taken if it stands by the last attempt, else not known yet.
        if (status !== 409) throw unavailable(err);
        if (attempt >= CONFLICT_ATTEMPTS) {
          if (await this.head(key)) return false;
          throw unavailable(err);
        }
        await new Promise((r) => setTimeout(r, 25 * 2 ** attempt));
      }
    }
  }

  async putIfMatch(key: string, body: Buffer | string, etag: string): Promise<boolean> {
    try {
      await this.client.send(new PutObjectCommand({ Bucket: this.location.bucket, Key: this.full(key), Body: sendable(body), IfMatch: etag }));
      return true;
    } catch (err) {
      // 412: another version since; 404: deleted since; 409: a write to the key at the same moment.
      const status = statusOf(err);
      if (status === 412) return this.ownRetry(err, key, body);
      if (status === 409 || isNotFound(err)) return false;
      throw unavailable(err);
    }
  }

  /**
   * Whether a conditional write refused (412) on the SDK's retry had landed on an earlier
   * attempt whose answer was lost: then the key holds these very bytes, and the write is ours.
   * Refused on its first attempt, it is another writer's.
   */
  private async ownRetry(err: unknown, key: string, body: Buffer | string): Promise<boolean> {
    if (((err as { $metadata?: { attempts?: number } }).$metadata?.attempts ?? 1) <= 1) return false;
    const there = await this.get(key);
    return there !== undefined && there.body.equals(typeof body === 'string' ? Buffer.from(body) : body);
  }

  async delete(keys: readonly string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += 1000) {
      const batch = keys.slice(i, i + 1000);
      try {
        const out = await this.client.send(
          new DeleteObjectsCommand({
            Bucket: this.location.bucket,
            Delete: { Objects: batch.map((k) => ({ Key: this.full(k) })), Quiet: true },
          }),
        );
        if (out.Errors && out.Errors.length > 0) {
          // Named by S3's code (AccessDenied, say) and the keys, so the failure says what S3 said.
          const [first] = out.Errors;
          throw new UnavailableError('storage', `object store request failed (${first?.Code ?? 'Error'}): ${out.Errors.length} of ${batch.length} objects not deleted, ${first?.Key} the first`);
        }
      } catch (err) {
        throw unavailable(err);
      }
    }
  }

  async *list(options: ListOptions): AsyncIterable<ObjectInfo> {
    const base = this.location.prefix;
    let token: string | undefined;
    do {
      let out;
      try {
        out = await this.client.send(
          new ListObjectsV2Command({
            Bucket: this.location.bucket,
            Prefix: base + options.prefix,
            StartAfter: token === undefined && options.startAfter ? base + options.startAfter : undefined,
            ContinuationToken: token,
          }),
        );
      } catch (err) {
        throw unavailable(err);
      }
      for (const item of out.Contents ?? []) {
        if (!item.Key) continue;
        yield {
          key: item.Key.slice(base.length),
          size: item.Size ?? 0,
          etag: item.ETag ?? '',
          lastModified: item.LastModified ?? new Date(0),
        };
      }
      token = out.IsTruncated ? out.NextContinuationToken : undefined;
    } while (token);
  }

  async getStream(key: string): Promise<StreamedObject | undefined> {
    try {
      const out = await this.client.send(new GetObjectCommand({ Bucket: this.location.bucket, Key: this.full(key) }));
      const body = storeStream(out.Body as Readable, unavailable);
      return { key, size: out.ContentLength ?? 0, etag: out.ETag ?? '', lastModified: out.LastModified ?? new Date(0), body };
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw unavailable(err);
    }
  }

  async ping(): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.location.bucket }));
    } catch (err) {
      throw unavailable(err);
    }
  }
}

/** The SDK's bytes as a Buffer over the same memory: `Buffer.from(bytes)` would copy them again. */
function bufferOf(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function statusOf(err: unknown): number | undefined {
  return (err as { $metadata?: { httpStatusCode?: number } })?.$metadata?.httpStatusCode;
}

function isNotFound(err: unknown): boolean {
  const name = (err as { name?: string })?.name;
  return name === 'NoSuchKey' || name === 'NotFound' || (statusOf(err) === 404 && name !== 'NoSuchBucket');
}

function unavailable(err: unknown): Error {
  if (err instanceof UnavailableError || err instanceof InvalidKeyError) return err;
  return new UnavailableError('storage', `object store request failed (${failureName(err)})`, { cause: err });
}
