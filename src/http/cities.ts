// GET /cities: the current boundary version's cities, as TopoJSON (default) or GeoJSON;
// GET /cities/{code}/local-areas: that city's barangays in the same version; GET /cities/levels and
// /cities/outlines?level=: the version's levels, and each simplified for a map (outlines.ts).
import type { Request, Response } from 'express';
import { topology } from 'topojson-server';
import { geometryOf } from '../boundaries/compactLevels.js';
import { OUTLINE_LEVELS, outlineLevels, outlinesOf, type OutlineLevel } from '../boundaries/outlines.js';
import type { BoundaryRepository, LoadedBoundaries } from '../boundaries/repository.js';
import { HttpError, type ErrorDetail } from '../shared/errors.js';
import { VERSION_TAG } from '../shared/version.js';
import { readVersion, servedBoundaries, throwIfProblems, versionWords } from './boundaryVersion.js';
import { applyEncoding, encodeOnce, ifNoneMatch, negotiateEncoding, answerNotModified, type Encoding } from './encoding.js';
import { oneOf, readQuery, type QueryValues } from './query.js';
import { handlerSet, type Handlers } from './route.js';

/** Quantization of the local areas' TopoJSON: about a metre over a province's extent. */
const LOCAL_AREAS_QUANTIZATION = 1e5;

export function citiesHandlers(deps: { boundaries: BoundaryRepository }): Handlers {
  const { handlers, serve } = handlerSet<'getCities' | 'getLocalAreas' | 'getLevels' | 'getOutlines'>();
  // Bodies are immutable per version: build and compress each once, kept as long as the
  // repository keeps the version loaded. A body is built once per version whatever the encodings
  // it is then asked in.
  const caches = new WeakMap<LoadedBoundaries, { texts: Map<string, string>; bodies: Map<string, Promise<Buffer>> }>();
  /** Each body encoded once per version, by the first request for it (the others wait for it). */
  const body = (current: LoadedBoundaries, key: string, build: () => string, encoding: Encoding): Promise<Buffer> => {
    let cache = caches.get(current);
    if (!cache) caches.set(current, (cache = { texts: new Map(), bodies: new Map() }));
    const { texts, bodies } = cache;
    const id = `${key}/${encoding}`;
    let buf = bodies.get(id);
    if (!buf) {
      let text = texts.get(key);
      if (text === undefined) texts.set(key, (text = build()));
      bodies.set(id, (buf = encodeOnce(text, encoding)));
      // A failure is the asking request's; the next one tries again.
      buf.catch(() => bodies.delete(id));
    }
    return buf;
  };

  /**
   * Strong ETag from the boundary version's content hash, the service's release (which may
   * render the same boundaries otherwise), the representation and its encoding; 304 when it matches.
   */
  const sendVersioned = async (req: Request, res: Response, current: LoadedBoundaries, key: string, build: () => string) => {
    const encoding = negotiateEncoding(req, true);
    const etag = `"${current.version}-${VERSION_TAG}-${key.replace(/[^A-Za-z0-9-]/g, '-')}${applyEncoding(res, encoding)}"`;
    res.set({ ETag: etag, 'Cache-Control': 'public, max-age=300' });
    if (ifNoneMatch(req.get('if-none-match'), etag)) {
      answerNotModified(res);
      return;
    }
    res.type('application/json').send(await body(current, key, build, encoding));
  };

  /** The version asked for (version=, else the current one); every problem of the query said first. */
  const boundariesOf = async (values: QueryValues, details: ErrorDetail[]): Promise<LoadedBoundaries> => {
    const served = await servedBoundaries(deps.boundaries, readVersion(values, details), details);
    throwIfProblems(details);
    return served!;
  };

  serve('getCities', async (req, res) => {
    const { values, details } = readQuery(req, ['format', 'geoformat', 'version']);
    oneOf(values, 'format', ['json'], 'json', details);
    const geoformat = oneOf(values, 'geoformat', ['topojson', 'geojson'], 'topojson', details);
    const current = await boundariesOf(values, details);
    await sendVersioned(req, res, current, geoformat, () => (geoformat === 'geojson' ? current.citiesGeoJson : current.citiesTopoJson));
  });

  serve('getLocalAreas', async (req, res) => {
    const { values, details } = readQuery(req, ['geoformat', 'version']);
    const geoformat = oneOf(values, 'geoformat', ['topojson', 'geojson'], 'topojson', details);
    const current = await boundariesOf(values, details);
    const code = String(req.params.code);
    const area = current.adminAreas.get(code);
    if (area?.level !== 'city') {
      const message = area
        ? `${code} is a ${area.level} (${area.name}); this path takes the code of one of its cities, e.g. ${area.cities.slice(0, 3).join(', ')} (GET /cities lists them)`
        : `No city ${JSON.stringify(code.slice(0, 40))} in ${versionWords(values.version)}: the city ${current.adminAreas.problem(code, values.version && versionWords(values.version)).replace(/^must be /, 'code must be ')}`;
      throw new HttpError(404, `${message}.`, [{ in: 'path', field: 'code', message: area ? `is a ${area.level}, not a city` : `is no city of ${values.version === undefined ? 'the current boundaries' : versionWords(values.version)}` }]);
    }
    await sendVersioned(req, res, current, `${code}-local-areas-${geoformat}`, () => {
      const collection = {
        type: 'FeatureCollection' as const,
        features: current.levels.localAreas.properties.flatMap((p, i) =>
          p.city_code === code ? [{ type: 'Feature' as const, geometry: geometryOf(current.levels.localAreas, i), properties: { psgc: p.psgc, name: p.name, city_code: code } }] : [],
        ),
      };
      const result = geoformat === 'geojson' ? collection : topology({ output: collection }, LOCAL_AREAS_QUANTIZATION);
      return JSON.stringify({ statusCode: 200, result });
    });
  });
  serve('getLevels', async (req, res) => {
    const { values, details } = readQuery(req, ['version']);
    const current = await boundariesOf(values, details);
    await sendVersioned(req, res, current, 'levels', () => JSON.stringify({ statusCode: 200, result: { version: current.version, label: current.label, attribution: current.attribution ?? null, levels: outlineLevels(current.levels) } }));
  });

  serve('getOutlines', async (req, res) => {
    const { values, details } = readQuery(req, ['level', 'version']);
    const level = oneOf(values, 'level', OUTLINE_LEVELS, 'city', details) as OutlineLevel;
    const version = readVersion(values, details);
    // A malformed version names no levels to check `level` against.
    const current = values.version !== undefined && version === undefined ? undefined : await servedBoundaries(deps.boundaries, version, details);
    if (current && values.level !== undefined && !outlineLevels(current.levels).some((l) => l.level === level)) {
      details.push({ in: 'query', field: 'level', message: `${versionWords(version)} has no ${level} level; GET /cities/levels lists the levels it has` });
    }
    throwIfProblems(details);
    await sendVersioned(req, res, current!, `outlines-${level}`, () => JSON.stringify({ statusCode: 200, result: outlinesOf(current!.levels, level) }));
  });
  return handlers;
}

