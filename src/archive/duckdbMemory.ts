// Keeps the resident size of long answers bounded. Two kinds of memory V8 does not weigh
// when it schedules collections pile up between them in a long pull: DuckDB's query results
// (native, freed only when their JS wrappers are collected) and the buffers of rendered hours
// on their way to the socket (promoted before they are written, then freed only by a full
// collection). Measured on a year-long pull, either alone added 200 MB or more.
import v8 from 'node:v8';
import vm from 'node:vm';

v8.setFlagsFromString('--expose-gc');
const collect = vm.runInNewContext('gc') as (options?: { type: 'minor' | 'major'; execution: 'sync' }) => void;

/** Growth of the resident size, since the last full collection, that triggers the next one. */
const RSS_SLACK = 64 * 1024 * 1024;
let rssAfterFullCollection = 0;

/**
 * Collects what a finished step left behind: the young generation (about a millisecond),
 * and everything once the process has grown by RSS_SLACK since the last full collection.
 *
 * Measured with `npm run bench -- --quick --hourly --only archive --answers-only --windows month
 * --formats geojson,csv,parquet,arrow` (a month of 50,000 reports in 720 hourly parts, every hour
 * built by DuckDB), cold peak RSS of the server, two runs each, in MB:
 *   GeoJSON 198, 196 as here; 256, 242 with no forced collection; 241, 233 with the full one only.
 *   CSV     176, 182;         203, 207;                          212, 215.
 *   Arrow   197, 176;         205, 216;                          201, 217.
 * (Parquet, 340 to 356, is the same either way.) The young collection at each connection's close
 * is what frees DuckDB's results: without it the peak is 25 to 60 MB higher. The full collection
 * is collectAll's: with V8's options form instead, the same month's cold pulls took a fifth to two
 * fifths longer (GeoJSON 1,334–1,701 ms against 1,125–1,264) at the same peaks.
 */
export function releaseMemory(young = true): void {
  if (young) collect({ type: 'minor', execution: 'sync' });
  if (process.memoryUsage.rss() > rssAfterFullCollection + RSS_SLACK) collectAll();
}

/**
 * Collects everything, at once, before a step that needs much native memory (an import's sort of
 * its staged rows by DuckDB): the garbage a long JavaScript step left would otherwise stay
 * resident beside it. Measured on the 2.5 M-report year's import: peak RSS 983–1,035 MB without
 * it, 782–794 MB with it.
 */
export function releaseAll(): void {
  collectAll();
}

/**
 * V8's forced collection without options, which leaves the heap at what is live; after a major
 * one with options ({ type: 'major', execution: 'sync' }) it still counts the garbage (an
 * import's leftovers: 27 MB of heap after this, 126 MB after that).
 */
function collectAll(): void {
  collect();
  rssAfterFullCollection = process.memoryUsage.rss();
}
