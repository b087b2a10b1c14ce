// OGC API – Features – Part 1 (Core, GeoJSON, OpenAPI 3.0) under /ogc: the
// landing page, conformance, the collections `reports` (the archive), `cities`
// and `local-areas`, their items and single items. Plain JSON and GeoJSON, no
// envelope, and no User-Agent requirement (docs/http.md: the archive endpoint
// requires one, /ogc does not; GDAL and QGIS send none or their own).
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Request, Response } from 'express';
import type { Archive } from '../../archive/window.js';
import type { BoundaryRepository } from '../../boundaries/repository.js';
import { HttpError } from '../../shared/errors.js';
import { partitionOfPartKey, REPORTS_PREFIX } from '../../store/layout.js';
import type { ObjectStore } from '../../store/objectStore.js';
import { digestOf, REVALIDATE } from '../bodyTags.js';
import { applyEncoding, encoder, ifNoneMatch, negotiateEncoding, answerNotModified } from '../encoding.js';
import { readQuery, throwIfAny } from '../query.js';
import { BoundaryItems } from './boundaryItems.js';
import { CONFORMS_TO, CRS84, GREGORIAN } from './conformance.js';
import { GEOJSON, ogcBase, JSON_TYPE, OPENAPI_30, queryString, setLinkHeader, type Link } from './links.js';
import { openApiDocument } from '../openapi.js';
import { COLLECTION_IDS, ogcOpenApi30From } from './openapi.js';
import { readBbox, readDatetime, readLimit, type Bbox } from './params.js';
import type { CursorCodec } from '../cursor.js';
import { decodeCursor, encodeCursor, fingerprintOf, ReportsItems } from './reportsItems.js';
import { handlerSet, type Handlers } from '../route.js';
import { hangUpSignal } from '../hangUp.js';
import type { Admission } from '../admission.js';
import { holdTurn } from '../answerTurn.js';

export interface OgcDeps {
  archive: Archive;
  boundaries: BoundaryRepository;
  store: ObjectStore;
  /**
   * Turns for heavy answers (admission.ts), shared with the archive's whole windows: a reports
   * page whose window is longer than `maxWindowMs` (the archive endpoint's bound; no datetime is
   * the whole archive) may read every day of it to fill a page (a bbox that matches little), and
   * takes one of these instead of a page's.
   */
  admission: Pick<Admission, 'enter'>;
  /** Turns of pages (the archive's too): each other reports page is held in memory until its client has taken it. */
  pageAdmission: Pick<Admission, 'enter'>;
  clientOf: (req: Request) => string;
  maxWindowMs: number;
  /** Signs the reports' cursors (src/http/cursor.ts): one not issued here fails before a field is read. */
  cursors: CursorCodec;
  /** The base of every link (config, never the request's Host). */
  publicBase: () => string;
  now?: () => number;
}

type CollectionId = (typeof COLLECTION_IDS)[number];

/** Every point the feed takes. */
const WORLD: Bbox = [-180, -90, 180, 90];

const TITLES: Record<CollectionId, { title: string; description: string }> = {
  reports: {
    title: 'Flood reports',
    description:
      'Every archived flood report, a Point each, newest first, a page at a time; datetime filters them by created_at.',
  },
  regions: { title: 'Regions', description: 'The regions and their boundaries, by PSGC code (current boundary version; none in the two-city default).' },
  provinces: { title: 'Provinces', description: 'The provinces (and NCR districts) and their boundaries, by PSGC code (current boundary version; none in the two-city default).' },
  cities: { title: 'Cities', description: 'The supported cities and their boundaries (current boundary version).' },
  'local-areas': { title: 'Barangays', description: 'The barangays of the supported cities, by PSGC code (current boundary version).' },
};

/** Accepted `f` values: the JSON encodings this API has (there is no HTML one). */
const F_VALUES = ['json', 'geojson'];

