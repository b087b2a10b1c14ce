// GET /cities: the current boundary version's cities, as TopoJSON (default) or GeoJSON.
import { Router } from 'express';
import type { BoundaryRepository } from '../boundaries/repository.js';
import { oneOf, readQuery, throwIfAny } from './query.js';

export function citiesRouter(deps: { boundaries: BoundaryRepository }): Router {
  const router = Router();
  router.get('/cities', async (req, res) => {
    const { values, details } = readQuery(req, ['format', 'geoformat']);
    oneOf(values, 'format', ['json'], 'json', details);
    const geoformat = oneOf(values, 'geoformat', ['topojson', 'geojson'], 'topojson', details);
    throwIfAny(details);
    const current = await deps.boundaries.current();
    // Strong ETag: the content hash of the version plus the representation.
    const etag = `"${current.version}-${geoformat}"`;
    res.set({ ETag: etag, 'Cache-Control': 'public, max-age=60', Vary: 'Accept-Encoding' });
    if (ifNoneMatch(req.get('if-none-match'), etag)) {
      res.status(304).end();
      return;
    }
    res.type('application/json').send(geoformat === 'geojson' ? current.citiesGeoJson : current.citiesTopoJson);
  });
  return router;
}

export function ifNoneMatch(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  if (header.trim() === '*') return true;
  return header.split(',').some((tag) => tag.trim().replace(/^W\//, '') === etag);
}
