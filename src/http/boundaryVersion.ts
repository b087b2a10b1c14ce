// `version=`: a request answered from the boundary version a map began with (the id GET
// /cities/levels gives), so its parts (levels, outlines, barangays, the areas admin= and by=
// name) all come from one version across a publish.
import type { BoundaryRepository, LoadedBoundaries } from '../boundaries/repository.js';
import { HttpError, type ErrorDetail } from '../shared/errors.js';
import { throwIfAny, type QueryValues } from './query.js';

/** A boundary version's id as the service makes them (BoundaryRepository.versionId). */
export const VERSION_ID = /^[0-9a-f]{24}$/;

/** How a version not served is said (a made-up id cannot be told from one published long ago). */
const NOT_SERVED = 'is not a boundary version this service serves (unknown, or no longer served)';

/** The `version` asked for, or a problem if it is no version id; undefined: the current version. */
export function readVersion(values: QueryValues, details: ErrorDetail[]): string | undefined {
  if (values.version === undefined || VERSION_ID.test(values.version)) return values.version;
  details.push({ in: 'query', field: 'version', message: 'must be a boundary version id (24 hexadecimal digits), as GET /cities/levels gives it' });
  return undefined;
}

/**
 * The version a request is answered from: the current one, or the one it names while the service
 * still serves it (BoundaryRepository.pinned: published now or just before, whichever process
 * answers, or kept loaded by this one). Any other version: undefined, and its problem among
 * `details` (throwIfProblems makes it a 410 when it is the only one).
 */
export async function servedBoundaries(boundaries: BoundaryRepository, version: string | undefined, details: ErrorDetail[]): Promise<LoadedBoundaries | undefined> {
  const current = await boundaries.current();
  if (version === undefined || version === current.version) return current;
  const pinned = await boundaries.pinned(version);
  if (pinned) return pinned;
  details.push({ in: 'query', field: 'version', message: `${NOT_SERVED}; the current one is ${current.version}` });
  return undefined;
}

/**
 * Every problem of a request as one 400, but a 410 when the only one is a version not served:
 * the client's query is right, its map is older than what the service keeps.
 */
export function throwIfProblems(details: ErrorDetail[]): void {
  if (details.length === 1 && details[0]!.field === 'version' && details[0]!.message.startsWith(NOT_SERVED)) {
    throw new HttpError(410, 'The boundary version asked for is unknown or no longer served: GET /cities/levels gives the current one.', details);
  }
  throwIfAny(details);
}

/** The version a message speaks of: the one named, else the current one. */
export function versionWords(version: string | undefined): string {
  return version === undefined ? 'the current boundary version' : `boundary version ${version}`;
}
