// The layout of a ready text (FORMAT.md): its index line, its sections and the per-report
// index's columns, shared by the writer and the readers.
import type { FeatureShape } from '../sql.js';

/** The version written today, and the only one read. */
export const READY_VERSION = 7;

/**
 * The texts kept ready: a shape and the separator its items are joined by, in section order.
 * GeoJSON's is a FeatureCollection's (with a newline, which JSON text never holds raw, so
 * NDJSON is the same text with the comma before each newline taken out).
 */
export const READY_TEXTS = [
  { shape: 'geojson', separator: ',\n' },
  { shape: 'topojson', separator: ',' },
  { shape: 'csv', separator: '\n' },
] as const satisfies readonly { shape: FeatureShape; separator: string }[];

export type ReadyShape = (typeof READY_TEXTS)[number]['shape'];

/** Byte range [start, end) within the body (offsets count from the end of the index line): one gzip member (readyMember.ts). */
export type ByteRange = [number, number];

/** One hour of a part that holds reports. */
export interface ReadyHour {
  hourMs: number;
  count: number;
  /** Its first report's position in the per-report index. */
  first: number;
  bbox: [number, number, number, number];
  /** created_at of its oldest and newest report (epoch ms). */
  minMs: number;
  maxMs: number;
  /** Its items in each shape, joined by the shape's separator, gzipped. */
  geojson: ByteRange;
  topojson: ByteRange;
  csv: ByteRange;
  /** Its reports as one Arrow IPC record batch message (the Arrow answer's schema), gzipped. */
  arrow: ByteRange;
}

/** The first line. */
export interface ReadyIndex {
  version: typeof READY_VERSION;
  /** Hours with reports, newest first. */
  hours: ReadyHour[];
  /** Where the per-report index starts, how many reports it has, and the city codes it names. */
  items: { at: number; count: number; codes: string[] };
  /**
   * The part's reports as a Parquet file in the answer's form (export columns and WKB geometry,
   * newest first), not gzipped: a window's Parquet answer splices its row groups.
   */
  parquet: ByteRange;
}

/** Parses an index line; undefined for a version this release does not read. */
export function parseIndex(line: string): ReadyIndex | undefined {
  const index = JSON.parse(line) as { version?: unknown };
  return index.version === READY_VERSION ? (index as ReadyIndex) : undefined;
}

/** Bytes per report of the per-report index: created_at, lng, lat (8 each), an end per shape (4 each), the city (2: a part may hold any of the country's 1,642). */
export const ITEM_BYTES = 8 * 3 + 4 * READY_TEXTS.length + 2;
/** The city of a report outside every city. */
export const NO_CITY = 65_535;

/** The per-report index of `n` reports: one column after another, so each stays aligned. */
export interface ReadyItems {
  createdUs: Float64Array;
  lng: Float64Array;
  lat: Float64Array;
  /**
   * Where each report's item ends in each shape: a position in the section's plain text (every
   * hour's items, the shape's separator between items and between hours).
   */
  ends: Record<ReadyShape, Uint32Array>;
  /** An index into the index line's `items.codes`; NO_CITY: none. */
  city: Uint16Array;
}

/** The columns of `n` reports' per-report index laid over `block` (n × ITEM_BYTES bytes). */
export function itemColumns(block: ArrayBuffer, n: number): ReadyItems {
  const ends = Object.fromEntries(READY_TEXTS.map(({ shape }, s) => [shape, new Uint32Array(block, endsAt(n, s), n)])) as Record<ReadyShape, Uint32Array>;
  return { createdUs: new Float64Array(block, 0, n), lng: new Float64Array(block, 8 * n, n), lat: new Float64Array(block, 16 * n, n), ends, city: new Uint16Array(block, endsAt(n, READY_TEXTS.length), n) };
}

/** Where an hour's items start in a shape's plain text (ends: that shape's column). */
export function plainStartOf(hour: Pick<ReadyHour, 'first'>, ends: Uint32Array, shape: ReadyShape): number {
  return hour.first === 0 ? 0 : ends[hour.first - 1]! + separatorOf(shape).length;
}

/** The separator a shape's items are joined by. */
export const separatorOf = (shape: ReadyShape): string => READY_TEXTS[sectionOf(shape)]!.separator;

/** Where the ends column of section `s` starts within the per-report index of `n` reports. */
function endsAt(n: number, s: number): number {
  return 24 * n + 4 * s * n;
}

/** The section index of a shape. */
const sectionOf = (shape: ReadyShape): number => READY_TEXTS.findIndex((t) => t.shape === shape);
