// GETs of S3 objects without the SDK's command pipeline: signed by SigV4 with the client's own
// credentials and region, sent by the client's own request handler (its agent, its timeouts),
// to the URL the client's own endpoint rules give for the bucket. A cold year's answer makes
// some 400 GETs of ready texts and sidecars; a command's middleware (endpoint rules, schema
// serde, checksums, retries) cost about 2 ms of CPU each against 0.7 here, on the same cores
// that build the answer. Only an answer with the bytes (200, 206) is taken from here: anything
// else (absent, replaced, throttled, a 5xx, a connection that failed) is left to the SDK's
// command, with its retries and its errors, by the caller.
import type { S3Client } from '@aws-sdk/client-s3';
import { HttpRequest } from '@smithy/core/protocols';
import { SignatureV4 } from '@smithy/signature-v4';
import type { Readable } from 'node:stream';

/** An object's bytes (all, or the range asked for) as S3 sent them. */
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
}

export class S3DirectGets {
  private target: Promise<Target | undefined> | undefined;
  private readonly signer: SignatureV4;

  constructor(
    private readonly client: S3Client,
    private readonly bucket: string,
  ) {
    this.signer = new SignatureV4({
      credentials: client.config.credentials,
      region: client.config.region,
      service: 's3',
      sha256: client.config.sha256,
      // The path is encoded once, as S3 wants it (objectPath), and signed as it is.
      uriEscapePath: false,
      applyChecksum: false,
    });
  }

  /**
   * The object `key` (its bytes [start, start + length) when given), or undefined when S3
   * answered anything but its bytes, or the request failed: the caller asks by the SDK then.
   */
  async get(key: string, range?: { start: number; length: number }, ifMatch?: string): Promise<DirectGot | undefined> {
    const target = await this.resolve();
    if (!target) return undefined;
    const headers: Record<string, string> = { host: target.port ? `${target.hostname}:${target.port}` : target.hostname, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' };
    if (range) headers.range = `bytes=${range.start}-${range.start + range.length - 1}`;
    if (ifMatch !== undefined) headers['if-match'] = ifMatch;
    const request = new HttpRequest({ method: 'GET', protocol: target.protocol, hostname: target.hostname, port: target.port, path: `${target.basePath}/${objectPath(key)}`, headers });
    let response;
    try {
      ({ response } = await this.client.config.requestHandler.handle(await this.signer.sign(request)));
    } catch {
      return undefined;
    }
    const body = response.body as Readable;
    const status = response.statusCode;
    if (status !== 200 && status !== 206) {
      body?.destroy();
      return undefined;
    }
    const h = response.headers;
    // "bytes 0-65535/1234567": the whole object's size after the slash.
    const size = status === 206 ? Number(/\/(\d+)$/.exec(h['content-range'] ?? '')?.[1]) : Number(h['content-length']);
    if (!Number.isFinite(size)) {
      body.destroy();
      return undefined;
    }
    return { body, size, etag: h.etag ?? '', lastModified: h['last-modified'] ? new Date(h['last-modified']) : new Date(0) };
  }

  /** The URL `key` is read from here; undefined when its reads are left to the SDK. */
  async urlOf(key: string): Promise<string | undefined> {
    const target = await this.resolve();
    return target && `${target.protocol}//${target.hostname}${target.port ? `:${target.port}` : ''}${target.basePath}/${objectPath(key)}`;
  }

  /** Where the bucket's objects are, by the client's own endpoint rules; undefined when they name anything but SigV4 for s3 (S3 Express, access points). */
  private resolve(): Promise<Target | undefined> {
    return (this.target ??= this.targetOf().catch(() => undefined));
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
    const schemes = (endpoint.properties?.authSchemes ?? []) as { name?: string; signingName?: string }[];
    if (schemes.some((s) => s.name !== 'sigv4' || (s.signingName ?? 's3') !== 's3')) return undefined;
    const url = endpoint.url;
    return { protocol: url.protocol, hostname: url.hostname, port: url.port ? Number(url.port) : undefined, basePath: url.pathname.replace(/\/$/, '') };
  }
}

/** A key as S3 reads it in a path: each segment percent-encoded as the SDK encodes it (RFC 3986), the slashes kept. */
export function objectPath(key: string): string {
  return key
    .split('/')
    .map((segment) => encodeURIComponent(segment).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`))
    .join('/');
}
