// Counts a stats sidecar's reports by bucket and key in JavaScript, with the window's filters
// as DuckDB's (the same doubles compared; created_at to the microsecond). It must count what
// `statsSql` (stats.ts) counts over the part's rows: test/unit/sidecarEngines.test.ts proves it on
// random windows, filters, intervals and offsets.
import { keptCodes, type ItemFilter } from './itemFilter.js';
import { NO_AREA, NO_CITY } from './statsFormat.js';
import { firstAtOrAfter, readStatsSidecar } from './statsReader.js';

/** The bucket of a report created at `us` (epoch µs), and the created_at range [fromUs, toUs) that shares it. */
export type Bucketer = (us: number) => { bucketMs: number; fromUs: number; toUs: number };

/** What a count groups by: the city, the barangay, or nothing. */
export type StatsKey = 'city' | 'local_area' | 'none';

/**
 * A counter of sidecar files: each call reads one and adds its kept reports to `add` (bucket,
 * key: a code, or null outside every city or barangay and for 'none', count). Only the columns
 * the question needs are read.
 */
export function sidecarCounter(filter: ItemFilter, by: StatsKey, bucketOf: Bucketer, add: (bucketMs: number, key: string | null, count: number) => void): (file: string) => void {
  const startUs = filter.startMs * 1000;
  const endUs = filter.endMs * 1000;
  const bbox = filter.bbox;
  const need = { place: bbox !== undefined, area: by === 'local_area', city: by === 'city' || filter.admin !== undefined };
  return (file) => {
    const r = readStatsSidecar(file, need);
    const kept = keptCodes(r.cities, filter.admin);
    if (kept && !kept.includes(1)) return;
    // Keys: indexes into the sidecar's codes; the last slot for reports outside every city or barangay (and for by=none).
    const codes = by === 'local_area' ? r.areas : by === 'city' ? r.cities : [];
    const column = by === 'local_area' ? r.area : by === 'city' ? r.city : undefined;
    const none = by === 'local_area' ? NO_AREA : NO_CITY;
    const counts = new Map<number, Int32Array>();
    let fromUs = Infinity;
    let toUs = -Infinity;
    let row: Int32Array = new Int32Array(0);
    for (let i = firstAtOrAfter(r.createdUs, startUs); i < r.count; i++) {
      const t = r.createdUs[i]!;
      if (t > endUs) break;
      if (kept && kept[r.city[i]!] !== 1) continue;
      if (bbox) {
        const x = r.lng[i]!;
        const y = r.lat[i]!;
        if (x < bbox[0] || x > bbox[2] || y < bbox[1] || y > bbox[3]) continue;
      }
      if (t < fromUs || t >= toUs) {
        const b = bucketOf(t);
        ({ fromUs, toUs } = b);
        let known = counts.get(b.bucketMs);
        if (!known) counts.set(b.bucketMs, (known = new Int32Array(codes.length + 1)));
        row = known;
      }
      const k = column === undefined ? none : column[i]!;
      row[k === none ? codes.length : k]! += 1;
    }
    for (const [b, keys] of counts) {
      keys.forEach((n, k) => {
        if (n > 0) add(b, k < codes.length ? codes[k]! : null, n);
      });
    }
  };
}
