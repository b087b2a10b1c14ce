// The static files of the pages (the explorer's scripts and their libraries, Swagger UI):
// express.static, with the text files compressed for clients that accept it. Each file is
// compressed once per encoding, when first asked for, and kept for the process's life: the
// folders are package contents, a few megabytes in all, and Swagger UI's bundle alone is 1.7 MB
// of JavaScript (390 KB with brotli, 460 KB with gzip) that a page would otherwise fetch whole each time.
// Every file is revalidated before each use (a 304 on its tag): its page is, and after an upgrade
// the new page must not run an older script kept under the same name.
// A range, an unknown path, a folder or anything odd is express.static's to answer, uncompressed.
import fs from 'node:fs/promises';
import path from 'node:path';
import express, { Router, type Request, type RequestHandler } from 'express';
import { digestOf } from './bodyTags.js';
import { ifRangeHolds, suffixesWithin } from './byteRanges.js';
import { applyEncoding, encodeFile, encodingTag, ifNoneMatch, negotiateEncoding, answerNotModified, type Encoding } from './encoding.js';

/** Files worth compressing: text, of some size. */
const TEXT_FILE = /\.(js|mjs|css|html|json|map|svg|txt|md|ts)$/i;
const COMPRESS_FROM_BYTES = 1024;
/** Larger files are sent as they are: compressing tens of megabytes on request is a cost anyone could impose. */
const COMPRESS_UP_TO_BYTES = 8 * 1024 * 1024;
const CACHE_CONTROL = 'public, no-cache';

/** One file's compressed forms, valid while its size and modification time stand. */
interface Compressed {
  mtimeMs: number;
  size: number;
  digest: string;
  bodies: Map<Exclude<Encoding, 'identity'>, Promise<Buffer>>;
}

type StaticOptions = {
  index: string | false;
  redirect?: boolean;
  /** Files of the folder (relative paths) never served from it, however their path is spelt: others answer for them. */
  hidden?: readonly string[];
};

/** express.static over `root`, its text files compressed when the client accepts it. */
export function staticFiles(root: string, { hidden = [], ...options }: StaticOptions): Router {
  const files = new Map<string, Compressed>();
  const hiddenFiles = new Set(hidden.map((name) => path.join(root, name)));
  // Judged on the path as the file server reads it (decoded, normalised: %69ndex.html, a//b).
  const hide: RequestHandler = (req, _res, next) => next(hiddenFiles.has(servedPath(root, req.path)) ? 'router' : undefined);
  const compressed: RequestHandler = (req, res, next) => {
    const file = fileUnder(root, req.path);
    if ((req.method !== 'GET' && req.method !== 'HEAD') || file === undefined) return next();
    // Its answer depends on Accept-Encoding however it is sent: a shared cache keeps them apart.
    if (TEXT_FILE.test(file)) res.vary('Accept-Encoding');
    // A range, or a precondition on the file's date: the file server's (a suffix longer than the
    // file read as the whole file first, byteRanges.ts).
    const range = req.headers.range;
    if (range !== undefined) {
      void fs
        .stat(file)
        .then((stat) => (stat.isFile() ? stat : undefined), () => undefined)
        .then((stat) => {
          if (stat !== undefined) {
            req.headers.range = suffixesWithin(range, stat.size);
            keepRangeIf(req, stat.mtimeMs);
          }
          next();
        })
        .catch((err: unknown) => res.destroy(err as Error));
      return;
    }
    if (!TEXT_FILE.test(file) || req.get('if-unmodified-since') !== undefined) return next();
    const encoding = negotiateEncoding(req, true);
    if (encoding === 'identity') return next();
    void compressedFile(files, file, encoding)
      .then((found) => {
        if (found === undefined) return next();
        if (res.destroyed || res.writableEnded) return;
        // If-Match naming none of this representation's tags: the file server judges it (its own tag, or 412).
        const ifMatch = req.get('if-match');
        if (ifMatch !== undefined && !ifMatch.split(',').some((t) => t.trim() === '*' || t.trim() === `"${found.digest}${encodingTag(encoding)}"`)) return next();
        const etag = `"${found.digest}${applyEncoding(res, encoding)}"`;
        res.set({ ETag: etag, 'Cache-Control': CACHE_CONTROL });
        res.type(path.extname(file));
        if (ifNoneMatch(req.get('if-none-match'), etag)) {
          answerNotModified(res);
          return;
        }
        res.send(found.body);
      }, () => next()) // a file that cannot be read is express.static's to answer (a 404, or its error)
      .catch((err: unknown) => res.destroy(err as Error));
  };
  const router = Router();
  router.use(hide, compressed, express.static(root, { ...options, cacheControl: false, setHeaders: (res) => res.setHeader('Cache-Control', CACHE_CONTROL) }));
  return router;
}

/** If-Range kept as RFC 9110 has it (ifRangeHolds), not as the file server does; the files' tags are weak. */
function keepRangeIf(req: Request, mtimeMs: number): void {
  const validator = req.get('if-range')?.trim();
  if (validator === undefined) return;
  delete req.headers['if-range'];
  if (!ifRangeHolds(validator, { lastModifiedMs: mtimeMs })) delete req.headers.range;
}

/** The file express.static would look for at `requested` (a path that does not decode: none, its 400). */
function servedPath(root: string, requested: string): string {
  try {
    return path.join(root, decodeURIComponent(requested)).replace(/(.)\/+$/, '$1');
  } catch {
    return '';
  }
}

/**
 * The file a request path names under `root`, spelt as a plain path (/a/b.js), or undefined for
 * one express.static should judge: a path that does not decode, climbs out, names a dotfile
 * (which it ignores), or is spelt another way (an empty segment, a backslash), which a handler
 * before this one may have refused by its plain spelling (the explorer's page file).
 */
function fileUnder(root: string, requested: string): string | undefined {
  let decoded: string;
  try {
    decoded = decodeURIComponent(requested);
  } catch {
    return undefined;
  }
  if (!decoded.startsWith('/') || /[\\\0]/.test(decoded)) return undefined;
  const segments = decoded.slice(1).split('/');
  if (segments.some((s) => s === '' || s.startsWith('.'))) return undefined;
  const file = path.join(root, ...segments);
  const relative = path.relative(root, file);
  return relative === '' || relative.startsWith('..') || path.isAbsolute(relative) ? undefined : file;
}

/** The file compressed (and its tag's digest), made at most once per encoding; undefined when it is no file worth it. */
async function compressedFile(files: Map<string, Compressed>, file: string, encoding: Exclude<Encoding, 'identity'>): Promise<{ digest: string; body: Buffer } | undefined> {
  const stat = await fs.stat(file);
  if (!stat.isFile() || stat.size < COMPRESS_FROM_BYTES || stat.size > COMPRESS_UP_TO_BYTES) return undefined;
  let entry = files.get(file);
  let bytes: Buffer | undefined;
  if (!entry || entry.mtimeMs !== stat.mtimeMs || entry.size !== stat.size) {
    bytes = await fs.readFile(file);
    entry = { mtimeMs: stat.mtimeMs, size: stat.size, digest: digestOf(bytes), bodies: new Map() };
    files.set(file, entry);
  }
  let body = entry.bodies.get(encoding);
  if (!body) {
    const source = bytes ? Promise.resolve(bytes) : fs.readFile(file);
    entry.bodies.set(encoding, (body = source.then((read) => encodeFile(read, encoding))));
    // A failure is the asking request's; the next one tries again.
    const made = entry;
    body.catch(() => made.bodies.delete(encoding));
  }
  return { digest: entry.digest, body: await body };
}
