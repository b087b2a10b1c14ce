// `version=`: a request answered from the boundary version a map began with (the id GET
// /cities/levels gives), so its parts (levels, outlines, barangays, the areas admin= and by= name)
// all come from one version across a publish.
import type { BoundaryRepository, LoadedBoundaries } from '../boundaries/repository.js';
import { HttpError, type ErrorDetail } from '../shared/errors.js';
import type { QueryValues } from './query.js';

/** A boundary version's id as the service makes them (BoundaryRepository.versionId). */
const VERSION_ID = /^[0-9a-f]{24}$/;

/** The `version` asked for, or a problem if it is no version id; undefined: the current version. */
export function readVersion(values: QueryValues, details: ErrorDetail[]): string | undefined {
  if (values.version === undefined || VERSION_ID.test(values.version)) return values.version;
  details.push({ in: 'query', field: 'version', message: 'must be a boundary version id (24 hexadecimal digits), as GET /cities/levels gives it' });
  return undefined;
}

/**
 * The version a request is answered from: the current one, or the one it names while the service
 * still serves it (BoundaryRepository.pinned: published now or just before, whichever process
 * answers, or kept loaded by this one); any other version is a 410 naming the current one.
 */
export async function boundariesAt(boundaries: BoundaryRepository, version: string | undefined): Promise<LoadedBoundaries> {
  const current = await boundaries.current();
  if (version === undefined || version === current.version) return current;
  const pinned = await boundaries.pinned(version);
  if (pinned) return pinned;
  throw new HttpError(410, `Boundary version ${version} is not served any more; the current one is ${current.version} (GET /cities/levels).`, [
    { in: 'query', field: 'version', message: 'is not a boundary version this service still serves' },
  ]);
}

/** The version a message speaks of: the one named, else the current one. */
export function versionWords(version: string | undefined): string {
  return version === undefined ? 'the current boundary version' : `boundary version ${version}`;
}
