// A boundary set read from a folder of GeoJSON files, laid out as PSA/NAMRIA extracts are:
// `cities.geojson` and `local-areas.geojson` (required), `regions.geojson` and
// `provinces.geojson` (the hierarchy above the cities, optional). Each file is one
// FeatureCollection; other files (PROVENANCE.md, index CSVs) are left alone.
import fs from 'node:fs/promises';
import path from 'node:path';
import type { BoundarySet } from './types.js';

export const BOUNDARY_FILES = { regions: 'regions.geojson', provinces: 'provinces.geojson', cities: 'cities.geojson', localAreas: 'local-areas.geojson' } as const;

async function readJson(file: string): Promise<unknown> {
  const text = await fs.readFile(file, 'utf8');
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new Error(`${file} is not JSON: ${(err as Error).message}`, { cause: err });
  }
}

async function readOptional(file: string): Promise<unknown> {
  try {
    return await readJson(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** The set in `dir`; what it holds is checked by `boundaryProblems` when it is published. */
export async function readBoundaryFolder(dir: string, meta: { label: string; attribution?: string | undefined }): Promise<BoundarySet> {
  const [regions, provinces, cities, localAreas] = await Promise.all([
    readOptional(path.join(dir, BOUNDARY_FILES.regions)),
    readOptional(path.join(dir, BOUNDARY_FILES.provinces)),
    readJson(path.join(dir, BOUNDARY_FILES.cities)),
    readJson(path.join(dir, BOUNDARY_FILES.localAreas)),
  ]);
  return {
    label: meta.label,
    ...(meta.attribution !== undefined && { attribution: meta.attribution }),
    ...(regions !== undefined && { regions }),
    ...(provinces !== undefined && { provinces }),
    cities,
    localAreas,
  } as BoundarySet;
}
