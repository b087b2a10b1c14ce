// Reads the PSA/NAMRIA boundaries that sit beside the project: the two-city set (the same data
// the project ships as its default) and the whole country (never copied into the project).
import fs from 'node:fs/promises';
import path from 'node:path';
import { readBoundaryFolder } from '../../src/boundaries/folder.js';
import type { BoundarySet } from '../../src/boundaries/types.js';
import { SHARED_PH, SHARED_PH_NATIONAL } from './env.js';

export async function loadPsaBoundaries(): Promise<BoundarySet> {
  const [cities, localAreas] = await Promise.all(
    ['cities.geojson', 'local-areas.geojson'].map(async (f) => JSON.parse(await fs.readFile(path.join(SHARED_PH, f), 'utf8'))),
  );
  return { label: 'PSA/NAMRIA 2023 via OCHA HDX (test data)', cities, localAreas };
}

let national: Promise<BoundarySet> | undefined;

/** The national set: 17 regions, 88 provinces, 1,642 cities and municipalities, 41,096 barangays (read once per test file). */
export function loadNationalBoundaries(): Promise<BoundarySet> {
  national ??= readBoundaryFolder(SHARED_PH_NATIONAL, { label: 'PSA/NAMRIA 2023, the whole Philippines (test data)' });
  return national;
}