export function ogcHandlers(deps: OgcDeps): Handlers {
  const { handlers, serve } = handlerSet<'ogcLandingPage' | 'ogcConformance' | 'ogcApiDefinition' | 'ogcCollections' | 'ogcCollection' | 'ogcItems' | 'ogcItem'>();
  const now = deps.now ?? Date.now;
  const reports = new ReportsItems(deps.archive);
  const boundaries = new BoundaryItems(deps.boundaries);
  const firstReport = firstReportCache(deps.store);
  const document = JSON.stringify(ogcOpenApi30From(openApiDocument() as Parameters<typeof ogcOpenApi30From>[0]));

  /** Only `f` (and `extra`) may be given; `f` must name a JSON encoding. */
  const query = (req: Request, extra: string[] = []) => {
    const { values, details } = readQuery(req, ['f', ...extra]);
    if (values.f !== undefined && !F_VALUES.includes(values.f)) {
      details.push({ in: 'query', field: 'f', message: `must be one of: ${F_VALUES.join(', ')} (this API speaks JSON and GeoJSON)` });
    }
    return { values, details };
  };

  serve('ogcLandingPage', async (req, res) => {
    throwIfAny(query(req).details);
    const base = ogcBase(deps.publicBase());
    await sendJson(req, res, JSON_TYPE, {
      title: 'Flood report archive – OGC API – Features',
      description: 'Flood reports in the Philippines, their cities and barangays, as OGC API – Features (Part 1: Core, GeoJSON, OpenAPI 3.0).',
      links: [
        { href: base, rel: 'self', type: JSON_TYPE, title: 'This document' },
        { href: `${base}/api`, rel: 'service-desc', type: OPENAPI_30, title: 'The API definition (OpenAPI 3.0)' },
        { href: `${base.replace(/\/ogc$/, '')}/docs/`, rel: 'service-doc', type: 'text/html', title: 'The API documentation' },
        { href: `${base}/conformance`, rel: 'conformance', type: JSON_TYPE, title: 'Conformance classes' },
        { href: `${base}/conformance`, rel: 'http://www.opengis.net/def/rel/ogc/1.0/conformance', type: JSON_TYPE, title: 'Conformance classes' },
        { href: `${base}/collections`, rel: 'data', type: JSON_TYPE, title: 'The collections' },
        { href: `${base}/collections`, rel: 'http://www.opengis.net/def/rel/ogc/1.0/data', type: JSON_TYPE, title: 'The collections' },
      ],
    });
  });

  serve('ogcConformance', async (req, res) => {
    throwIfAny(query(req).details);
    await sendJson(req, res, JSON_TYPE, { conformsTo: CONFORMS_TO }, 'public, max-age=3600');
  });

  serve('ogcApiDefinition', (req, res) => {
    throwIfAny(query(req).details);
    res.set('Cache-Control', 'public, max-age=300').type(OPENAPI_30).send(document);
  });

  const collectionOf = async (id: CollectionId) => {
    const base = ogcBase(deps.publicBase());
    let extent: object | undefined;
    if (id === 'reports') {
      // The first box must hold every report, and the feed takes a point anywhere on Earth (one
      // outside the boundaries is kept, untagged); the second is where the tagged ones lie.
      const tagged = await boundaries.extent('cities');
      const first = await firstReport();
      extent = {
        spatial: { bbox: tagged ? [WORLD, tagged] : [WORLD], crs: CRS84 },
        temporal: { interval: [[first === undefined ? null : new Date(first).toISOString(), null]], trs: GREGORIAN },
      };
    } else {
      // Its features' extent; none for a level the published set has no features of (the two-city
      // default's regions and provinces): the extent is optional, and a made-up one misleads.
      const own = await boundaries.extent(id);
      if (own) extent = { spatial: { bbox: [own], crs: CRS84 } };
    }
    return {
      id,
      ...TITLES[id],
      itemType: 'feature',
      crs: [CRS84],
      ...(extent && { extent }),
      links: [
        { href: `${base}/collections/${id}`, rel: 'self', type: JSON_TYPE, title: 'This collection' },
        { href: `${base}/collections/${id}/items`, rel: 'items', type: GEOJSON, title: `${TITLES[id].title} as GeoJSON` },
      ],
    };
  };

  serve('ogcCollections', async (req, res) => {
    throwIfAny(query(req).details);
    const base = ogcBase(deps.publicBase());
    await sendJson(req, res, JSON_TYPE, {
      links: [{ href: `${base}/collections`, rel: 'self', type: JSON_TYPE, title: 'The collections' }],
      collections: await Promise.all(COLLECTION_IDS.map((id) => collectionOf(id))),
    });
  });

  serve('ogcCollection', async (req, res) => {
    const id = collectionId(req);
    throwIfAny(query(req).details);
    await sendJson(req, res, JSON_TYPE, await collectionOf(id));
  });

  serve('ogcItems', async (req, res) => {
    const id = collectionId(req);
    const { values, details } = query(req, ['bbox', 'datetime', 'limit', id === 'reports' ? 'cursor' : 'offset']);
    const bbox = readBbox(values.bbox, details);
    const limit = readLimit(values.limit, details);
    const interval = readDatetime(values.datetime, details, now());
    const base = `${ogcBase(deps.publicBase())}/collections/${id}/items`;
    const keep = { bbox: values.bbox, datetime: values.datetime, limit: values.limit, f: values.f };
    const links: Link[] = [{ href: `${base}${queryString({ ...keep, cursor: values.cursor, offset: values.offset })}`, rel: 'self', type: GEOJSON, title: 'This page' }];
    let features: string[];
    let numberMatched: number;
    let windowTag = '';
    if (id === 'reports') {
      const fingerprint = fingerprintOf(values.datetime, values.bbox);
      // An unsigned or altered cursor opens to '', which decodeCursor refuses as not issued here.
      const opened = values.cursor === undefined ? undefined : ((await deps.cursors.open(values.cursor)) ?? '');
      const after = opened === undefined ? undefined : decodeCursor(opened, fingerprint, details);
      throwIfAny(details);
      // A cursor's window is fixed (its end as the first page had it).
      const window = after ? { startMs: after.startMs, endMs: after.endMs, bbox } : { ...interval, bbox };
      const signal = hangUpSignal(res);
      // One turn, held to the page's end: a heavy answer's over a long window, else a page's.
      const long = window.endMs - window.startMs > deps.maxWindowMs;
      await holdTurn(long ? deps.admission : deps.pageAdmission, deps.clientOf(req), req, res, signal, long ? 'OGC reports page over a long window' : 'OGC reports page');
      const page = await reports.page(window, limit, after, now(), signal);
      features = page.features;
      numberMatched = page.numberMatched;
      windowTag = page.windowTag;
      if (page.next) links.push({ href: `${base}${queryString({ ...keep, cursor: await deps.cursors.seal(encodeCursor(page.next, fingerprint)) })}`, rel: 'next', type: GEOJSON, title: 'The next page' });
      if (page.prev) links.push({ href: `${base}${queryString({ ...keep, cursor: await deps.cursors.seal(encodeCursor(page.prev, fingerprint)) })}`, rel: 'prev', type: GEOJSON, title: 'The previous page' });
    } else {
      let offset = 0;
      if (values.offset !== undefined) {
        if (!/^\d{1,7}$/.test(values.offset)) details.push({ in: 'query', field: 'offset', message: 'must be a non-negative integer below 10,000,000 (follow the next and prev links)' });
        else offset = Number(values.offset);
      }
      throwIfAny(details);
      // Boundaries have no time: datetime is accepted and matches every one (OGC API – Features, 7.15.4).
      const page = await boundaries.page(id, bbox, limit, offset);
      features = page.features.map((f) => JSON.stringify(f));
      numberMatched = page.numberMatched;
      if (offset + limit < numberMatched) {
        links.push({ href: `${base}${queryString({ ...keep, offset: String(offset + limit) })}`, rel: 'next', type: GEOJSON, title: 'The next page' });
      }
      if (offset > 0) {
        links.push({ href: `${base}${queryString({ ...keep, offset: offset - limit > 0 ? String(offset - limit) : undefined })}`, rel: 'prev', type: GEOJSON, title: 'The previous page' });
      }
    }
    links.push({ href: `${ogcBase(deps.publicBase())}/collections/${id}`, rel: 'collection', type: JSON_TYPE, title: 'The collection' });
    setLinkHeader(res, links);
    res.set('Cache-Control', id === 'reports' ? REVALIDATE : 'public, max-age=300');
    const linksText = JSON.stringify(links);
    const head = `{"type":"FeatureCollection","numberMatched":${numberMatched},"numberReturned":${features.length},"timeStamp":"${new Date(now()).toISOString()}","links":${linksText},"features":[`;
    // Weak: the same page asked again differs only in its timeStamp and in the time its paging
    // cursors are sealed at (reports received by then), so those are left out of the tag; what the
    // whole window holds goes in, so a report archived or retracted anywhere in it gives this page
    // a new tag, and cursors that reach it.
    const paging = links.map((l) => (l.rel === 'next' || l.rel === 'prev' ? l.rel : l.href));
    await sendPieces(req, res, GEOJSON, pieces(head, features, ']}'), { weak: true, opaque: digestOf(String(numberMatched), JSON.stringify(paging), windowTag, ...features) });
  });

  serve('ogcItem', async (req, res) => {
    const id = collectionId(req);
    throwIfAny(query(req).details);
    const featureId = String(req.params.featureId);
    const found = id === 'reports' ? await reports.item(featureId) : ((f) => f && JSON.stringify(f))(await boundaries.item(id, featureId));
    if (found === undefined) {
      throw new HttpError(404, `No item ${JSON.stringify(featureId.slice(0, 100))} in the collection ${id}.`, [{ in: 'path', field: 'featureId', message: 'is not an item of this collection' }]);
    }
    const base = `${ogcBase(deps.publicBase())}/collections/${id}`;
    const links: Link[] = [
      { href: `${base}/items/${encodeURIComponent(featureId)}`, rel: 'self', type: GEOJSON, title: 'This item' },
      { href: base, rel: 'collection', type: JSON_TYPE, title: 'The collection' },
    ];
    setLinkHeader(res, links);
    res.set('Cache-Control', id === 'reports' ? REVALIDATE : 'public, max-age=300');
    // The links go in beside the feature's own members.
    const text = `${found.slice(0, -1)},"links":${JSON.stringify(links)}}`;
    await sendPieces(req, res, GEOJSON, [text], { weak: false, opaque: digestOf(text) });
  });

  return handlers;
}

