// Which bytes of a ready text an answer reads, fetched before it reads them: the index line,
// then the one section asked for over the window's hours (consecutive hours: one range), the
// per-report index only when an hour is cut or the window filtered, the Parquet section only
// when every report lies in the window. On S3 a cold answer then moves the bytes of its own
// format, not the part's every format.
import { DAY_MS, partitionOfPartKey } from '../../store/layout.js';
import type { ObjectInfo } from '../../store/objectStore.js';
import type { Holds } from '../holds.js';
import { HOUR_MS } from '../plan.js';
import type { ByteRange, RangedFile } from '../rangedCopy.js';
import { readyInfoOf } from './keys.js';
import { ITEM_BYTES, type ReadyShape } from './readyFormat.js';
import { readReadyIndex, type ReadyFile } from './readyIndex.js';
import { keepsAllTimes, mayKeepSome, type ItemFilter } from './itemFilter.js';

/** What an answer will read of a part's ready texts: one shape's hours within the filter's window, or its Parquet section. */
export interface ReadyWant {
  shape: ReadyShape | 'arrow' | 'parquet';
  filter: ItemFilter;
}

/**
 * Bytes of the start of a ready text fetched first: its index line (about 6 KB for a day: some
 * 200 bytes an hour, and the city codes), and, for a small part, all of it. No more: for a
 * Parquet answer, what the head holds past the index is fetched for nothing (64 KiB a day made a
 * cold year's Parquet fetch 1.33 times its bytes).
 */
export const READY_HEAD_BYTES = 16 * 1024;

/** A first read longer than this is not guessed: the index comes first, then what it locates. */
const MAX_GUESSED_HEAD = 8 * 1024 * 1024;

/** A ranged copy of a stored object, its first `headBytes` fetched (the part cache's), held for `holds` when given. */
export type RangedFileOf = (info: ObjectInfo, headBytes: number, holds?: Holds) => Promise<RangedFile | undefined>;

/**
 * The ready texts of parts, with what an answer reads fetched. A ready text is otherwise two
 * round trips, its index and then what the index locates; the GeoJSON sections come first
 * after the index, so a whole GeoJSON day is fetched with its index in one read when its end
 * can be guessed: from the part's size (listed) and the last ready text's ratio of the two.
 */
export class ReadySections {
  /**
   * Bytes from a ready text's start to its GeoJSON sections' end, per byte of its part, in the
   * last one read; before any, the benchmark year's median (its days: 1.23–1.52, with the
   * two-city and the national tags alike), so a new process's first answer does not fetch each
   * of its days in two round trips. A guess too short costs the second round trip anyway; one
   * too long, the start of the TopoJSON sections.
   */
  private geojsonPerPartByte = 1.33;

  constructor(private readonly rangedFileOf: RangedFileOf) {}

  /**
   * The local path of the part's ready texts with what `want` reads present; undefined when it
   * has none. `holds`: the path stays until they are released (the reader is done with it).
   */
  async fileOf(part: ObjectInfo, want: ReadyWant, holds?: Holds): Promise<string | undefined> {
    const ranged = await this.rangedFileOf(readyInfoOf(part), this.headBytes(part, want), holds);
    if (!ranged) return undefined;
    return fetchReadySections(ranged, want, (ready) => {
      const ends = ready.index.hours.map((h) => h.geojson[1]);
      if (ends.length > 0 && part.size > 0) this.geojsonPerPartByte = (ready.base + Math.max(...ends)) / part.size;
    });
  }

  private headBytes(part: ObjectInfo, want: ReadyWant): number {
    const whole = want.filter.admin === undefined && want.filter.bbox === undefined && coversPart(part, want.filter);
    if (want.shape !== 'geojson' || !whole) return READY_HEAD_BYTES;
    // A quarter more than the last ratio: a little of the next section rather than another round trip.
    return Math.max(READY_HEAD_BYTES, Math.min(MAX_GUESSED_HEAD, Math.ceil(part.size * this.geojsonPerPartByte * 1.25)));
  }
}

/**
 * Whether the window's time holds the part's whole hour or day: a part it cuts or only touches
 * has its per-report index read after the index line (or nothing but the index), so its GeoJSON
 * sections fetched with the index line would save no round trip.
 */
function coversPart(part: ObjectInfo, filter: ItemFilter): boolean {
  const partition = partitionOfPartKey(part.key);
  if (!partition) return true;
  const endMs = partition.startMs + (partition.wholeDay ? DAY_MS : HOUR_MS) - 1;
  return filter.startMs <= partition.startMs && filter.endMs >= endMs;
}

/** Has the bytes `want` reads present in the ranged file; returns its local path. `indexed`: told the index once read. */
async function fetchReadySections(ranged: RangedFile, want: ReadyWant, indexed: (ready: ReadyFile) => void = () => undefined): Promise<string> {
  const ready = await indexOf(ranged);
  indexed(ready);
  const { base, index } = ready;
  // The hours with reports the window's time may keep (readyRuns.ts reads no others).
  const hours = index.hours.filter((h) => mayKeepSome(h, want.filter));
  const ranges: ByteRange[] = [];
  if (want.shape === 'parquet') {
    // Read only when every report of the part is in the window (storedParquet.ts).
    if (index.hours.every((h) => keepsAllTimes(h, want.filter))) ranges.push([base + index.parquet[0], base + index.parquet[1]]);
  } else {
    const { shape } = want;
    for (const h of hours) ranges.push([base + h[shape][0], base + h[shape][1]]);
    const filtered = want.filter.admin !== undefined || want.filter.bbox !== undefined;
    if (filtered || hours.some((h) => !keepsAllTimes(h, want.filter))) ranges.push([base + index.items.at, base + index.items.at + index.items.count * ITEM_BYTES]);
  }
  await ranged.ensure(ranges);
  return ranged.file;
}

/**
 * The index, fetching more of the start until its line is whole (it has always been by the
 * first bytes so far). Sections are fetched only once the index is read, so the bytes after
 * a line not yet whole are zeros, never a stray newline.
 */
async function indexOf(ranged: RangedFile): Promise<ReadyFile> {
  for (let n = READY_HEAD_BYTES; ; n *= 4) {
    await ranged.ensure([[0, Math.min(n, ranged.size)]]);
    try {
      return readReadyIndex(ranged.file);
    } catch (err) {
      if (n >= ranged.size) throw err;
    }
  }
}
