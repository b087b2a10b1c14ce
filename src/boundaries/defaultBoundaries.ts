// The boundary version a fresh store publishes: the PSA/NAMRIA 2023 outlines of Quezon City and
// Pampanga with their 680 barangays, shipped in the project's boundaries/ph-2023/ (its
// PROVENANCE.md says where they come from). Publishing the whole country replaces it.
import path from 'node:path';
import { projectDir } from '../shared/projectDir.js';
import { readBoundaryFolder } from './folder.js';
import type { BoundarySet } from './types.js';

export const DEFAULT_BOUNDARIES_DIR = path.join(projectDir(), 'boundaries', 'ph-2023');
export const DEFAULT_BOUNDARIES_LABEL = 'PSA/NAMRIA 2023: Quezon City and Pampanga, 680 barangays';
export const PSA_NAMRIA_ATTRIBUTION = 'Boundaries: PSA and NAMRIA 2023 (OCHA HDX COD-AB), via philippines-json-maps by James Faeldon (MIT)';

let loaded: Promise<BoundarySet> | undefined;

/** The default set (read once). */
export function defaultBoundaries(): Promise<BoundarySet> {
  loaded ??= readBoundaryFolder(DEFAULT_BOUNDARIES_DIR, { label: DEFAULT_BOUNDARIES_LABEL, attribution: PSA_NAMRIA_ATTRIBUTION });
  // A failed read is not kept: the next call tries again.
  loaded.catch(() => (loaded = undefined));
  return loaded;
}
