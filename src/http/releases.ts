// GET /releases: the releases made (src/releases/FORMAT.md), and each file of each at a stable
// URL, read-only: /releases/catalog.json and collection.json (the STAC index, made from the same
// listing as /releases, so the two never disagree), and
// /releases/{release}/{file}, with ETag, Last-Modified and Range (a researcher resumes a
// download, DuckDB and pyarrow read a Parquet file's footer and row groups in place).
import { createHash } from 'node:crypto';
import type { Request, Response } from 'express';
import { manifests } from '../ops/release.js';
import { stacCatalog, stacCollection, type Manifest } from '../releases/documents.js';
import { citationKey, itemKey, manifestKey, parseReleaseId, RELEASES_PREFIX } from '../releases/layout.js';
import { HttpError } from '../shared/errors.js';
import type { ObjectStore } from '../store/objectStore.js';
import path from 'node:path';
import { ifRangeHolds, suffixesWithin } from './byteRanges.js';
import { ifNoneMatch } from './encoding.js';
import { readQuery, throwIfAny } from './query.js';
import { ReleaseCopies } from './releaseCopies.js';
import { handlerSet, type Handlers } from './route.js';

const TYPES: [RegExp, string][] = [
  [/\.parquet$/, 'application/vnd.apache.parquet'],
  [/\.csv\.gz$/, 'application/gzip'],
  [/item\.json$/, 'application/geo+json'],
  [/\.json$/, 'application/json'],
  [/\.cff$/, 'application/x-yaml; charset=utf-8'],
];
const FILE = /^(manifest\.json|item\.json|CITATION\.cff|reports-\d{4}-\d{2}\.(parquet|csv\.gz))$/;

export interface ReleasesDeps {
  store: ObjectStore;
  /** Where files of releases are kept once fetched from the store: they never change, so one copy serves every request. */
  cacheDir: string;
  /** Bytes of those copies at most (least recently served out first). */
  cacheMaxBytes: number;
  publicBase: () => string;
  /** What the STAC Collection says of the releases' licence and publisher (as `release` writes it). */
  releases: { license: string; publisher: string };
}

export function releasesHandlers(deps: ReleasesDeps): Handlers {
  const { handlers, serve } = handlerSet<'getReleases' | 'getReleaseIndex' | 'getReleaseFile'>();
  /** Each file's ETag and time as stored, once a copy was checked against its manifest (a file never changes). */
  const stored = new Map<string, { etag: string; lastModified: Date }>();
  const copies = new ReleaseCopies(deps.store, deps.cacheDir, deps.cacheMaxBytes);
  const known = new Map<string, Manifest>();
  /** Releases whose manifest, citation and Item are stored: published, never unpublished. */
  const published = new Set<string>();
  /**
   * Whether a release is published: its manifest is written after its files, so until then they
   * may still be rewritten by a run finishing it, and none is served (or cached as immutable);
   * its citation and Item after the manifest, so until they are (a run that stopped between,
   * finished by the next run), the URL its citation gives would lead nowhere.
   */
  const isPublished = async (id: string): Promise<boolean> => {
    if (published.has(id)) return true;
    for (const key of [manifestKey(id), citationKey(id), itemKey(id)]) if (!(await deps.store.head(key))) return false;
    published.add(id);
    return true;
  };

  serve('getReleases', async (req, res) => {
    throwIfAny(readQuery(req, []).details);
    const base = `${deps.publicBase()}/${RELEASES_PREFIX}`;
    const releases = (await manifests(deps.store, known, { described: true })).map((m) => ({
      release: m.release,
      period: m.period,
      revision: m.revision,
      created: m.created,
      reports: m.reports,
      item: `${base}${m.release}/item.json`,
      citation: `${base}${m.release}/CITATION.cff`,
      files: m.files.map((f) => ({ url: `${base}${m.release}/${f.path}`, format: f.format, month: f.month, reports: f.reports, bytes: f.bytes, sha256: f.sha256 })),
    }));
    res.set('Cache-Control', 'public, max-age=60').json({ statusCode: 200, result: { catalog: `${base}catalog.json`, releases } });
  });

  // The STAC index, made from the published releases as /releases lists them: the stored one (what
  // the bucket serves) is rewritten by each release run, and a run stopped after publishing a
  // release but before rewriting it would leave it a release behind until the next run.
  serve('getReleaseIndex', async (req, res) => {
    throwIfAny(readQuery(req, []).details);
    const name = String(req.params.file);
    // A release's own URL (its citation's, /releases/<id>/): its STAC Item describes it.
    if (parseReleaseId(name) && (await isPublished(name))) {
      // No body: the Location is the answer (res.redirect would add a text one the document does not describe).
      res.status(302).set('Location', `${deps.publicBase()}/${RELEASES_PREFIX}${name}/item.json`).end();
      return;
    }
    if (name !== 'catalog.json' && name !== 'collection.json') throw notFound(name);
    const all = await manifests(deps.store, known, { described: true });
    if (all.length === 0) throw new HttpError(404, 'No release has been made yet: the STAC catalogue is written with the first one.');
    const doc = name === 'catalog.json' ? stacCatalog() : stacCollection(all, deps.releases.license, deps.releases.publisher);
    const body = Buffer.from(`${JSON.stringify(doc, null, 2)}\n`);
    const etag = `"${createHash('sha256').update(body).digest('hex').slice(0, 32)}"`;
    res.set({ ETag: etag, 'Cache-Control': 'public, max-age=60' });
    if (ifNoneMatch(req.get('if-none-match'), etag)) {
      res.status(304).end();
      return;
    }
    res.type('application/json').send(body);
  });

  // A release's file: immutable once written, so a local copy serves every later request.
  serve('getReleaseFile', async (req, res) => {
    throwIfAny(readQuery(req, []).details);
    const id = String(req.params.release);
    const name = String(req.params.file);
    if (!parseReleaseId(id) || !FILE.test(name) || !(await isPublished(id))) throw notFound(`${id}/${name}`);
    const key = `${RELEASES_PREFIX}${id}/${name}`;
    // Known once a copy was checked against its manifest: a 304 needs no copy.
    const known = stored.get(key);
    if (known && !preconditionFails(req, known) && ifNoneMatch(req.get('if-none-match'), known.etag)) {
      validators(res, known).status(304).end();
      return;
    }
    const copy = await copies.held(id, name);
    if (!copy) throw notFound(`${id}/${name}`);
    try {
      let info = stored.get(key) ?? copy.stored;
      if (!info) {
        // A copy an earlier process made (and checked): the stored file's validators, asked once.
        const found = await deps.store.head(key);
        if (!found) throw notFound(`${id}/${name}`);
        info = { etag: `"${found.etag.replace(/"/g, '')}"`, lastModified: found.lastModified };
      }
      stored.set(key, info);
      validators(res, info);
      if (!preconditionFails(req, info) && ifNoneMatch(req.get('if-none-match'), info.etag)) {
        res.status(304).end();
        return;
      }
      res.type(TYPES.find(([re]) => re.test(name))?.[1] ?? 'application/octet-stream');
      keepRangeIf(req, info, copy.size);
      await sendFile(res, copies.dir, path.basename(copy.file), req);
    } finally {
      copy.release();
    }
  });
  return handlers;
}

