// A boundary set read from a folder of GeoJSON files, laid out as PSA/NAMRIA extracts are:
// `cities.geojson` and `local-areas.geojson` (required), `regions.geojson` and
// `provinces.geojson` (the hierarchy above the cities, optional). Each file is one
// FeatureCollection; other files (PROVENANCE.md, index CSVs) are left alone.
import fs from 'node:fs/promises';
import path from 'node:path';
import type { BoundarySet } from './types.js';

export const BOUNDARY_FILES = { regions: 'regions.geojson', provinces: 'provinces.geojson', cities: 'cities.geojson', localAreas: 'local-areas.geojson' } as const;

/** A boundary file that cannot be read as JSON: missing, a folder, not JSON (the operator's to fix). */
export class BoundaryFileError extends Error {
  override name = 'BoundaryFileError';
}

/** One GeoJSON file of a boundary set, parsed; what it holds is checked when it is published. */
export async function readBoundaryFile(file: string): Promise<unknown> {
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'a folder, not a GeoJSON file' : code === 'ENOTDIR' ? `${path.dirname(file)} is no folder` : `cannot be read (${code ?? (err as Error).message})`;
    throw new BoundaryFileError(`${file}: ${why}`, { cause: err });
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new BoundaryFileError(`${file} is not JSON: ${(err as Error).message}`, { cause: err });
  }
}

async function readOptional(file: string): Promise<unknown> {
  try {
    return await readBoundaryFile(file);
  } catch (err) {
    if (((err as Error).cause as NodeJS.ErrnoException | undefined)?.code === 'ENOENT') return undefined;
    throw err;
  }
}

/** The set in `dir`; what it holds is checked by `boundaryProblems` when it is published. */
export async function readBoundaryFolder(dir: string, meta: { label: string; attribution?: string | undefined }): Promise<BoundarySet> {
  // Every file is read before any failure is told, so the operator hears of all that are missing at once.
  const settled = await Promise.allSettled([
    readOptional(path.join(dir, BOUNDARY_FILES.regions)),
    readOptional(path.join(dir, BOUNDARY_FILES.provinces)),
    readBoundaryFile(path.join(dir, BOUNDARY_FILES.cities)),
    readBoundaryFile(path.join(dir, BOUNDARY_FILES.localAreas)),
  ]);
  const failed = settled.flatMap((s) => (s.status === 'rejected' ? [s.reason as Error] : []));
  if (failed.length === 1) throw failed[0]!;
  if (failed.length > 1) throw new BoundaryFileError(failed.map((e) => e.message).join('; '), { cause: failed[0] });
  const [regions, provinces, cities, localAreas] = settled.map((s) => (s as PromiseFulfilledResult<unknown>).value);
  return {
    label: meta.label,
    ...(meta.attribution !== undefined && { attribution: meta.attribution }),
    ...(regions !== undefined && { regions }),
    ...(provinces !== undefined && { provinces }),
    cities,
    localAreas,
  } as BoundarySet;
}
