// The object store port: blobs by key. Keys are '/'-separated; listing is in key order,
// which the archive layout relies on (a time window is one key range).
import { PassThrough, type Readable } from 'node:stream';

export interface ObjectInfo {
  key: string;
  size: number;
  /** Opaque version tag; changes whenever the content changes. */
  etag: string;
  lastModified: Date;
}

export interface StoredObject extends ObjectInfo {
  body: Buffer;
}

/** An object's bytes as a stream: read it to its end, or destroy it. */
export interface StreamedObject extends ObjectInfo {
  body: Readable;
}

export interface ListOptions {
  prefix: string;
  /** Exclusive lower bound on keys. */
  startAfter?: string;
}

export interface ObjectStore {
  /** Human-readable location, for logs. */
  readonly description: string;
  get(key: string): Promise<StoredObject | undefined>;
  head(key: string): Promise<ObjectInfo | undefined>;
  /**
   * Bytes [start, start + length) of an object (fewer past its end) as `body`, with the whole
   * object's size and ETag; undefined when it is absent, or when `ifMatch` is given and the
   * object is no longer that version (a ranged read of an object replaced meanwhile).
   */
  getRange(key: string, start: number, length: number, options?: { ifMatch?: string }): Promise<StoredObject | undefined>;
  /**
   * The same bytes as getRange, as a stream: for a copy written as it arrives, no buffer of the
   * whole range held (a cold answer's hundreds of ranges kept V8 collecting its whole heap).
   */
  getRangeStream(key: string, start: number, length: number, options?: { ifMatch?: string }): Promise<StreamedObject | undefined>;
  /** Durable once it resolves. */
  put(key: string, body: Buffer | string): Promise<void>;
  /**
   * Creates the object only if the key is free, durable once it resolves; false when it already
   * existed. `seenAbsent`: the caller has just seen the key absent, so an adapter that looks
   * before it writes (S3: a HEAD, as most keys it creates exist already) writes at once.
   */
  putIfAbsent(key: string, body: Buffer | string, options?: { seenAbsent?: boolean }): Promise<boolean>;
  /**
   * Replaces the object only while it is still the version `etag` names, durable once it
   * resolves; false when it was replaced or deleted since (it is then left as it is).
   */
  putIfMatch(key: string, body: Buffer | string, etag: string): Promise<boolean>;
  /**
   * Copies the object `from` to `to` within the store (on S3, no byte through this process),
   * durable once it resolves; false when `from` is absent.
   */
  copy(from: string, to: string): Promise<boolean>;
  /** Deletes; missing keys are not an error. */
  delete(keys: readonly string[]): Promise<void>;
  list(options: ListOptions): AsyncIterable<ObjectInfo>;
  /** The object's bytes as a stream (large objects, never held whole); a failure while reading is UnavailableError too. */
  getStream(key: string): Promise<StreamedObject | undefined>;
  /** Throws UnavailableError when the store cannot be reached. */
  ping(): Promise<void>;
}

/**
 * Not part of the port: the capability of a store that is a local directory, whose objects
 * are files DuckDB can read in place (the part cache then copies nothing).
 */
export interface LocalFiles {
  /** The file that holds, or would hold, the object under `key`. */
  fileOf(key: string): string;
  /**
   * A name of the object's file that stays readable until `release` is called, even if the
   * object is deleted meanwhile (a part retired while a slow answer still reads it, as the part
   * cache's held copies do on S3); undefined when the object is absent.
   */
  pin(key: string): { file: string; release(): void } | undefined;
}

/**
 * A body whose read errors are the store's (`translate` names them), as every other call's are;
 * the source (a file, a socket) is released once the body is read or destroyed.
 */
export function storeStream(source: Readable, translate: (err: unknown) => Error): Readable {
  const body = new PassThrough();
  source.once('error', (err) => body.destroy(translate(err)));
  body.once('close', () => source.destroy());
  return source.pipe(body);
}

const keyPattern = /^[A-Za-z0-9=._-]+(\/[A-Za-z0-9=._-]+)*$/;

/** A key the service should never have built: a bug, not an outage. */
export class InvalidKeyError extends Error {
  override name = 'InvalidKeyError';
}

/** Every key the service builds passes here, so no client text can reach a path unchecked. */
export function assertValidKey(key: string): void {
  if (!keyPattern.test(key) || key.split('/').some((s) => s === '.' || s === '..')) {
    throw new InvalidKeyError(`invalid object key: ${JSON.stringify(key)}`);
  }
}
