// Export: the bulk counterpart of the archive endpoint, to a file.
import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { WindowQuery } from '../archive/query.js';
import type { Archive } from '../archive/window.js';
import { renderArchive, separatorOf, shapeOf } from '../http/archiveBody.js';

export type ExportFormat = 'parquet' | 'csv' | 'geojson';

/** What an export uses: the archive reader. */
export interface ExportDeps {
  archive: Pick<Archive, 'open'>;
}

export async function exportWindow(rt: ExportDeps, query: WindowQuery, format: ExportFormat, out: string): Promise<{ bytes: number }> {
  const window = await rt.archive.open(query);
  if (format === 'parquet') {
    await window.writeParquet(out);
  } else {
    // A plain FeatureCollection for GIS tools (no API envelope); CSV with a header.
    const text = format === 'csv' ? 'csv' : 'featurecollection';
    await pipeline(Readable.from(renderArchive(window.batches(shapeOf(text), separatorOf(text)), text)), createWriteStream(out));
  }
  return { bytes: (await fs.stat(out)).size };
}
