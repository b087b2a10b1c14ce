// A compare-and-swap of one file among the processes sharing a directory (`all` beside a CLI job
// on the embedded default). A rename replaces whatever is there, so the check before it and the
// rename must not let another process's check and rename come between them: both run while this
// process holds `<file><mark>`, a file created exclusively (O_EXCL). The hold is a few synchronous
// calls, microseconds; one left behind by a process killed inside them is taken over once it is
// older than STALE_MS (its temporary name keeps it out of listings, and the sweep of leftovers
// removes any still there later).
import { closeSync, openSync, statSync, unlinkSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { isCode, unlinkQuietly } from '../shared/files.js';

/** Older than this, a mutex file belongs to no live holder: its hold is synchronous, microseconds. */
const STALE_MS = 10_000;

/**
 * Runs `critical` (synchronous) while no other process runs one for `file`. Throws ENOENT when
 * the file's folder is gone (its key deleted): there is nothing to compare with.
 */
export async function whileHeldAmongProcesses<T>(file: string, mark: string, critical: () => T): Promise<T> {
  const mutex = `${file}${mark}`;
  for (let waitMs = 1; ; waitMs = Math.min(waitMs * 2, 16)) {
    let fd: number;
    try {
      fd = openSync(mutex, 'wx');
    } catch (err) {
      if (!isCode(err, 'EEXIST')) throw err;
      removeIfStale(mutex);
      await sleep(waitMs);
      continue;
    }
    closeSync(fd);
    try {
      return critical();
    } finally {
      unlinkQuietly(mutex);
    }
  }
}

function removeIfStale(mutex: string): void {
  try {
    if (Date.now() - statSync(mutex).mtimeMs > STALE_MS) unlinkSync(mutex);
  } catch {
    // Let go meanwhile: the next try takes it.
  }
}

