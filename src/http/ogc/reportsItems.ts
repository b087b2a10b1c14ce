// The `reports` collection: the archive as OGC API – Features items, newest first,
// paged by a keyset cursor (the last report of the page) so that a year is walked
// page after page at the cost of each page, and pages stay exact while reports arrive.
import { createHash } from 'node:crypto';
import type { WindowQuery } from '../../archive/query.js';
import type { Archive, Window } from '../../archive/window.js';
import type { ErrorDetail } from '../../shared/errors.js';
import { parsePkey, PKEY_PATTERN_BODY } from '../../store/layout.js';
import { EARLIEST_MS, LATEST_MS } from '../../partners/partnerReport.js';
import type { Bbox } from './params.js';

/** Where a page starts: after this report, within this window, among reports received by then. */
export interface ReportsCursor {
  startMs: number;
  endMs: number;
  createdMs: number;
  pkey: string;
  receivedBeforeMs: number;
  /** after: the page holds the reports older than this one; before: the ones just newer. */
  direction: 'after' | 'before';
}

export interface ReportsPage {
  /** GeoJSON Features, each with its `id`, newest first. */
  features: string[];
  /** Where the next page starts, when there is one. */
  next: ReportsCursor | undefined;
  /** Where the previous page ends (the reports just newer than this page), when there is one. */
  prev: ReportsCursor | undefined;
  numberMatched: number;
  /**
   * What the window holds (its parts and the retractions it hides, whatever the time reports were
   * received by): a report archived or retracted in it changes it, and with it the page's cursors.
   */
  windowTag: string;
}

/** A feature id: the report's pkey and its created_at, so an item is found without an index. */
const FEATURE_ID = new RegExp(`^(${PKEY_PATTERN_BODY})@(\\d{4})(\\d{2})(\\d{2})T(\\d{2})(\\d{2})(\\d{2})\\.(\\d{3})Z$`);

export function featureId(pkey: string, createdMs: number): string {
  return `${pkey}@${new Date(createdMs).toISOString().replace(/[-:]/g, '')}`;
}

function parseFeatureId(id: string): { pkey: string; createdMs: number } | undefined {
  const m = FEATURE_ID.exec(id);
  if (!m) return undefined;
  const createdMs = Date.parse(`${m[2]}-${m[3]}-${m[4]}T${m[5]}:${m[6]}:${m[7]}.${m[8]}Z`);
  if (!Number.isFinite(createdMs) || featureId(m[1]!, createdMs) !== id) return undefined;
  return { pkey: m[1]!, createdMs };
}

/** The filters a cursor belongs to: a cursor of one query is refused by another. */
export function fingerprintOf(datetime: string | undefined, bbox: string | undefined): string {
  return createHash('sha256').update(JSON.stringify([datetime ?? null, bbox ?? null])).digest('base64url').slice(0, 12);
}

export function encodeCursor(c: ReportsCursor, fingerprint: string): string {
  return Buffer.from(JSON.stringify([c.startMs, c.endMs, c.createdMs, c.pkey, c.receivedBeforeMs, fingerprint, c.direction === 'before' ? 'b' : 'a'])).toString('base64url');
}

/** Every field range-checked: a forged or truncated cursor is a 400, never a query. */
export function decodeCursor(raw: string, fingerprint: string, details: ErrorDetail[]): ReportsCursor | undefined {
  const bad = (message: string) => {
    details.push({ in: 'query', field: 'cursor', message });
    return undefined;
  };
  if (raw.length > 512 || !/^[A-Za-z0-9_-]+$/.test(raw)) return bad('is not a cursor this service issued (follow the next link)');
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
  } catch {
    return bad('is not a cursor this service issued (follow the next link)');
  }
  const inRange = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= EARLIEST_MS && (n as number) <= LATEST_MS;
  if (!Array.isArray(v) || v.length !== 7 || (v[6] !== 'a' && v[6] !== 'b') || !inRange(v[0]) || !inRange(v[1]) || !inRange(v[2]) || typeof v[3] !== 'string' || !parsePkey(v[3]) || !inRange(v[4]) || typeof v[5] !== 'string') {
    return bad('is not a cursor this service issued (follow the next link)');
  }
  if (v[5] !== fingerprint) return bad('belongs to another query: keep datetime and bbox as they were');
  if (v[1] < v[0]) return bad('is not a cursor this service issued (follow the next link)');
  return { startMs: v[0], endMs: v[1], createdMs: v[2], pkey: v[3], receivedBeforeMs: v[4], direction: v[6] === 'b' ? 'before' : 'after' };
}

/** Puts the feature's id first in a Feature serialised by the archive (`{"type":"Feature",…`). */
function withId(feature: string, id: string): string {
  return `{"type":"Feature","id":${JSON.stringify(id)},${feature.slice('{"type":"Feature",'.length)}`;
}

interface Key {
  createdMs: number;
  pkey: string;
}
interface Item {
  feature: string;
  key: Key;
}

export class ReportsItems {
  /** numberMatched of recent windows: every page of a walk asks the same (its window and received-by time are fixed). */
  private readonly counts = new Map<string, number>();

  constructor(private readonly archive: Archive) {}

