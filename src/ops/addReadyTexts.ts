// The second half of a bulk job's parts. A bulk job (an import, a reprocess) stores its parts with
// their stats sidecars only, so that all of its reports are queryable as early as possible (a part
// without ready texts is answered by the query engine, the same bytes), then makes their ready
// texts, the answers' fast path, from local copies of the parts. A part merged away meanwhile
// (compaction) needs none: its successor was written with them. A job stopped before this step
// leaves its parts to compaction, which writes the sidecars a part lacks, or to the job run again.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { PartPublisher } from '../archive/partPublisher.js';
import type { ObjectStore } from '../store/objectStore.js';
import { mapWeighted } from './concurrency.js';

/** A part stored without its ready texts: its key, its local copy, and its reports (when known). */
export interface UntextedPart {
  key: string;
  file: string;
  reports?: number;
}

/** A part whose ready texts are written eight at a time: a day of a file spread over a year, not a busy day. */
export const SMALL_PART_REPORTS = 2_000;

/**
 * Writes the ready texts of `parts` still stored, each from its local copy (the caller's), built
 * in `scratchDir`. Eight small parts at once (each has a fixed cost, much of it waiting on
 * DuckDB's queries), two larger ones: DuckDB holds a part's rows in its memory, and four days of
 * 6,850 reports at once ran it out of its default 256 MB. A part of unknown size counts as large.
 */
export async function addReadyTexts(
  deps: { store: Pick<ObjectStore, 'head'>; publisher: Pick<PartPublisher, 'upgrade'> },
  parts: readonly UntextedPart[],
  scratchDir: string,
  onDone?: () => void,
): Promise<void> {
  const weight = (part: UntextedPart) => (part.reports !== undefined && part.reports <= SMALL_PART_REPORTS ? 1 : 4);
  await mapWeighted(parts, { limit: 8, budget: 8, weight }, async ({ key, file }) => {
    const part = await deps.store.head(key);
    if (part && (await exists(file))) await deps.publisher.upgrade(part, file, path.join(scratchDir, `${randomUUID()}.ready`));
    onDone?.();
  });
}

async function exists(file: string): Promise<boolean> {
  return fs.stat(file).then(
    () => true,
    () => false,
  );
}
