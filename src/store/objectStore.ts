// The object store port. Keys are '/'-separated; listing is in key order,
// which the archive layout relies on (a time window is one key range).

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
  /** Bytes [start, start + length) of an object (fewer past its end); undefined when it is absent. */
  getRange(key: string, start: number, length: number): Promise<Buffer | undefined>;
  /** Durable once it resolves. */
  put(key: string, body: Buffer | string): Promise<void>;
  /** Creates the object only if the key is free, durable once it resolves; false when it already existed. */
  putIfAbsent(key: string, body: Buffer | string): Promise<boolean>;
  /** Deletes; missing keys are not an error. */
  delete(keys: readonly string[]): Promise<void>;
  list(options: ListOptions): AsyncIterable<ObjectInfo>;
  /** Copies an object to a local file (for DuckDB). */
  download(key: string, file: string): Promise<ObjectInfo | undefined>;
  /** A local file holding the object, when the store is a local directory. */
  localPath(key: string): string | undefined;
  /** Throws UnavailableError when the store cannot be reached. */
  ping(): Promise<void>;
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
