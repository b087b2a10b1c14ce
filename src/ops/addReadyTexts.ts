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

/**
 * A part stored without its ready texts: its key, its local copy, its reports (when known), and
 * the version it was stored as (when known: a part rewritten since, by a purge, gets none from
 * the copy).
 */
export interface UntextedPart {
  key: string;
  file: string;
  reports?: number;
  etag?: string;
}

/** A part whose ready texts are built with its neighbours': a day of a file spread over a year, not a busy day. */
export const SMALL_PART_REPORTS = 8_000;

/** Reports whose ready texts are built together at most: DuckDB holds their rows in its memory. */
const GROUP_REPORTS = 24_000;

/** A group of at most this many reports is built eight at a time. */
const LIGHT_REPORTS = 2_000;
/** What a group weighs against the budget of 12: eight light ones at a time, three of up to GROUP_REPORTS, two larger parts. */
const weightOf = (group: readonly UntextedPart[]): number => {
  const reports = reportsOf(group);
  return reports <= LIGHT_REPORTS ? 1.5 : reports <= GROUP_REPORTS ? 4 : 6;
};

/**
 * Writes the ready texts of `parts` still stored, each from its local copy (the caller's), built
 * in `scratchDir`. Consecutive small parts are built together, by one set of queries (each query
 * has a fixed cost of some milliseconds, most of a small part's texts); three groups or two
 * larger parts at once, as DuckDB holds their rows in its memory (256 MB by default). A part of
 * unknown size is built alone.
 */
export async function addReadyTexts(
  deps: { store: Pick<ObjectStore, 'head'>; publisher: Pick<PartPublisher, 'upgrade'> },
  parts: readonly UntextedPart[],
  scratchDir: string,
  onDone?: () => void,
): Promise<void> {
  const groups = groupsOf(parts);
  await mapWeighted(groups, { limit: 8, budget: 12, weight: weightOf }, async (group) => {
    const stored = await Promise.all(
      group.map(async ({ key, file, etag }) => {
        if (!(await exists(file))) return undefined;
        const now = await deps.store.head(key);
        // Merged away (compaction), or rewritten since it was stored (a purge, with its own sidecars).
        return now && (etag === undefined || now.etag === etag) ? now : undefined;
      }),
    );
    const present = group.flatMap((p, i) => (stored[i] ? [{ part: stored[i], file: p.file }] : []));
    if (present.length > 0) await deps.publisher.upgrade(present, path.join(scratchDir, `${randomUUID()}.ready`));
    for (let i = 0; i < group.length; i++) onDone?.();
  });
}

/** Consecutive small parts, up to GROUP_REPORTS, as one group; any other part alone. */
export function groupsOf(parts: readonly UntextedPart[]): UntextedPart[][] {
  const groups: UntextedPart[][] = [];
  let open: UntextedPart[] | undefined;
  for (const part of parts) {
    const small = part.reports !== undefined && part.reports <= SMALL_PART_REPORTS;
    if (small && open && reportsOf(open) + part.reports! <= GROUP_REPORTS) open.push(part);
    else groups.push((open = [part]));
    if (!small) open = undefined;
  }
  return groups;
}

const reportsOf = (parts: readonly UntextedPart[]) => parts.reduce((n, p) => n + (p.reports ?? Infinity), 0);

async function exists(file: string): Promise<boolean> {
  return fs.stat(file).then(
    () => true,
    () => false,
  );
}
