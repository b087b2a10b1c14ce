// Which bytes of a ready text an answer reads, fetched before it reads them: the index line,
// then the one section asked for over the window's hours (consecutive hours: one range), the
// per-report index only when an hour is cut or the window filtered, the Parquet section only
// when every report lies in the window. On S3 a cold answer then moves the bytes of its own
// format, not the part's every format.
import type { ObjectInfo } from '../../store/objectStore.js';
import type { ByteRange, RangedFile } from '../rangedCopy.js';
import { readyInfoOf } from './keys.js';
import { ITEM_BYTES, type ReadyShape } from './readyFormat.js';
import { readReadyIndex, type ReadyFile } from './readyIndex.js';
import type { ItemFilter } from './itemFilter.js';

const HOUR_MS = 3_600_000;

/** What an answer will read of a part's ready texts: one shape's hours within the filter's window, or its Parquet section. */
export interface ReadyWant {
  shape: ReadyShape | 'arrow' | 'parquet';
  filter: ItemFilter;
}

/**
 * Bytes of the start of a ready text fetched first: its index line (about 200 bytes an hour, and
 * the city codes), and, for a small part, all of it.
 */
export const READY_HEAD_BYTES = 64 * 1024;

/** A guessed range longer than this is not fetched with the index: the index comes first, then what it locates. */
const MAX_GUESS = 8 * 1024 * 1024;
/** How far a guess reaches past the last ready text's proportions, each way. */
const MARGIN = 0.08;
/** Ranges closer than this to the index are fetched with it, in its read. */
const NEAR_HEAD = 256 * 1024;

/** A ranged copy of a stored object, its first `headBytes` and the `guesses` fetched at once (the part cache's). */
export type RangedFileOf = (info: ObjectInfo, headBytes: number, guesses: readonly ByteRange[]) => Promise<RangedFile | undefined>;

/** What a ready text is made of, each a byte range of it: a shape's sections, the Parquet section, the per-report index. */
type Kind = ReadyWant['shape'] | 'items';

/**
 * The ready texts of parts, with what an answer reads fetched. A ready text is otherwise two
 * round trips, its index and then what the index locates; ready texts of one archive are
 * alike, so where the last one read had a section (as fractions of its part's size, which the
 * listing gives) tells where this one's likely is, and that range is fetched with the index,
 * at once (the GeoJSON sections, first after the index, in the same read). A guess that falls
 * short costs the rest in a second read; one that is wrong costs bytes, never an answer.
 */
export class ReadySections {
  /** Where each kind lay in the last ready text read: [start, end) per byte of its part. */
  private readonly spans = new Map<Kind, [number, number]>();

  constructor(private readonly rangedFileOf: RangedFileOf) {}

  /** The local path of the part's ready texts with what `want` reads present; undefined when it has none. */
  async fileOf(part: ObjectInfo, want: ReadyWant): Promise<string | undefined> {
    let head = READY_HEAD_BYTES;
    const guesses: ByteRange[] = [];
    const filtered = want.filter.admin !== undefined || want.filter.bbox !== undefined;
    for (const kind of filtered ? [want.shape, 'items' as const] : [want.shape]) {
      const span = this.spans.get(kind);
      if (!span || part.size === 0) continue;
      const from = Math.floor(span[0] * part.size * (1 - MARGIN));
      const to = Math.ceil(span[1] * part.size * (1 + MARGIN));
      if (to - from > MAX_GUESS) continue;
      if (from < head + NEAR_HEAD) head = Math.max(head, to);
      else guesses.push([from, to]);
    }
    const ranged = await this.rangedFileOf(readyInfoOf(part), head, guesses);
    if (!ranged) return undefined;
    return fetchReadySections(ranged, want, (ready) => {
      if (part.size > 0) for (const [kind, range] of spansOf(ready)) this.spans.set(kind, [range[0] / part.size, range[1] / part.size]);
    });
  }
}

/** Where each kind lies in a ready text (from its start). */
function spansOf({ base, index }: ReadyFile): [Kind, ByteRange][] {
  const out: [Kind, ByteRange][] = [
    ['parquet', [base + index.parquet[0], base + index.parquet[1]]],
    ['items', [base + index.items.at, base + index.items.at + index.items.count * ITEM_BYTES]],
  ];
  if (index.hours.length === 0) return out;
  for (const kind of ['geojson', 'topojson', 'csv', 'arrow'] as const) {
    out.push([kind, [base + Math.min(...index.hours.map((h) => h[kind][0])), base + Math.max(...index.hours.map((h) => h[kind][1]))]]);
  }
  return out;
}

/** Has the bytes `want` reads present in the ranged file; returns its local path. `indexed`: told the index once read. */
export async function fetchReadySections(ranged: RangedFile, want: ReadyWant, indexed: (ready: ReadyFile) => void = () => undefined): Promise<string> {
  const ready = await indexOf(ranged);
  indexed(ready);
  const { base, index } = ready;
  const { startMs, endMs } = want.filter;
  const hours = index.hours.filter((h) => h.hourMs + HOUR_MS - 1 >= startMs && h.hourMs <= endMs);
  const ranges: ByteRange[] = [];
  if (want.shape === 'parquet') {
    // Read only when every report of the part is in the window (storedParquet.ts).
    if (index.hours.every((h) => h.minMs >= startMs && h.maxMs <= endMs)) ranges.push([base + index.parquet[0], base + index.parquet[1]]);
  } else {
    const { shape } = want;
    for (const h of hours) ranges.push([base + h[shape][0], base + h[shape][1]]);
    const filtered = want.filter.admin !== undefined || want.filter.bbox !== undefined;
    if (filtered || hours.some((h) => h.minMs < startMs || h.maxMs > endMs)) ranges.push([base + index.items.at, base + index.items.at + index.items.count * ITEM_BYTES]);
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
