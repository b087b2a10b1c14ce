// GET /releases: the releases made (src/releases/FORMAT.md), and each file of each at a stable
// URL, read-only: /releases/catalog.json and collection.json (the STAC index), and
// /releases/{release}/{file}, with ETag, Last-Modified and Range (a researcher resumes a
// download, DuckDB and pyarrow read a Parquet file's footer and row groups in place).
import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { createHash, randomUUID } from 'node:crypto';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Request, Response } from 'express';
import { manifests } from '../ops/release.js';
import type { Manifest } from '../releases/documents.js';
import { manifestKey, parseReleaseId, RELEASES_PREFIX } from '../releases/layout.js';
import { HttpError, UnavailableError } from '../shared/errors.js';
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
    const file = await localCopy(deps, id, name);
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
    await keepRangeIf(req, etag, file);
    await sendFile(res, path.join(deps.cacheDir, 'releases'), path.relative(path.join(deps.cacheDir, 'releases'), file), req);
  });
  return handlers;
}

const notFound = (what: string) => new HttpError(404, `No release file ${JSON.stringify(what.slice(0, 80))}; GET /releases lists every release and its files.`);

/**
 * A local copy of a stored release file, fetched once. A data file's copy is kept only with the
 * size and SHA-256 its manifest gives (it is served as immutable, under the store's ETag, for a
 * year), and on disk before it is named.
 */
async function localCopy(deps: ReleasesDeps, id: string, name: string): Promise<string | undefined> {
  const key = `${RELEASES_PREFIX}${id}/${name}`;
  const file = path.join(deps.cacheDir, 'releases', id, name);
  if (await fs.stat(file).catch(() => undefined)) return file;
  // A directory only for a file the store holds (a request for one it lacks leaves nothing
  // behind), made before the GET: nothing may come between a body and the pipeline that reads
  // it (and handles its errors).
  if (!(await deps.store.head(key))) return undefined;
  const manifest = await deps.store.get(manifestKey(id));
  const expected = manifest && (JSON.parse(manifest.body.toString('utf8')) as Manifest).files.find((f) => f.path === name);
  await fs.mkdir(path.dirname(file), { recursive: true });
  const found = await deps.store.getStream(key);
  if (!found) return undefined;
  // Written aside, then renamed: a reader never sees half a file.
  const partial = `${file}.${randomUUID()}.partial`;
  try {
    const hash = createHash('sha256');
    let bytes = 0;
    await pipeline(
      found.body,
      new Transform({
        transform(chunk: Buffer, _encoding, done) {
          hash.update(chunk);
          bytes += chunk.length;
          done(null, chunk);
        },
      }),
      createWriteStream(partial),
    );
    const written = await fs.open(partial, 'r+');
    try {
      await written.sync();
    } finally {
      await written.close();
    }
    if (expected && (bytes !== expected.bytes || hash.digest('hex') !== expected.sha256)) {
      throw new UnavailableError('storage', `${key} as read from the store is not the file its manifest describes (${bytes} bytes; ${expected.bytes} expected)`);
    }
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
 * If-Range as RFC 9110 has it: the range is served only when the validator is the file's strong
 * ETag, or exactly its Last-Modified date; otherwise the whole file. (send, under sendFile, takes
 * a weak ETag and an earlier date too.)
 */
async function keepRangeIf(req: Request, etag: string, file: string): Promise<void> {
  const validator = req.get('if-range')?.trim();
  if (validator === undefined || req.headers.range === undefined) return;
  // The file's time only for a date: most requests carry neither header.
  const holds = validator.startsWith('"') || validator.startsWith('W/') ? validator === etag : Date.parse(validator) === Math.floor((await fs.stat(file)).mtimeMs / 1000) * 1000;
  delete req.headers['if-range'];
  if (!holds) delete req.headers.range;
}

/**
 * Express's sendFile (Range, conditional GET on the ETag set, Last-Modified), settled as a
 * promise. `file` relative to `root`: the dot-file check then covers the file's own path, not
 * the cache directory's (which may well be under ~/.cache).
 */
function sendFile(res: Response, root: string, file: string, req: Request): Promise<void> {
  return new Promise((resolve, reject) => {
    res.sendFile(file, { root, maxAge: '1y', immutable: true, acceptRanges: true, lastModified: true, etag: false, dotfiles: 'deny' }, (err?: Error & { status?: number; code?: string }) => {
      // A client that hung up (or got all it asked for) is not an error of ours. A read that
      // failed once the headers were out cuts the connection: the client must not take a short
      // body for the file.
      if (err && res.headersSent && !req.destroyed) res.destroy();
      if (!err || err.code === 'ECONNABORTED' || res.headersSent || req.destroyed) resolve();
      else reject(err);
    });
  });
}
