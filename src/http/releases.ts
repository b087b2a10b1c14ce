// GET /releases: the releases made (src/releases/FORMAT.md), and each file of each at a stable
// URL, read-only: /releases/catalog.json and collection.json (the STAC index), and
// /releases/{release}/{file}, with ETag, Last-Modified and Range (a researcher resumes a
// download, DuckDB and pyarrow read a Parquet file's footer and row groups in place).
import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import type { Request, Response } from 'express';
import { manifests } from '../ops/release.js';
import type { Manifest } from '../releases/documents.js';
import { manifestKey, parseReleaseId, RELEASES_PREFIX } from '../releases/layout.js';
import { HttpError } from '../shared/errors.js';
import type { ObjectStore } from '../store/objectStore.js';
import { ifNoneMatch } from './encoding.js';
import { readQuery, throwIfAny } from './query.js';
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
  publicBase: () => string;
}

export function releasesHandlers(deps: ReleasesDeps): Handlers {
  const { handlers, serve } = handlerSet<'getReleases' | 'getReleaseIndex' | 'getReleaseFile'>();
  const etags = new Map<string, string>();
  const known = new Map<string, Manifest>();
  /** Releases whose manifest is stored: published, never unpublished. */
  const published = new Set<string>();
  /**
   * Whether a release is published: its manifest is written last, so until then its files may
   * still be rewritten by a run finishing it, and none is served (or cached as immutable).
   */
  const isPublished = async (id: string): Promise<boolean> => {
    if (published.has(id)) return true;
    if (!(await deps.store.head(manifestKey(id)))) return false;
    published.add(id);
    return true;
  };

  serve('getReleases', async (req, res) => {
    throwIfAny(readQuery(req, []).details);
    const base = `${deps.publicBase()}/${RELEASES_PREFIX}`;
    const releases = (await manifests(deps.store, known)).map((m) => ({
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

  // The STAC index: rewritten by every release, so read anew (it is small), validated by the store's ETag.
  serve('getReleaseIndex', async (req, res) => {
    throwIfAny(readQuery(req, []).details);
    const name = String(req.params.file);
    // A release's own URL (its citation's, /releases/<id>/): its STAC Item describes it.
    if (parseReleaseId(name) && (await isPublished(name))) {
      res.redirect(302, `${deps.publicBase()}/${RELEASES_PREFIX}${name}/item.json`);
      return;
    }
    if (name !== 'catalog.json' && name !== 'collection.json') throw notFound(name);
    const found = await deps.store.get(`${RELEASES_PREFIX}${name}`);
    if (!found) throw new HttpError(404, 'No release has been made yet: the STAC catalogue is written with the first one.');
    const etag = `"${found.etag.replace(/"/g, '')}"`;
    res.set({ ETag: etag, 'Cache-Control': 'public, max-age=60' });
    if (ifNoneMatch(req.get('if-none-match'), etag)) {
      res.status(304).end();
      return;
    }
    res.type('application/json').send(found.body);
  });

  // A release's file: immutable once written, so a local copy serves every later request.
  serve('getReleaseFile', async (req, res) => {
    throwIfAny(readQuery(req, []).details);
    const id = String(req.params.release);
    const name = String(req.params.file);
    if (!parseReleaseId(id) || !FILE.test(name) || !(await isPublished(id))) throw notFound(`${id}/${name}`);
    const key = `${RELEASES_PREFIX}${id}/${name}`;
    const file = await localCopy(deps, key);
    if (!file) throw notFound(`${id}/${name}`);
    // The store's ETag, the same from every API task (a file never changes, so it is asked once).
    let etag = etags.get(key);
    if (!etag) {
      const info = await deps.store.head(key);
      if (!info) throw notFound(`${id}/${name}`);
      etags.set(key, (etag = `"${info.etag.replace(/"/g, '')}"`));
    }
    res.set({ ETag: etag, 'Cache-Control': 'public, max-age=31536000, immutable' }).type(TYPES.find(([re]) => re.test(name))?.[1] ?? 'application/octet-stream');
    if (ifNoneMatch(req.get('if-none-match'), etag)) {
      res.status(304).end();
      return;
    }
    await sendFile(res, path.join(deps.cacheDir, 'releases'), path.relative(path.join(deps.cacheDir, 'releases'), file), req);
  });
  return handlers;
}

const notFound = (what: string) => new HttpError(404, `No release file ${JSON.stringify(what.slice(0, 80))}; GET /releases lists every release and its files.`);

/** A local copy of a stored release file, fetched once. */
async function localCopy(deps: ReleasesDeps, key: string): Promise<string | undefined> {
  const file = path.join(deps.cacheDir, 'releases', key.slice(RELEASES_PREFIX.length));
  if (await fs.stat(file).catch(() => undefined)) return file;
  // A directory only for a file the store holds (a request for one it lacks leaves nothing
  // behind), made before the GET: nothing may come between a body and the pipeline that reads
  // it (and handles its errors).
  if (!(await deps.store.head(key))) return undefined;
  await fs.mkdir(path.dirname(file), { recursive: true });
  const found = await deps.store.getStream(key);
  if (!found) return undefined;
  // Written aside, then renamed: a reader never sees half a file.
  const partial = `${file}.${randomUUID()}.partial`;
  try {
    await pipeline(found.body, createWriteStream(partial));
    // Its time is the stored file's: Last-Modified says when the release was written, the same
    // from every API task, not when this one copied it.
    await fs.utimes(partial, found.lastModified, found.lastModified);
    await fs.rename(partial, file);
  } finally {
    await fs.rm(partial, { force: true });
  }
  return file;
}

/**
 * Express's sendFile (Range, conditional GET on the ETag set, Last-Modified), settled as a
 * promise. `file` relative to `root`: the dot-file check then covers the file's own path, not
 * the cache directory's (which may well be under ~/.cache).
 */
function sendFile(res: Response, root: string, file: string, req: Request): Promise<void> {
  return new Promise((resolve, reject) => {
    res.sendFile(file, { root, maxAge: '1y', immutable: true, acceptRanges: true, lastModified: true, etag: false, dotfiles: 'deny' }, (err?: Error & { status?: number; code?: string }) => {
      // A client that hung up (or got all it asked for) is not an error of ours.
      if (!err || err.code === 'ECONNABORTED' || res.headersSent || req.destroyed) resolve();
      else reject(err);
    });
  });
}
