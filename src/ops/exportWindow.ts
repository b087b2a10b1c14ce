// Export: the bulk counterpart of the archive endpoint, to a file.
import fs from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { WindowQuery } from '../archive/query.js';
import type { Archive } from '../archive/window.js';
import { plainPieces, renderArchive, separatorOf, shapeOf } from '../http/archiveBody.js';
import { fsyncDir, fsyncFile, pipeToFile } from '../shared/files.js';
import { isRunning } from '../shared/processes.js';
import type { Progress } from './progress.js';

export type ExportFormat = 'parquet' | 'csv' | 'geojson';

/** What an export uses: the archive reader. */
export interface ExportDeps {
  archive: Pick<Archive, 'open'>;
}

/**
 * Writes the window to `out`; `progress` counts its UTC days (a Parquet file is one step). The
 * file is written beside `out` and renamed into place once whole: an export that fails or is
 * killed leaves no file under that name that looks done (a cut CSV reads as a shorter one).
 */
export async function exportWindow(rt: ExportDeps, query: WindowQuery, format: ExportFormat, out: string, progress?: Progress, onPlaced?: () => void): Promise<{ bytes: number }> {
  const window = await rt.archive.open(query);
  await removeAbandoned(out);
  const partial = partialOf(out);
  try {
    if (format === 'parquet') {
      progress?.start(1);
      // Its pieces on the disk of `out`, in a folder of this export's own.
      await window.writeParquet(partial, workDirOf(out));
      // Gone before the rename: a stopped export's working folder says it never took the name.
      await fs.rm(workDirOf(out), { recursive: true, force: true });
      progress?.tick();
    } else {
      progress?.start(window.days.length);
      // A plain FeatureCollection for GIS tools (no API envelope); CSV with a header.
      const text = format === 'csv' ? 'csv' : 'featurecollection';
      await pipeToFile(partial, Readable.from(plainPieces(renderArchive(ticking(window.batches(shapeOf(text), separatorOf(text)), progress), text))));
    }
    // On disk before it takes the name, and the name after: an export the command called done
    // is whole after a power cut too.
    await fsyncFile(partial);
    await fs.rename(partial, out);
    onPlaced?.();
    await fsyncDir(path.dirname(path.resolve(out)));
  } finally {
    await fs.rm(partial, { force: true });
    await fs.rm(workDirOf(out), { recursive: true, force: true });
  }
  progress?.stop();
  return { bytes: (await fs.stat(out)).size };
}

/** A file name's longest, in bytes (ext4, XFS, APFS, NTFS alike), and the longest suffix an export adds to its out's. */
const NAME_MAX = 255;
const SUFFIX_MAX = Buffer.byteLength('.partial-4294967295.d');

/** The name of `out`, cut (at a character) so the names of its partial and working folder fit NAME_MAX. */
function partialBase(out: string): string {
  let base = '';
  for (const ch of path.basename(out)) {
    if (Buffer.byteLength(base + ch) > NAME_MAX - SUFFIX_MAX) break;
    base += ch;
  }
  return base;
}

/** Where an export to `out` is written until it is whole (beside it, this process's own). */
export function partialOf(out: string): string {
  return path.join(path.dirname(out), `${partialBase(out)}.partial-${process.pid}`);
}

/** Where a Parquet export to `out` writes its pieces until they are spliced (beside it, this process's own). */
export function workDirOf(out: string): string {
  return `${partialOf(out)}.d`;
}

/**
 * Removes the partial files (and working folders) beside `out` of exports no longer running on
 * this machine (killed before they could clean up: SIGKILL, a power cut). A running export's are kept.
 */
async function removeAbandoned(out: string): Promise<void> {
  const prefix = `${partialBase(out)}.partial-`;
  const names = await fs.readdir(path.dirname(out)).catch(() => []);
  for (const name of names) {
    const pid = name.startsWith(prefix) ? Number(name.slice(prefix.length).replace(/\.d$/, '')) : NaN;
    if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && !isRunning(pid)) await fs.rm(path.join(path.dirname(out), name), { recursive: true, force: true });
  }
}

/** The batches (a UTC day each), a tick as each is taken. */
async function* ticking<T>(batches: AsyncIterable<T>, progress: Progress | undefined): AsyncIterable<T> {
  for await (const batch of batches) {
    yield batch;
    progress?.tick();
  }
}
