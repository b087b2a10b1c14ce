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
export async function exportWindow(rt: ExportDeps, query: WindowQuery, format: ExportFormat, out: string, progress?: Progress): Promise<{ bytes: number }> {
  const window = await rt.archive.open(query);
  await removeAbandoned(out);
  const partial = partialOf(out);
  try {
    if (format === 'parquet') {
      progress?.start(1);
      await window.writeParquet(partial);
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
    await fsyncDir(path.dirname(path.resolve(out)));
  } finally {
    await fs.rm(partial, { force: true });
  }
  progress?.stop();
  return { bytes: (await fs.stat(out)).size };
}

/** Where an export to `out` is written until it is whole (beside it, this process's own). */
export function partialOf(out: string): string {
  return `${out}.partial-${process.pid}`;
}

/**
 * Removes the partial files beside `out` of exports no longer running on this machine (killed
 * before they could clean up: SIGKILL, a power cut). A running export's file is kept.
 */
async function removeAbandoned(out: string): Promise<void> {
  const prefix = `${path.basename(out)}.partial-`;
  const names = await fs.readdir(path.dirname(out)).catch(() => []);
  for (const name of names) {
    const pid = name.startsWith(prefix) ? Number(name.slice(prefix.length)) : NaN;
    if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && !isRunning(pid)) await fs.rm(path.join(path.dirname(out), name), { force: true });
  }
}

/** The batches (a UTC day each), a tick as each is taken. */
async function* ticking<T>(batches: AsyncIterable<T>, progress: Progress | undefined): AsyncIterable<T> {
  for await (const batch of batches) {
    yield batch;
    progress?.tick();
  }
}
