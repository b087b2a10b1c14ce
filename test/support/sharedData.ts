// Reads the PSA/NAMRIA boundaries that sit beside the project (never copied into it).
import fs from 'node:fs/promises';
import path from 'node:path';
import type { BoundarySet } from '../../src/boundaries/types.js';
import { SHARED_PH } from './env.js';

export async function loadPsaBoundaries(): Promise<BoundarySet> {
  const [cities, localAreas] = await Promise.all(
    ['cities.geojson', 'local-areas.geojson'].map(async (f) => JSON.parse(await fs.readFile(path.join(SHARED_PH, f), 'utf8'))),
  );
  return { label: 'PSA/NAMRIA 2023 via OCHA HDX (test data)', cities, localAreas };
}