/**
 * A release file's validators: the stored file's ETag, and its time as Last-Modified (when the
 * release was written, the same from every API task, not when this one copied it); immutable.
 * A 304 carries these alone, no representation's headers.
 */
function validators(res: Response, stored: { etag: string; lastModified: Date }): Response {
  return res.set({ ETag: stored.etag, 'Last-Modified': stored.lastModified.toUTCString(), 'Cache-Control': 'public, max-age=31536000, immutable' });
}

/**
 * Whether If-Match (or, without it, If-Unmodified-Since) fails for the file: judged before
 * If-None-Match (RFC 9110 §13.2.2), so a 304 is never given where a 412 is due (sendFile gives it).
 * If-Match compares strongly: a weak tag never matches.
 */
function preconditionFails(req: Request, stored: { etag: string; lastModified: Date }): boolean {
  const ifMatch = req.get('if-match');
  if (ifMatch !== undefined) return ifMatch.trim() !== '*' && !ifMatch.split(',').some((tag) => tag.trim() === stored.etag);
  const since = Date.parse(req.get('if-unmodified-since') ?? '');
  return !Number.isNaN(since) && Math.floor(stored.lastModified.getTime() / 1000) * 1000 > since;
}

const notFound = (what: string) => new HttpError(404, `No release file ${JSON.stringify(what.slice(0, 80))}; GET /releases lists every release and its files.`);

/**
 * Range and If-Range as RFC 9110 has them: the unit in any case (`Bytes=0-99`; send reads it in
 * lower case only), a suffix longer than the file the whole file, and If-Range as ifRangeHolds
 * reads it (byteRanges.ts).
 */
function keepRangeIf(req: Request, stored: { etag: string; lastModified: Date }, size: number): void {
  // Range is a GET's alone (RFC 9110 §14.2): a HEAD gives the whole file's headers.
  if (req.method !== 'GET') delete req.headers.range;
  if (req.headers.range !== undefined) req.headers.range = suffixesWithin(req.headers.range, size);
  const validator = req.get('if-range')?.trim();
  if (validator === undefined || req.headers.range === undefined) return;
  delete req.headers['if-range'];
  if (!ifRangeHolds(validator, { etag: stored.etag, lastModifiedMs: stored.lastModified.getTime() })) delete req.headers.range;
}

/**
 * Express's sendFile (Range, conditional GET on the ETag set, Last-Modified), settled as a
 * promise. `file` relative to `root`: the dot-file check then covers the file's own path, not
 * the cache directory's (which may well be under ~/.cache).
 */
function sendFile(res: Response, root: string, file: string, req: Request): Promise<void> {
  return new Promise((resolve, reject) => {
    res.sendFile(file, { root, maxAge: '1y', immutable: true, acceptRanges: true, lastModified: false, etag: false, dotfiles: 'deny' }, (err?: Error & { status?: number; code?: string }) => {
      // A client that hung up (or got all it asked for) is not an error of ours. A read that
      // failed once the headers were out cuts the connection: the client must not take a short
      // body for the file.
      if (err && res.headersSent && !req.destroyed) res.destroy();
      if (!err || err.code === 'ECONNABORTED' || res.headersSent || req.destroyed) resolve();
      else reject(err);
    });
  });
}
