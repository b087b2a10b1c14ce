// Files a killed process leaves behind: the file store's temporary files (`<key>.tmp-<random>`,
// written then renamed into place, and the pins of what its answers were reading) and the
// worker's Parquet files in the making under DATA_DIR/tmp. Nothing reads them; swept once they are older than any write in progress
// could be, so a second process on the same directory never loses a file it is writing.
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Config } from '../shared/config.js';
import type { Logger } from '../shared/log.js';
import { isPinName, isTemporaryName } from './fileStore.js';

/** Older than this, a temporary file belongs to no live write (a write takes seconds). */
export const LEFTOVER_AGE_MS = 15 * 60_000;
/**
 * An import's working files (DATA_DIR/tmp/import/<run>/) are its checkpoint's, which a resumed
 * run reads however long after; untouched this long, the import was given up (or restarted).
 */
export const IMPORT_LEFTOVER_AGE_MS = 14 * 86_400_000;
/**
 * The ops jobs' working files (DATA_DIR/tmp/release, reprocess, compact, purge, verify/): a
 * release, a reprocess or a verify keeps what it wrote first until its end, hours into a run of
 * years on S3; a day untouched, the run is gone.
 */
export const JOB_LEFTOVER_AGE_MS = 86_400_000;
/** The folders under DATA_DIR/tmp that JOB_LEFTOVER_AGE_MS applies to. */
const JOB_FOLDERS = ['release', 'reprocess', 'compact', 'purge', 'verify'];
/**
 * A pin (what an answer reads, fileStore.ts) is let go with its day: one a day old belongs to no
 * live answer (a client that stalls is cut within minutes), where a quarter hour might.
 */
export const PIN_LEFTOVER_AGE_MS = 86_400_000;

export interface SweepResult {
  removed: number;
  bytes: number;
}

/**
 * Removes, under each root, the files `ageOf` names a leftover once older than the age it
 * gives; walks the tree one directory at a time (a year of hourly partitions is some 9,000
 * directories).
 */
export async function sweepLeftovers(roots: readonly string[], ageOf: (name: string, dir: string) => number | undefined, now = Date.now()): Promise<SweepResult> {
  const result: SweepResult = { removed: 0, bytes: 0 };
  const walk = async (dir: string): Promise<void> => {
    let entries;
    try {
      entries = await fs.readdir(dir, { withFileTypes: true });
    } catch {
      return; // absent, or removed meanwhile
    }
    for (const e of entries) {
      const full = path.join(dir, e.name);
      if (e.isDirectory()) {
        await walk(full);
        continue;
      }
      const olderThanMs = ageOf(e.name, dir);
      if (olderThanMs === undefined) continue;
      const stat = await fs.stat(full).catch(() => undefined);
      // A pin (a hard link, fileStore.ts) made a moment ago to an old part carries the part's
      // time of writing: its own age is its inode's last change.
      if (!stat || now - (isPinName(e.name) ? stat.ctimeMs : stat.mtimeMs) < olderThanMs) continue;
      await fs.rm(full, { force: true });
      result.removed += 1;
      result.bytes += stat.size;
    }
  };
  for (const root of roots) await walk(root);
  return result;
}

/**
 * The store's temporary files (embedded backend) and everything stale under DATA_DIR/tmp (an
 * import's files only after IMPORT_LEFTOVER_AGE_MS, another job's after JOB_LEFTOVER_AGE_MS), and under the API's own folders of
 * TMP_DIR (never TMP_DIR itself: it may be shared, e.g. /tmp).
 */
export function sweepCrashLeftovers(config: Config, olderThanMs = LEFTOVER_AGE_MS): Promise<SweepResult> {
  const tmp = path.join(config.dataDir, 'tmp');
  const imports = path.join(tmp, 'import');
  const jobs = JOB_FOLDERS.map((name) => path.join(tmp, name));
  const own = [tmp, ...(config.tmpDir === tmp ? [] : [path.join(config.tmpDir, 'duckdb'), path.join(config.tmpDir, 'exports')])];
  const roots = [...own, ...(config.storageUrl.startsWith('file://') ? [config.storageUrl.slice('file://'.length)] : [])];
  const under = (dir: string, root: string) => dir === root || dir.startsWith(root + path.sep);
  return sweepLeftovers(roots, (name, dir) => {
    if (under(dir, imports)) return Math.max(olderThanMs, IMPORT_LEFTOVER_AGE_MS);
    if (jobs.some((j) => under(dir, j))) return Math.max(olderThanMs, JOB_LEFTOVER_AGE_MS);
    if (isPinName(name)) return Math.max(olderThanMs, PIN_LEFTOVER_AGE_MS);
    return isTemporaryName(name) || own.some((t) => under(dir, t)) ? olderThanMs : undefined;
  });
}

/** How often a running worker sweeps again, and how old a file must be then: older than any answer or write of a live process lasts. */
export const LATER_SWEEP_EVERY_MS = 3_600_000;
export const LATER_SWEEP_AGE_MS = 6 * 3_600_000;

/**
 * Sweeps now, in the background, then every `everyMs` what is older than `laterAgeMs`: a process
 * restarted at once finds a killed one's files too young to be leftovers, and would otherwise
 * keep them (DuckDB's spills, pins of retired parts) for as long as it runs. Returns how to stop.
 */
export function keepSweeping(config: Config, log: Pick<Logger, 'info' | 'warn'>, everyMs = LATER_SWEEP_EVERY_MS, laterAgeMs = LATER_SWEEP_AGE_MS): () => void {
  const sweep = (olderThanMs?: number) =>
    sweepCrashLeftovers(config, olderThanMs)
      .then((swept) => swept.removed > 0 && log.info(swept, 'removed files left by an interrupted process'))
      .catch((err: unknown) => log.warn({ err: String(err) }, 'could not sweep leftover temporary files'));
  const first = setImmediate(() => void sweep());
  const later = setInterval(() => void sweep(laterAgeMs), everyMs);
  later.unref();
  return () => {
    clearImmediate(first);
    clearInterval(later);
  };
}