function collectionId(req: Request): CollectionId {
  const id = String(req.params.collectionId);
  if (!(COLLECTION_IDS as readonly string[]).includes(id)) {
    throw new HttpError(404, `No collection ${JSON.stringify(id.slice(0, 100))}. Collections: ${COLLECTION_IDS.join(', ')}.`, [
      { in: 'path', field: 'collectionId', message: `must be one of: ${COLLECTION_IDS.join(', ')}` },
    ]);
  }
  return id as CollectionId;
}

function* pieces(head: string, items: string[], tail: string): Iterable<string> {
  yield head;
  // Joined a thousand at a time: few writes, no single string of the whole page.
  for (let i = 0; i < items.length; i += 1000) yield (i > 0 ? ',' : '') + items.slice(i, i + 1000).join(',');
  yield tail;
}

/** A document built whole: its ETag from its bytes. */
async function sendJson(req: Request, res: Response, type: string, body: unknown, cache = 'public, max-age=60'): Promise<void> {
  const text = JSON.stringify(body);
  res.set('Cache-Control', cache);
  await sendPieces(req, res, type, [text], { weak: false, opaque: digestOf(text) });
}

/**
 * Sends the pieces under the representation's tag (its encoding named in it): a 304 without them
 * when If-None-Match names it.
 */
async function sendPieces(req: Request, res: Response, type: string, body: Iterable<string>, tag: { weak: boolean; opaque: string }): Promise<void> {
  const encoding = negotiateEncoding(req, true);
  const etag = `${tag.weak ? 'W/' : ''}"${tag.opaque}${applyEncoding(res, encoding)}"`;
  res.set('ETag', etag);
  if (ifNoneMatch(req.get('if-none-match'), etag)) {
    answerNotModified(res);
    return;
  }
  res.status(200).type(type);
  const e = encoder(encoding);
  if (e) await pipeline(Readable.from(body), e, res);
  else await pipeline(Readable.from(body), res);
}

/** When the archive starts (its first part's hour), looked up at most once a minute. */
function firstReportCache(store: ObjectStore): () => Promise<number | undefined> {
  let cached: { at: number; value: number | undefined } | undefined;
  return async () => {
    if (cached && Date.now() - cached.at < 60_000) return cached.value;
    let value: number | undefined;
    for await (const info of store.list({ prefix: REPORTS_PREFIX })) {
      const partition = partitionOfPartKey(info.key);
      if (partition) {
        value = partition.startMs;
        break;
      }
    }
    cached = { at: Date.now(), value };
    return value;
  };
}

