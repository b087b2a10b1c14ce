// Which hours a part's ready texts answer for a window, and the reads that send them: whole
// hours are their stored sections (consecutive hours of one sidecar, one read), an hour the
// window cuts or a filtered window is the reports the per-report index selects.
import { READY_TEXTS, type ReadyHour, type ReadyItems, type ReadyShape } from './readyFormat.js';
import { readReadyIndex, type ReadyFile } from './readyIndex.js';
import { readItems, readSelection, streamHours, type StoredSection } from './readyReader.js';
import { keepsAllTimes, mayKeepSome, selectItems, type ItemFilter, type Selection } from './itemFilter.js';

/** An hour a sidecar answers. */
export interface ReadyRun {
  readonly ready: ReadyFile;
  readonly hourMs: number;
  /** Undefined: the hour has no reports (or none the filters keep). */
  readonly hour: ReadyHour | undefined;
  /** The reports kept, when not the whole hour. */
  readonly selection?: Selection;
  readonly filter: ItemFilter;
  /** Every report of the hour is kept: its texts (and Arrow batch) are its sections as they are. */
  readonly whole: boolean;
  /** [minLng, minLat, maxLng, maxLat] of the reports kept; undefined when none. */
  readonly bbox: [number, number, number, number] | undefined;
}

/** Whether ready texts hold items of `shape` joined by `separator` (NDJSON's newlines are the GeoJSON section's, its commas taken out as it is read). */
export function servesText(shape: string, separator: string): boolean {
  return READY_TEXTS.some((t) => t.shape === shape && (t.separator === separator || isLines(shape, separator)));
}

const isLines = (shape: string, separator: string) => shape === 'geojson' && separator === '\n';

/** The `hours` of the sidecar in `file` as runs, by hour, for a window's filter. */
export function readyRunsOf(file: string, hours: readonly number[], filter: ItemFilter): Map<number, ReadyRun> {
  const out = new Map<number, ReadyRun>();
  const filtered = filter.admin !== undefined || filter.bbox !== undefined;
  const ready = readReadyIndex(file);
  const index = new Map(ready.index.hours.map((h) => [h.hourMs, h]));
  const whole = (hourMs: number, hour: ReadyHour | undefined): ReadyRun => ({ ready, hourMs, hour, filter, whole: true, bbox: hour?.bbox });
  let items: ReadyItems | undefined;
  for (const hourMs of hours) {
    const hour = index.get(hourMs);
    // None of its reports in the window's time: nothing to read (readySections.ts fetched nothing).
    if (hour && !mayKeepSome(hour, filter)) {
      out.set(hourMs, whole(hourMs, undefined));
      continue;
    }
    if (!hour || (!filtered && keepsAllTimes(hour, filter))) {
      out.set(hourMs, whole(hourMs, hour));
      continue;
    }
    const selection = selectItems(ready, (items ??= readItems(ready)), hour, filter);
    if (selection.count === hour.count) out.set(hourMs, whole(hourMs, hour));
    else out.set(hourMs, { ready, hourMs, hour: selection.count === 0 ? undefined : hour, selection, filter, whole: false, bbox: selection.bbox });
  }
  return out;
}

/**
 * The reads of consecutive runs of an answer (no other hour between them), in their order:
 * whole hours that follow each other in one sidecar are one read; each selection is a read of
 * its own. `separator`: what joins the items (NDJSON's '\n' for GeoJSON); 'arrow': the hours'
 * record batches.
 */
export function readyReads(runs: readonly ReadyRun[], shape: ReadyShape | 'arrow', separator = ''): (() => Iterable<Uint8Array | StoredSection>)[] {
  const lines = isLines(shape, separator);
  const reads: (() => Iterable<Uint8Array | StoredSection>)[] = [];
  let pending: { ready: ReadyFile; hours: number[]; end: number } | undefined;
  const flush = () => {
    if (pending) reads.push(streamHours(pending.ready, pending.hours, shape, lines));
    pending = undefined;
  };
  for (const r of runs) {
    if (!r.hour) continue;
    if (r.selection) {
      if (shape === 'arrow') throw new Error('Arrow batches are read by whole hours only');
      flush();
      const read = readSelection(r.ready, r.hourMs, r.selection, r.filter, shape, lines);
      reads.push(() => [read()]);
      continue;
    }
    const [start, end] = r.hour[shape];
    // An hour's sections follow the one before it in the sidecar.
    if (pending && pending.ready === r.ready && pending.end === start) {
      pending.hours.push(r.hourMs);
      pending.end = end;
    } else {
      flush();
      pending = { ready: r.ready, hours: [r.hourMs], end };
    }
  }
  flush();
  return reads;
}
