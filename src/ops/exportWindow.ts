// Export: the bulk counterpart of the archive endpoint, to a file.
import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ArchiveQuery } from '../archive/reader.js';
import { renderArchive, separatorOf, shapeOf } from '../archive/reader.js';
import type { Runtime } from '../runtime.js';

export type ExportFormat = 'parquet' | 'csv' | 'geojson';

export async function exportWindow(rt: Runtime, query: ArchiveQuery, format: ExportFormat, out: string): Promise<{ bytes: number }> {
  if (format === 'parquet') {
    await rt.archive.writeParquet(query, out);
  } else {
    // A plain FeatureCollection for GIS tools (no API envelope); CSV with a header.
    const text = format === 'csv' ? 'csv' : 'featurecollection';
    await pipeline(Readable.from(renderArchive(rt.archive.batches(query, shapeOf(text), undefined, separatorOf(text)), text)), createWriteStream(out));
  }
  return { bytes: (await fs.stat(out)).size };
}
