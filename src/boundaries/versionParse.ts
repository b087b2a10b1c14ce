// A stored boundary version made ready to serve, as far as plain data goes: its JSON parsed, its
// levels made compact, its place names listed, and its /cities bodies written. For the national
// set this is about a second of work (parsing 27 MB of JSON, flattening 41,096 barangays, the
// TopoJSON of 1,642 cities), so a large version is parsed on a thread of its own
// (versionThread.ts) and the event loop keeps serving meanwhile; what comes back is data a
// structured clone carries (typed arrays, strings, plain objects).
import { Worker } from 'node:worker_threads';
import { gunzipSync } from 'node:zlib';
import { topology } from 'topojson-server';
import { workerScript } from '../shared/workerScript.js';
import { compactLevels, type CompactLevels } from './compactLevels.js';
import { placesOf, type Place } from './placeNames.js';
import type { BoundarySet } from './types.js';

/** Quantization of the /cities TopoJSON: about a metre over the Philippines' extent. */
const CITIES_QUANTIZATION = 1e5;

/**
 * A stored version at least this large (its bytes as stored) is parsed on a thread: the
 * two-city default (some 150 KB gzipped) takes a few tens of milliseconds where it is, less
 * than a thread's start.
 */
export const PARSE_ON_THREAD_FROM_BYTES = 1024 * 1024;

export interface ParsedVersion {
  label: string;
  attribution: string | undefined;
  levels: CompactLevels;
  places: Place[];
  citiesGeoJson: string;
  citiesTopoJson: string;
}

/** What the thread is given: the stored bytes, and whether they are gzipped. */
export interface StoredVersion {
  body: Uint8Array;
  gzipped: boolean;
}

/** Parses a stored version here, on the calling thread. */
export function parseVersion({ body, gzipped }: StoredVersion): ParsedVersion {
  const bytes = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const set = JSON.parse((gzipped ? gunzipSync(bytes) : bytes).toString('utf8')) as BoundarySet;
  const cities = set.cities.features.map((f) => ({
    type: 'Feature' as const,
    geometry: f.geometry,
    properties: { code: f.properties.code, name: f.properties.name },
  }));
  const collection = { type: 'FeatureCollection' as const, features: cities };
  return {
    label: set.label,
    attribution: set.attribution,
    // The parsed set is let go once these are made: only the compact levels stay (compactLevels.ts).
    levels: compactLevels(set),
    places: placesOf(set),
    citiesGeoJson: JSON.stringify({ statusCode: 200, result: collection }),
    citiesTopoJson: JSON.stringify({ statusCode: 200, result: topology({ output: collection }, CITIES_QUANTIZATION) }),
  };
}

/**
 * The parse threads' turn: one at a time in a process, as parsing in place was. Each has a heap of
 * its own (several hundred MB while it parses the national set), and a process asked for several
 * versions at once (`cities list`, publishes in quick succession) ran out of memory.
 */
let parsing: Promise<unknown> = Promise.resolve();

/** Parses a stored version on a thread of its own, which ends with it; a version that does not parse fails with the thread's error. */
function parseVersionOnThread(stored: StoredVersion): Promise<ParsedVersion> {
  const parsed = parsing.then(() => parseOnNewThread(stored));
  parsing = parsed.catch(() => undefined);
  return parsed;
}

function parseOnNewThread(stored: StoredVersion): Promise<ParsedVersion> {
  return new Promise((resolve, reject) => {
    const thread = new Worker(workerScript('boundaries/versionThread'), { workerData: stored });
    thread.once('message', resolve);
    thread.once('error', reject);
    // After its message or its error this rejection comes second, and does nothing.
    thread.once('exit', (code) => reject(new Error(`the boundary version's parsing thread ended without it (exit code ${code})`)));
  });
}

/** Parses a stored version where it costs the event loop least: a large one on a thread. */
export async function parseStoredVersion(stored: StoredVersion, onThreadFromBytes = PARSE_ON_THREAD_FROM_BYTES): Promise<ParsedVersion> {
  return stored.body.byteLength >= onThreadFromBytes ? parseVersionOnThread(stored) : parseVersion(stored);
}
