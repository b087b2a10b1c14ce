// Reprocessing after a boundary change: re-tag the reports of a window with
// the current boundary version and rewrite each hour whose tags change.
import fs from 'node:fs/promises';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { writeParquet } from '../archive/partWriter.js';
import { storePartPublisher } from '../archive/partPublisher.js';
import { listWindowParts } from '../archive/partListing.js';
import { readRows } from '../archive/readRows.js';
import type { ArchiveRow } from '../archive/partColumns.js';
import type { ChangedReport, ChangeLog } from '../archive/changes.js';
import type { BoundaryRepository } from '../boundaries/repository.js';
import type { Tags } from '../boundaries/tagger.js';
import { newDayPartKey, newPartKey } from '../store/layout.js';
import type { PartRewriteDeps } from './compact.js';
import type { Progress } from './progress.js';

/** What reprocessing uses: a rewrite's, the current boundaries and the change log. */
export interface ReprocessDeps extends PartRewriteDeps {
  boundaries: Pick<BoundaryRepository, 'current'>;
  changes: Pick<ChangeLog, 'record'>;
}

export interface ReprocessResult {
  boundaryVersion: string;
  reports: number;
  cityChanges: number;
  localAreaChanges: number;
  /** "PH-QC -> null": how many reports move that way. */
  moves: Record<string, number>;
  hoursRewritten: number;
  dryRun: boolean;
}

export async function reprocess(
  rt: ReprocessDeps,
  options: { fromMs: number; toMs: number; dryRun: boolean },
  progress?: Progress,
): Promise<ReprocessResult> {
  const boundaries = await rt.boundaries.current();
  const hours = await listWindowParts(rt.store, options.fromMs, options.toMs);
  const result: ReprocessResult = {
    boundaryVersion: boundaries.version,
    reports: 0,
    cityChanges: 0,
    localAreaChanges: 0,
    moves: {},
    hoursRewritten: 0,
    dryRun: options.dryRun,
  };
  const publisher = storePartPublisher(rt);
  const tmpDir = path.join(rt.config.dataDir, 'tmp', 'reprocess');
  await fs.mkdir(tmpDir, { recursive: true });
  progress?.start(hours.length);
  for (const hour of hours) {
    progress?.tick();
    const rows = await readRows(rt.db, await Promise.all(hour.parts.map((p) => rt.cache.localFile(p))));
    let changed = false;
    // Reports whose answered tags change: a mirror syncing with updated_after must see them again.
    const moved: ChangedReport[] = [];
    const retagged: ArchiveRow[] = rows.map((row) => {
      const tags = boundaries.tagger.tag(row.lng, row.lat);
      const inWindow = row.created_at_ms >= options.fromMs && row.created_at_ms <= options.toMs;
      if (!inWindow) return row;
      result.reports += 1;
      if (tags.instance_region_code !== row.instance_region_code) {
        result.cityChanges += 1;
        const move = `${row.instance_region_code ?? 'null'} -> ${tags.instance_region_code ?? 'null'}`;
        result.moves[move] = (result.moves[move] ?? 0) + 1;
      }
      if (tags.local_area_id !== row.local_area_id) result.localAreaChanges += 1;
      const retagged = (Object.keys(tags) as (keyof Tags)[]).some((c) => tags[c] !== (row[c] ?? null));
      if (retagged) moved.push({ pkey: row.pkey, createdMs: row.created_at_ms });
      if (retagged || boundaries.version !== row.boundary_version) changed = true;
      const next: ArchiveRow = { ...row, ...tags, boundary_version: boundaries.version };
      return next;
    });
    if (options.dryRun || !changed) continue;
    const out = path.join(tmpDir, `${randomUUID()}.parquet`);
    try {
      await writeParquet(rt.db, retagged, out);
      // New part first, then the old ones go: readers meanwhile see both and de-duplicate.
      // Logged before the new part, and again once it is durable. The first log survives a run
      // cut short after the part (a rerun finds the tags already new and writes nothing); a sync
      // lists it only a settling time after it was named, by when the part is readable unless its
      // PUT took that long, which the second log covers.
      await rt.changes.record(moved);
      await publisher.publish(hour.wholeDay ? newDayPartKey(hour.hourMs) : newPartKey(hour.hourMs), out);
      await rt.changes.record(moved);
      await publisher.retire(hour.parts.map((p) => p.key));
      result.hoursRewritten += 1;
    } finally {
      await fs.rm(out, { force: true });
    }
  }
  progress?.stop();
  return result;
}
