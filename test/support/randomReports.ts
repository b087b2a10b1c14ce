// Random reports for the sidecars' unit tests: ties in created_at, points on each other, texts
// that need escaping or look like formulas, reports outside every city or barangay, purged
// tombstones. Seeded, so a failure can be replayed.
import type { ArchiveRow } from '../../src/archive/partColumns.js';

/** A seeded generator of floats in [0, 1). */
export function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

export const CITIES = ['PH-QC', 'PH-MNL', 'PH-PG'];
export const AREAS = ['137404001', '137404002', '133900001', '035400001', '035400002'];
const TEXTS = ['Baha sa kalsada', '=HYPERLINK("x")', 'Line one\nline two "quoted"', 'tuhod, ñ', '+63 912', ''];

/** `n` reports created in [fromMs, fromMs + spanMs), of which about one in twenty is a purged tombstone. */
export function randomReports(next: () => number, n: number, fromMs: number, spanMs: number): ArchiveRow[] {
  const pick = <T>(list: readonly T[]) => list[Math.floor(next() * list.length)]!;
  const rows: ArchiveRow[] = [];
  for (let i = 0; i < n; i++) {
    // Some reports share an instant (ties broken by pkey), some share a place.
    const created = i > 0 && next() < 0.1 ? rows[i - 1]!.created_at_ms : fromMs + Math.floor(next() * spanMs);
    const shared = i > 0 && next() < 0.1 ? rows[i - 1]! : undefined;
    const city = next() < 0.15 ? null : pick(CITIES);
    const retracted = next() < 0.05;
    rows.push({
      pkey: `partner-${i}`,
      created_at_ms: created,
      source: 'partner',
      status: retracted ? 'retracted' : 'confirmed',
      url: retracted || next() < 0.5 ? null : `https://example.org/r/${i}`,
      image_url: null,
      disaster_type: 'flood',
      report_data: next() < 0.3 ? `{"depth_cm":${Math.floor(next() * 120)}}` : null,
      instance_region_code: city,
      local_area_id: city === null || next() < 0.2 ? null : pick(AREAS),
      title: retracted ? '' : pick(TEXTS),
      text: retracted ? '' : pick(TEXTS),
      lng: shared?.lng ?? 120.9 + Math.round(next() * 2_000) / 10_000,
      lat: shared?.lat ?? 14.5 + Math.round(next() * 2_000) / 10_000,
      post_id: i,
      partner_city: 'Quezon City',
      received_at_ms: created + 1_000,
      boundary_version: 'v0',
      key_name: 'alpha',
    });
  }
  return rows;
}

/**
 * A random window filter over [fromMs, fromMs + spanMs): edges often on a report's instant or next
 * to it, a city or a set of cities (as a province or region names them; maybe none of the part's), a bbox.
 */
export function randomFilter(next: () => number, rows: readonly ArchiveRow[], fromMs: number, spanMs: number): { startMs: number; endMs: number; admin: readonly string[] | undefined; bbox: [number, number, number, number] | undefined } {
  const edge = () => {
    const r = next();
    if (r < 0.4) return rows[Math.floor(next() * rows.length)]!.created_at_ms + Math.floor(next() * 3) - 1;
    return fromMs - 3_600_000 + Math.floor(next() * (spanMs + 2 * 3_600_000));
  };
  const [a, b] = [edge(), edge()];
  const pick = () => CITIES[Math.floor(next() * CITIES.length)]!;
  const r = next();
  const admin = r < 0.4 ? undefined : r < 0.7 ? [pick()] : r < 0.9 ? [...new Set([pick(), pick(), 'PH-NONE'])] : ['PH-NONE'];
  let bbox: [number, number, number, number] | undefined;
  if (next() < 0.4) {
    // Corners often on a report's own coordinates, where < and <= differ.
    const coord = (axis: 'lng' | 'lat', base: number) => (next() < 0.5 ? rows[Math.floor(next() * rows.length)]![axis] : base + Math.round(next() * 2_000) / 10_000);
    const [x1, x2] = [coord('lng', 120.9), coord('lng', 120.9)];
    const [y1, y2] = [coord('lat', 14.5), coord('lat', 14.5)];
    bbox = [Math.min(x1, x2), Math.min(y1, y2), Math.max(x1, x2), Math.max(y1, y2)];
  }
  return { startMs: Math.min(a, b), endMs: Math.max(a, b), admin, bbox };
}
