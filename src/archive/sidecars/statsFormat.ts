// The layout of a stats sidecar (FORMAT.md): a header line, zero padding to a multiple of 8
// bytes, then five columns of `count` values, reports oldest first.
export const STATS_VERSION = 2;
/** The barangay of a report outside every barangay. */
export const NO_AREA = 65_535;
/** The city of a report outside every city. */
export const NO_CITY = 65_535;
/** Bytes per report: created_at, lng, lat (8 each), barangay (2), city (2: a part may hold any of the country's 1,642). */
export const REPORT_BYTES = 28;

export interface StatsHeader {
  version: typeof STATS_VERSION;
  count: number;
  cities: string[];
  areas: string[];
}

export const align8 = (n: number): number => Math.ceil(n / 8) * 8;

/** Where each column of `n` reports starts, from the end of the padding (float64 first, so each stays aligned). */
export function columnOffsets(n: number): { createdUs: number; lng: number; lat: number; area: number; city: number } {
  return { createdUs: 0, lng: 8 * n, lat: 16 * n, area: 24 * n, city: 26 * n };
}