  /** `signal`: aborts when the page is no longer wanted (the client hung up); its queries stop. */
  async page(window: { startMs: number; endMs: number; openEnd?: boolean; bbox: Bbox | undefined }, limit: number, cursor: ReportsCursor | undefined, now: number, signal?: AbortSignal): Promise<ReportsPage> {
    const open = (query: WindowQuery) => this.archive.open(query, signal ? { signal } : {});
    const receivedBeforeMs = cursor?.receivedBeforeMs ?? now;
    const base: WindowQuery = { startMs: window.startMs, endMs: window.endMs, admin: undefined, bbox: window.bbox, receivedBeforeMs };
    const at = (k: Key, direction: ReportsCursor['direction']): ReportsCursor => ({ startMs: window.startMs, endMs: window.endMs, createdMs: k.createdMs, pkey: k.pkey, receivedBeforeMs, direction });
    const whole = await open(base);
    const numberMatched = await this.count(whole, base);
    // An open end moves with the clock: left out of the tag, or no first page would ever be a 304.
    const windowTag = window.openEnd === true ? whole.tagOfOpenEnd('items') : whole.tag('items');
    if (cursor?.direction === 'before') {
      const { items, more } = await this.newerThan(open, base, cursor, limit);
      return {
        features: items.map((i) => i.feature),
        // The reports of this page were older than the cursor: the next page starts after its last one.
        next: items.length > 0 ? at(items[items.length - 1]!.key, 'after') : { ...cursor, direction: 'after' },
        prev: more && items.length > 0 ? at(items[0]!.key, 'before') : undefined,
        numberMatched,
        windowTag,
      };
    }
    const query: WindowQuery = cursor
      ? { ...base, receivedBeforeMs: undefined, after: { createdMs: cursor.createdMs, pkey: cursor.pkey, receivedBeforeMs }, limit: limit + 1 }
      : { ...base, limit: limit + 1 };
    const items = await this.read(await open(query));
    const next = items.length > limit ? at(items[limit - 1]!.key, 'after') : undefined;
    const page = items.slice(0, limit);
    // A page reached by a cursor has newer reports before it: the previous page ends at its first.
    const prev = cursor ? (page.length > 0 ? at(page[0]!.key, 'before') : { ...cursor, direction: 'before' as const }) : undefined;
    return { features: page.map((i) => i.feature), next, prev, numberMatched, windowTag };
  }

  /**
   * The `limit` reports just newer than the cursor, newest first, and whether there are newer
   * ones still. The archive reads newest first, so a widening time range above the cursor is
   * read (an hour, then four times more each time) until it holds more than a page; as it is
   * read, only the last `limit` reports newer than the cursor are kept (those nearest it), so a
   * range of many reports (a backfill's hour, reports of one second) costs time, not memory.
   */
  private async newerThan(open: (query: WindowQuery) => Promise<Window>, base: WindowQuery, cursor: ReportsCursor, limit: number): Promise<{ items: Item[]; more: boolean }> {
    const newer = (k: Key) => k.createdMs > cursor.createdMs || (k.createdMs === cursor.createdMs && k.pkey > cursor.pkey);
    for (let span = 3_600_000; ; span *= 4) {
      const endMs = Math.min(base.endMs, cursor.createdMs + span);
      const range: WindowQuery = { ...base, startMs: Math.max(base.startMs, cursor.createdMs), endMs };
      // A page of all of them, item by item with their keys (a read without a limit comes joined).
      const n = await (await open(range)).count();
      const ring: Item[] = [];
      let seen = 0;
      for await (const batch of (await open({ ...range, limit: Math.max(n, 1) })).batches('geojson')) {
        const features = batch.items as string[];
        for (let i = 0; i < features.length; i++) {
          const key = batch.keys![i]!;
          if (!newer(key)) continue;
          ring[seen % limit] = { feature: withId(features[i]!, featureId(key.pkey, key.createdMs)), key };
          seen += 1;
        }
      }
      if (seen > limit || endMs >= base.endMs) {
        // The ring's oldest entry first: the reports in the order they were read.
        const first = seen > limit ? seen % limit : 0;
        return { items: [...ring.slice(first), ...ring.slice(0, first)], more: seen > limit };
      }
    }
  }

  private async read(window: Window): Promise<Item[]> {
    const items: Item[] = [];
    for await (const batch of window.batches('geojson')) {
      const features = batch.items as string[];
      for (let i = 0; i < features.length; i++) {
        const key = batch.keys![i]!;
        items.push({ feature: withId(features[i]!, featureId(key.pkey, key.createdMs)), key });
      }
    }
    return items;
  }

  /** One report by its feature id, or undefined. */
  async item(id: string): Promise<string | undefined> {
    const parsed = parseFeatureId(id);
    if (!parsed) return undefined;
    const query: WindowQuery = { startMs: parsed.createdMs, endMs: parsed.createdMs, admin: undefined, limit: 100_000 };
    for await (const batch of (await this.archive.open(query)).batches('geojson')) {
      const at = batch.keys!.findIndex((k) => k.pkey === parsed.pkey);
      if (at >= 0) return withId((batch.items as string[])[at]!, id);
    }
    return undefined;
  }

  private async count(window: Window, query: WindowQuery): Promise<number> {
    // By the window's tag (its parts and the retractions it hides): a retraction or a new part
    // during a walk is counted at once.
    const key = `${window.tag('count')} ${query.receivedBeforeMs}`;
    const hit = this.counts.get(key);
    if (hit !== undefined) {
      // Most recently used last: the oldest entry is the first one evicted.
      this.counts.delete(key);
      this.counts.set(key, hit);
      return hit;
    }
    const n = await window.count();
    this.counts.set(key, n);
    if (this.counts.size > 256) this.counts.delete(this.counts.keys().next().value!);
    return n;
  }
}
