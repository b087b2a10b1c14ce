// GET /cities: the current boundary version's cities, as TopoJSON (default) or GeoJSON.
import { Router } from 'express';
import type { BoundaryRepository, LoadedBoundaries } from '../boundaries/repository.js';
import { applyEncoding, encodeSync, ifNoneMatch, negotiateEncoding, type Encoding } from './encoding.js';
import { oneOf, readQuery, throwIfAny } from './query.js';

export function citiesRouter(deps: { boundaries: BoundaryRepository }): Router {
  const router = Router();
  // Bodies are immutable per version: compress each once, keep the current version's.
  let cache: { version: string; bodies: Map<string, Buffer> } | undefined;
  const body = (current: LoadedBoundaries, geoformat: string, encoding: Encoding): Buffer => {
    if (cache?.version !== current.version) cache = { version: current.version, bodies: new Map() };
    const key = `${geoformat}/${encoding}`;
    let buf = cache.bodies.get(key);
    if (!buf) {
      buf = encodeSync(geoformat === 'geojson' ? current.citiesGeoJson : current.citiesTopoJson, encoding);
      cache.bodies.set(key, buf);
    }
    return buf;
  };

  router.get('/cities', async (req, res) => {
    const { values, details } = readQuery(req, ['format', 'geoformat']);
    oneOf(values, 'format', ['json'], 'json', details);
    const geoformat = oneOf(values, 'geoformat', ['topojson', 'geojson'], 'topojson', details);
    throwIfAny(details);
    const current = await deps.boundaries.current();
    const encoding = negotiateEncoding(req, true);
    // Strong ETag: the version's content hash, the representation and its encoding.
    const etag = `"${current.version}-${geoformat}${applyEncoding(res, encoding)}"`;
    res.set({ ETag: etag, 'Cache-Control': 'public, max-age=300' });
    if (ifNoneMatch(req.get('if-none-match'), etag)) {
      res.status(304).end();
      return;
    }
    res.type('application/json').send(body(current, geoformat, encoding));
  });
  return router;
}
