// Links of OGC API – Features (in bodies and as RFC 8288 Link headers).
import type { Response } from 'express';

export interface Link {
  href: string;
  rel: string;
  type?: string;
  title?: string;
}

export const GEOJSON = 'application/geo+json';
export const JSON_TYPE = 'application/json';
export const OPENAPI_30 = 'application/vnd.oai.openapi+json;version=3.0';

/** The absolute base of the OGC API, from the configured public base (never the request's Host). */
export function ogcBase(publicBase: string): string {
  return `${publicBase}/ogc`;
}

/** A query string from parameters, `+` never used for spaces (RFC 3986, as the archive's links). */
export function queryString(params: Record<string, string | undefined>): string {
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) search.set(k, v);
  const text = search.toString().replace(/\+/g, '%20');
  return text ? `?${text}` : '';
}

/** Puts the navigation links (self, next, prev, alternate) in the Link header too. */
export function setLinkHeader(res: Response, links: readonly Link[]): void {
  const header = links
    .filter((l) => ['self', 'next', 'prev', 'alternate', 'collection'].includes(l.rel))
    .map((l) => `<${l.href}>; rel="${l.rel}"${l.type ? `; type="${l.type}"` : ''}`)
    .join(', ');
  if (header) res.set('Link', header);
}
