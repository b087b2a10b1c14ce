// Compaction: per closed hour, merge the parts into one file with duplicates
// removed, then delete the parts. Readers that see both the new file and the
// old parts meanwhile still answer the same (they de-duplicate by pkey).
import fs from 'node:fs/promises';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { listWindowParts } from '../archive/parts.js';
import { mergeParts } from '../archive/rows.js';
import { newPartKey } from '../reports/layout.js';
import type { Runtime } from '../runtime.js';
import type { Progress } from './progress.js';

export interface CompactOptions {
  fromMs: number;
  toMs: number;
  /** Hours ending after this are still being written to and are left alone. */
  closedBeforeMs: number;
}

export interface CompactResult {
  hoursSeen: number;
  hoursCompacted: number;
  partsRemoved: number;
  rows: number;
}

export async function compact(rt: Runtime, options: CompactOptions, progress?: Progress): Promise<CompactResult> {
  const hours = await listWindowParts(rt.store, options.fromMs, options.toMs);
  const result: CompactResult = { hoursSeen: hours.length, hoursCompacted: 0, partsRemoved: 0, rows: 0 };
  const tmpDir = path.join(rt.config.dataDir, 'tmp', 'compact');
  await fs.mkdir(tmpDir, { recursive: true });
  progress?.start(hours.length);
  for (const hour of hours) {
    progress?.tick();
    if (hour.hourMs + 3_600_000 > options.closedBeforeMs || hour.parts.length < 2) continue;
    const files = await Promise.all(hour.parts.map((p) => rt.cache.localFile(p)));
    const out = path.join(tmpDir, `${randomUUID()}.parquet`);
    try {
      const rows = await mergeParts(rt.db, files, out);
      await rt.store.put(newPartKey(hour.hourMs), await fs.readFile(out));
      await rt.store.delete(hour.parts.map((p) => p.key));
      result.hoursCompacted += 1;
      result.partsRemoved += hour.parts.length;
      result.rows += rows;
    } finally {
      await fs.rm(out, { force: true });
    }
  }
  progress?.stop();
  return result;
}

/** An hour is closed once the worker can no longer be flushing into it. */
export function closedBefore(rt: Runtime, now = Date.now()): number {
  return now - Math.max(300, rt.config.flushIntervalSeconds * 3) * 1000;
}
