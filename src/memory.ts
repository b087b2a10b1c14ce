// Keeps the resident size of long answers bounded. Two kinds of memory V8 does not weigh
// when it schedules collections pile up between them in a long pull: DuckDB's query results
// (native, freed only when their JS wrappers are collected) and the buffers of rendered hours
// on their way to the socket (promoted before they are written, then freed only by a full
// collection). Measured on a year-long pull, either alone added 200 MB or more.
import v8 from 'node:v8';
import vm from 'node:vm';

v8.setFlagsFromString('--expose-gc');
const collect = vm.runInNewContext('gc') as (options: { type: 'minor' | 'major'; execution: 'sync' }) => void;

/** Growth of the resident size, since the last full collection, that triggers the next one. */
const RSS_SLACK = 64 * 1024 * 1024;
let rssAfterFullCollection = 0;

/**
 * Collects what a finished step left behind: the young generation (about a millisecond),
 * and everything once the process has grown by RSS_SLACK since the last full collection.
 */
export function releaseMemory(young = true): void {
  if (young) collect({ type: 'minor', execution: 'sync' });
  if (process.memoryUsage.rss() > rssAfterFullCollection + RSS_SLACK) {
    collect({ type: 'major', execution: 'sync' });
    rssAfterFullCollection = process.memoryUsage.rss();
  }
}
