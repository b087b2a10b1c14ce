// Pagination cursors: where the next page starts, bound to the query's filters and
// authenticated with an HMAC, so a client can hand back only what this service issued
// (archive pages use encode/decode; other paged routes seal and open their own payloads).
// Every field is range-checked after the MAC too: a leaked key must not turn a cursor into
// a way to reach the query engine with values it cannot hold.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { ErrorDetail } from '../shared/errors.js';
import { VERSION_ID } from './boundaryVersion.js';

/** Position after which a page continues: the last report of the previous page. */
export interface PageCursor {
  createdMs: number;
  pkey: string;
  /** Only reports received up to here: pages stay stable while reports arrive. */
  receivedBeforeMs: number;
  /** The boundary version admin= was read in on the first page, when the query names none. */
  version?: string;
}

/** Instants a cursor may hold: years 0000 to 9999, whose microseconds fit DuckDB's int64. */
const YEAR_0_MS = -62_167_219_200_000; // 0000-01-01T00:00:00Z
const YEAR_10000_MS = 253_402_300_800_000; // 10000-01-01T00:00:00Z
const PKEY = /^[A-Za-z0-9._-]{1,128}$/;
/** Longer than any cursor this service issues (about 150 characters). */
const MAX_CURSOR_CHARS = 512;
const MAC_BYTES = 16;
const CONTEXT = 'flood-archive cursor v1\n';

export type CursorResult = { ok: true; cursor: PageCursor } | { ok: false; detail: ErrorDetail };

/** The MAC's length in base64url characters (16 bytes): it ends every token, so a token needs no separator. */
const MAC_CHARS = 22;
const NOT_OURS = 'is not a cursor this service issued (take it from the Link header of the previous page)';

export class CursorCodec {
  /** The key may come from far (the object store): it is fetched once, on first use. */
  private key: Promise<Buffer> | undefined;

  constructor(private readonly loadKey: () => Promise<Buffer>) {}

  /** A token of base64url characters: the payload (any text), then its MAC. */
  async seal(payload: string): Promise<string> {
    const body = Buffer.from(payload, 'utf8').toString('base64url');
    return `${body}${this.mac(await this.secret(), body).toString('base64url')}`;
  }

  /** The payload of a token this service sealed; undefined for anything else (tampered, truncated, foreign, not a token). */
  async open(raw: string): Promise<string | undefined> {
    if (raw.length <= MAC_CHARS || raw.length > MAX_CURSOR_CHARS || !/^[A-Za-z0-9_-]+$/.test(raw)) return undefined;
    const body = raw.slice(0, -MAC_CHARS);
    // Compared as text: base64url's last character carries spare bits, so two spellings decode
    // to the same MAC; only the one this service wrote is accepted.
    const given = Buffer.from(raw.slice(-MAC_CHARS), 'latin1');
    const expected = Buffer.from(this.mac(await this.secret(), body).toString('base64url'), 'latin1');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    return Buffer.from(body, 'base64url').toString('utf8');
  }

  /** An archive page's cursor, bound to its query's filters. */
  encode(cursor: PageCursor, fingerprint: string): Promise<string> {
    const version = cursor.version === undefined ? [] : [cursor.version];
    return this.seal(JSON.stringify([cursor.createdMs, cursor.pkey, cursor.receivedBeforeMs, fingerprint, ...version]));
  }

  /** The cursor, or the detail of a 400: not issued here (tampered, truncated, foreign), another query's, or out of range. */
  async decode(raw: string, fingerprint: string): Promise<CursorResult> {
    const invalid = (message: string): CursorResult => ({ ok: false, detail: { in: 'query', field: 'cursor', message } });
    const payload = await this.open(raw);
    if (payload === undefined) return invalid(NOT_OURS);
    let fields: unknown;
    try {
      fields = JSON.parse(payload);
    } catch {
      return invalid(NOT_OURS);
    }
    if (!Array.isArray(fields) || (fields.length !== 4 && fields.length !== 5)) return invalid(NOT_OURS);
    const [createdMs, pkey, receivedBeforeMs, boundTo, version] = fields as unknown[];
    if (typeof boundTo !== 'string' || boundTo !== fingerprint) {
      return invalid('belongs to another query: keep start, end, admin and bbox as they were');
    }
    if (!isInstant(createdMs) || !isInstant(receivedBeforeMs) || typeof pkey !== 'string' || !PKEY.test(pkey)) {
      return invalid('holds a position outside what the archive can contain');
    }
    if (version !== undefined && (typeof version !== 'string' || !VERSION_ID.test(version))) return invalid(NOT_OURS);
    return { ok: true, cursor: { createdMs, pkey, receivedBeforeMs, ...(version !== undefined && { version }) } };
  }

  private secret(): Promise<Buffer> {
    // A failed load (store unreachable) is tried again by the next request.
    this.key ??= this.loadKey().catch((err: unknown) => {
      this.key = undefined;
      throw err;
    });
    return this.key;
  }

  private mac(key: Buffer, body: string): Buffer {
    return createHmac('sha256', key).update(CONTEXT).update(body).digest().subarray(0, MAC_BYTES);
  }
}

function isInstant(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= YEAR_0_MS && value < YEAR_10000_MS;
}
