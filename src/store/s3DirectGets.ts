// Ranged GETs of S3 objects without the SDK's command pipeline: signed by SigV4 with the
// client's own credentials, region and clock offset, sent by the client's own request handler
// (its agent, its timeouts), to the URL the client's own endpoint rules give for the bucket. A
// cold year's answer makes some 400 ranged GETs of ready texts; a command's middleware
// (endpoint rules, schema serde, checksums, retries) cost about 2 ms of CPU each against 0.7
// here, on the same cores that build the answer. Only the range's bytes (206) are taken from
// here: anything else (absent, replaced, throttled, a 5xx, a connection that failed) is left to
// the SDK's command, with its retries and its errors, by the caller. Whole objects are left to
// the SDK too: S3 checks no checksum of a range, while a whole object's is checked by the
// SDK's response validation.
import type { S3Client } from '@aws-sdk/client-s3';
import { HttpRequest } from '@smithy/core/protocols';
import { SignatureV4 } from '@smithy/signature-v4';
import type { Readable } from 'node:stream';

/** A range of an object's bytes as S3 sent them. */
export interface DirectGot {
  body: Readable;
  /** The whole object's size. */
  size: number;
  etag: string;
  lastModified: Date;
}

/** The object URL's parts, resolved once per store. */
interface Target {
  protocol: string;
  hostname: string;
  port: number | undefined;
  /** Prefix of every object's path: "/bucket" in path style, "" for a virtual-hosted bucket. */
  basePath: string;
  signer: SignatureV4;
}

const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

/** How long a failed resolution of the bucket's URL stands before it is tried again. */
const RESOLVE_AGAIN_MS = 60_000;

export class S3DirectGets {
  private target: Promise<Target | undefined> | undefined;

  constructor(
    private readonly client: S3Client,
    private readonly bucket: string,
    /** Told why a GET sent here is left to the SDK (the HTTP status, or "error"): counted, so a signing fault shows. */
    private readonly fellBack: (reason: string) => void = () => undefined,
  ) {}

  /**
   * Bytes [start, start + length) of the object `key` (of its version `ifMatch`), or undefined
   * when S3 answered anything but them, or the request failed: the caller asks by the SDK then.
   */
  async get(key: string, range: { start: number; length: number }, ifMatch?: string): Promise<DirectGot | undefined> {
    const request = await this.signed(key, range, ifMatch);
    if (!request) return undefined;
    let response;
    try {
      ({ response } = await this.client.config.requestHandler.handle(request));
    } catch {
      this.fellBack('error');
      return undefined;
    }
    const body = response.body as Readable;
    const size = objectSizeOf(response.headers['content-range']);
    // A 200 is the whole object (a store that ignored the range): not the bytes asked for.
    if (response.statusCode !== 206 || !Number.isFinite(size)) {
      body?.destroy();
      this.fellBack(String(response.statusCode));
      return undefined;
    }
    const h = response.headers;
    return { body, size, etag: h.etag ?? '', lastModified: h['last-modified'] ? new Date(h['last-modified']) : new Date(0) };
  }

  /** The signed request for the range, as it is sent; undefined when reads are left to the SDK. */
  async signed(key: string, range: { start: number; length: number }, ifMatch?: string, at = new Date(Date.now() + (this.client.config.systemClockOffset ?? 0))): Promise<HttpRequest | undefined> {
    const target = await this.resolve();
    if (!target) return undefined;
    const headers: Record<string, string> = {
      host: target.port ? `${target.hostname}:${target.port}` : target.hostname,
      // The hash of an empty body, as the SDK signs a GET.
      'x-amz-content-sha256': EMPTY_SHA256,
      range: `bytes=${range.start}-${range.start + range.length - 1}`,
    };
    if (ifMatch !== undefined) headers['if-match'] = ifMatch;
    const request = new HttpRequest({ method: 'GET', protocol: target.protocol, hostname: target.hostname, port: target.port, path: `${target.basePath}/${objectPath(key)}`, headers });
    try {
      return (await target.signer.sign(request, { signingDate: at })) as HttpRequest;
    } catch {
      return undefined;
    }
  }

  /** The URL `key` is read from here; undefined when its reads are left to the SDK. */
  async urlOf(key: string): Promise<string | undefined> {
    const target = await this.resolve();
    return target && `${target.protocol}//${target.hostname}${target.port ? `:${target.port}` : ''}${target.basePath}/${objectPath(key)}`;
  }

  /** Where the bucket's objects are, by the client's own endpoint rules; undefined when they name anything but SigV4 for s3 (S3 Express, access points). */
  private resolve(): Promise<Target | undefined> {
    return (this.target ??= this.targetOf().catch(() => {
      // Tried again later (a region or credentials provider that failed once).
      setTimeout(() => (this.target = undefined), RESOLVE_AGAIN_MS).unref();
      return undefined;
    }));
  }

  private async targetOf(): Promise<Target | undefined> {
    const config = this.client.config;
    const custom = config.endpoint ? await config.endpoint() : undefined;
    const endpoint = config.endpointProvider({
      Bucket: this.bucket,
      Region: await config.region(),
      UseFIPS: await config.useFipsEndpoint(),
      UseDualStack: await config.useDualstackEndpoint(),
      ForcePathStyle: config.forcePathStyle ?? false,
      Accelerate: config.useAccelerateEndpoint ?? false,
      ...(custom && { Endpoint: `${custom.protocol}//${custom.hostname}${custom.port ? `:${custom.port}` : ''}${custom.path}` }),
    });
    const schemes = (endpoint.properties?.authSchemes ?? []) as { name?: string; signingName?: string; signingRegion?: string }[];
    if (schemes.some((s) => s.name !== 'sigv4' || (s.signingName ?? 's3') !== 's3')) return undefined;
    const signer = new SignatureV4({
      credentials: config.credentials,
      region: schemes[0]?.signingRegion ?? (await config.region()),
      service: 's3',
      sha256: config.sha256,
      // The path is encoded once, as S3 wants it (objectPath), and signed as it is.
      uriEscapePath: false,
      applyChecksum: false,
    });
    const url = endpoint.url;
    return { protocol: url.protocol, hostname: url.hostname, port: url.port ? Number(url.port) : undefined, basePath: url.pathname.replace(/\/$/, ''), signer };
  }
}

/** A key as S3 reads it in a path: each segment percent-encoded as the SDK encodes it (RFC 3986), the slashes kept. */
function objectPath(key: string): string {
  return key
    .split('/')
    .map((segment) => encodeURIComponent(segment).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`))
    .join('/');
}

/** The whole object's size a Content-Range gives ("bytes 0-65535/1234567": after the slash); NaN without one. */
export function objectSizeOf(contentRange: string | undefined): number {
  return Number(/\/(\d+)$/.exec(contentRange ?? '')?.[1]);
}
