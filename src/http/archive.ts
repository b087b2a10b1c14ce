// GET /reports/archive (and /count): a time window of archived reports,
// streamed newest first, as JSON (GeoJSON or TopoJSON) or in bulk formats.
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Request, Response } from 'express';
import type { WindowQuery } from '../archive/query.js';
import type { AdminAreas } from '../boundaries/adminAreas.js';
import type { Archive, Window } from '../archive/window.js';
import type { ErrorDetail } from '../shared/errors.js';
import { EARLIEST_MS, LATEST_MS } from '../partners/partnerReport.js';
import { parseOffsetDateTime } from '../shared/offsetDateTime.js';
import type { Admission } from './admission.js';
import { holdTurn } from './answerTurn.js';
import { startAnswer } from './answerStart.js';
import type { CursorCodec, PageCursor } from './cursor.js';
import { BuiltAnswers } from './builtAnswers.js';
import { rollUp, STATS_ANSWER_BY, STATS_INTERVALS, type StatsAnswerBy, type StatsBy, type StatsInterval, type StatsSpec } from '../archive/stats.js';
import { renderArchive, separatorOf, shapeOf, type TextFormat } from './archiveBody.js';
import { applyEncoding, encoder, ifNoneMatch, negotiateEncoding, answerNotModified, type Encoding } from './encoding.js';
import { sendPieces } from './sendPieces.js';
import { readVersion, throwIfProblems, versionWords } from './boundaryVersion.js';
import { oneOf, plusRestored, readAdmin, readBbox, readQuery, throwIfAny, type QueryValues } from './query.js';
import { handlerSet, type Handlers } from './route.js';
import { hangUpSignal } from './hangUp.js';
import { REVALIDATE } from './bodyTags.js';


export const MAX_PAGE = 10_000;
/** json is the {statusCode, result} envelope (GeoJSON or TopoJSON by geoformat; docs/http.md); geojson and topojson are the same without it. */
export const ARCHIVE_FORMATS = ['json', 'geojson', 'topojson', 'csv', 'ndjson', 'parquet', 'arrow'] as const;
export type ArchiveFormat = (typeof ARCHIVE_FORMATS)[number];

const CONTENT_TYPES: Record<ArchiveFormat, string> = {
  json: 'application/json; charset=utf-8',
  geojson: 'application/geo+json; charset=utf-8',
  // TopoJSON has no registered media type of its own.
  topojson: 'application/json; charset=utf-8',
  csv: 'text/csv; charset=utf-8; header=present',
  ndjson: 'application/x-ndjson; charset=utf-8',
  parquet: 'application/vnd.apache.parquet',
  arrow: 'application/vnd.apache.arrow.stream',
};

export interface ArchiveRouteDeps {
  archive: Archive;
  /** Read only when a request needs them: the areas of the boundary version named (version=, while served), else of the current one; undefined with its problem among `details`. */
  /** The areas of the version asked for (undefined: the current one) and that version's id; undefined when it is not served. */
  adminAreas: (version: string | undefined, details: ErrorDetail[]) => Promise<{ areas: AdminAreas; version: string } | undefined>;
  maxWindowMs: number;
  /** A window whose end is older than this many ms is closed: its answer no longer changes by itself. */
  closedAfterMs: number;
  /** Where DuckDB writes the parts of Parquet answers it cannot copy from the store. */
  tmpDir: string;
  /** Signs and checks the cursors of pages. */
  cursors: CursorCodec;
  /** Turns of heavy answers (whole windows): a bounded number at once, and for one client. */
  admission: Admission;
  /** Turns of pages, apart: each is held in memory until its client has taken it. */
  pageAdmission: Admission;
  /** The key a client's share of the turns counts under (its address). */
  clientOf: (req: IncomingMessage) => string;
  /** The base of the absolute URLs of paging links (config, never the request's Host). */
  publicBase: () => string;
}

interface ArchiveRequest {
  query: WindowQuery;
  format: ArchiveFormat;
  geoformat: 'topojson' | 'geojson';
  /** The filters a cursor is bound to. */
  fingerprint: string;
  /**
   * The boundary version admin= was read in when version= was not given: a page's cursor carries
   * it, so the pages after it cover the same areas though new boundaries are published meanwhile.
   */
  pinnedVersion: string | undefined;
}

export function archiveHandlers(deps: ArchiveRouteDeps): Handlers {
  const { handlers, serve } = handlerSet<'countArchive' | 'archiveExtent' | 'statsArchive' | 'getArchive'>();
  // Whole stats answers of closed windows, by the window's tag (its parts, filters and
  // retractions): a window many people look at (a typhoon's week on the explorer) is counted once.
  const statsAnswers = new BuiltAnswers();

  serve('countArchive', async (req, res) => {
    const { values, details } = readQuery(req, ['start', 'end', 'admin', 'version', 'bbox', 'include_retracted', 'updated_after']);
    const { query } = await parseFilters(req, values, details, deps);
    throwIfProblems(details);
    const window = await deps.archive.open(query, { signal: hangUpSignal(res) });
    const count = await window.count();
    setCaching(res, query, deps, window);
    res.json({ statusCode: 200, ...watermarkField(query, window), result: { count } });
  });

  // What the archive holds at all: "no reports in my window" and "no data yet" told apart.
  serve('archiveExtent', async (req, res) => {
    const { details } = readQuery(req, []);
    throwIfAny(details);
    const window = await deps.archive.open({ startMs: EARLIEST_MS, endMs: LATEST_MS, admin: undefined }, { signal: hangUpSignal(res) });
    const { count, firstMs, lastMs } = await window.extent();
    setCaching(res, { startMs: EARLIEST_MS, endMs: LATEST_MS, admin: undefined }, deps, window);
    res.set('Cache-Control', 'public, max-age=60');
    const iso = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());
    res.json({ statusCode: 200, result: { first_created_at: iso(firstMs), last_created_at: iso(lastMs), count, watermark: iso(window.watermarkMs) } });
  });

  serve('statsArchive', async (req, res) => {
    const { values, details } = readQuery(req, ['start', 'end', 'admin', 'version', 'bbox', 'include_retracted', 'updated_after', 'interval', 'by', 'tz']);
    // Provinces and regions are cities rolled up by the boundary version's hierarchy.
    const rollUpBy = values.by === 'province' || values.by === 'region';
    const { query, areas, version } = await parseFilters(req, values, details, deps, rollUpBy);
    const interval = oneOf(values, 'interval', STATS_INTERVALS, 'day', details) as StatsInterval;
    const by = oneOf(values, 'by', STATS_ANSWER_BY, 'none', details) as StatsAnswerBy;
    const rolled = rollUpBy ? areas : undefined;
    if (rolled && !rolled.levels.has(by as 'province' | 'region')) {
      details.push({ in: 'query', field: 'by', message: `${versionWords(version)} has no ${by === 'region' ? 'regions' : 'provinces'}: by=${by} needs national boundaries (by=city works with any)` });
    }
    const offsetMinutes = readOffset(values.tz, details);
    const buckets = Math.ceil((query.endMs - query.startMs + 1) / BUCKET_MS[interval]);
    const maxBuckets = by === 'local_area' ? MAX_BUCKETS_BY_LOCAL_AREA : MAX_BUCKETS;
    // A sync over the whole archive has as many buckets as changed reports at most.
    if (buckets > maxBuckets && !(query.updatedAfterMs !== undefined && values.start === undefined)) {
      details.push({ in: 'query', field: 'interval', message: `the window holds about ${buckets} ${interval} buckets; at most ${maxBuckets}${by === 'local_area' ? ' by local_area' : ''}: pick a longer interval or a shorter window` });
    }
    throwIfProblems(details);
    const spec: StatsSpec = { interval, by: rolled ? 'city' : (by as StatsBy), offsetMinutes };
    const closed = isClosed(query, deps);
    const encoding = negotiateEncoding(req, true);
    const suffix = applyEncoding(res, encoding);
    const window = await deps.archive.open(query, { signal: hangUpSignal(res) });
    setCaching(res, query, deps, window);
    const tag = closed ? window.tag('stats', JSON.stringify({ ...spec, by, ...(rolled && { boundaries: rolled.version }) })) : undefined;
    if (tag !== undefined) {
      const etag = `"${tag}${suffix}"`;
      res.set('ETag', etag);
      if (ifNoneMatch(req.get('if-none-match'), etag)) {
        answerNotModified(res);
        return;
      }
    }
    const counts = async () => {
      const counted = await window.stats(spec);
      const rows = rolled ? rollUp(counted, (city) => rolled.parentOf(city, by as 'province' | 'region')) : counted;
      const total = rows.reduce((n, r) => n + r.count, 0);
      return JSON.stringify({ statusCode: 200, ...watermarkField(query, window), result: { interval, by, tz: formatOffset(offsetMinutes), total, rows } });
    };
    // A closed window's counts no longer change by themselves: counted once, kept by their tag.
    // Each request counts with its own window (a request's hang-up ends its own counting, not
    // another's), so two at once may both count.
    const kept = tag === undefined ? undefined : statsAnswers.get(tag);
    const body = kept ?? (await counts());
    if (tag !== undefined && kept === undefined) statsAnswers.set(tag, body);
    res.status(200).type('application/json');
    await send(Readable.from([body]), encoding, res);
  });

  serve('getArchive', async (req, res) => {
    const request = await parseArchiveRequest(req, deps);
    const { query, format } = request;
    const hungUp = hangUpSignal(res);
    const window = await deps.archive.open(query, { signal: hungUp });
    const tag = window.tag(format, request.geoformat);
    const closed = isClosed(query, deps);
    const encoding = negotiateEncoding(req, format !== 'parquet');
    const suffix = applyEncoding(res, encoding);
    setCaching(res, query, deps, window);
    if (closed) {
      // Strong where the bytes are fixed by the rows: a text answer as is. A Parquet or Arrow
      // answer, or a compressed one, is laid out (row groups, batches, deflate members) by
      // whether each part's ready texts are there yet, which a part can gain unchanged: the same
      // rows, other bytes, so a weak tag.
      const weak = format === 'parquet' || format === 'arrow' || encoding !== 'identity';
      const etag = `${weak ? 'W/' : ''}"${tag}${suffix}"`;
      res.set('ETag', etag);
      if (ifNoneMatch(req.get('if-none-match'), etag)) {
        answerNotModified(res);
        return;
      }
    }
    res.status(200).type(CONTENT_TYPES[format]);
    const inline = format === 'json' || format === 'geojson' || format === 'topojson';
    res.set('Content-Disposition', `${inline ? 'inline' : 'attachment'}; filename="${fileName(query, format, typeof req.query.admin === 'string' ? req.query.admin : undefined)}"`);
    // HEAD of a whole window: its headers, not a year's answer built for no byte read.
    if (query.limit === undefined && req.method === 'HEAD') {
      res.end();
      return;
    }
    // A whole window is a heavy answer, a page one held in memory: each waits for a turn of its
    // kind (admission.ts), held to its end (or until its client reads too slowly while another waits).
    if (query.limit === undefined) await holdTurn(deps.admission, deps.clientOf(req), req, res, hungUp, 'whole-window answer');
    else await holdTurn(deps.pageAdmission, deps.clientOf(req), req, res, hungUp, 'page');

    // The first pieces are read before the status line: a failure there is an answer of its own.
    const started = <T>(pieces: AsyncIterable<T>) => startAnswer(pieces, res, hungUp, req.originalUrl.slice(0, 500));
    if (format === 'parquet') return sendParquet(res, deps, window, started);
    if (format === 'arrow') {
      await sendPieces(await started(window.arrow()), encoding, res);
      return;
    }
    const text: TextFormat = format === 'json' ? request.geoformat : format === 'geojson' ? 'featurecollection' : format === 'topojson' ? 'topology' : format;
    const shape = shapeOf(text);
    if (query.limit === undefined) {
      await sendPieces(await started(renderArchive(window.batches(shape, separatorOf(text)), text, watermarkField(query, window).watermark)), encoding, res);
      return;
    }
    // A page is bounded: gather it, so the Link to the next one can go in the headers.
    const page = await window.page(shape);
    if (page.next) {
      // A sync's pages all hold the changes up to the first page's watermark, which its cursor carries.
      const receivedBeforeMs = query.updatedAfterMs !== undefined ? window.watermarkMs : (query.after?.receivedBeforeMs ?? query.receivedBeforeMs!);
      const cursor: PageCursor = { ...page.next, receivedBeforeMs, ...(request.pinnedVersion !== undefined && { version: request.pinnedVersion }) };
      res.set('Link', `<${nextUrl(deps.publicBase(), req, await deps.cursors.encode(cursor, request.fingerprint))}>; rel="next"`);
    }
    await sendPieces(renderArchive(toAsync(page.batches), text, watermarkField(query, window).watermark), encoding, res);
  });

  return handlers;
}

async function send(source: NodeJS.ReadableStream, encoding: Encoding, res: Response): Promise<void> {
  const e = encoder(encoding);
  if (e) await pipeline(source, e, res);
  else await pipeline(source, res);
}

async function* toAsync<T>(items: T[]): AsyncIterable<T> {
  yield* items;
}

/**
 * The window's Parquet file, its length known before the first byte; read as the other formats
 * are (`started`), so a read failing after the first byte is the server's, never a hang-up. A
 * chunk or two read ahead: an answer is copied from local files at the socket's pace.
 */
async function sendParquet(res: Response, deps: ArchiveRouteDeps, window: Window, started: (chunks: AsyncIterable<Uint8Array>) => Promise<AsyncIterable<Uint8Array>>): Promise<void> {
  const answer = await window.parquet(deps.tmpDir);
  res.set('Content-Length', String(answer.size));
  try {
    await pipeline(Readable.from(await started(answer.chunks()), { highWaterMark: 2 }), res);
  } finally {
    // A client gone before the first chunk is read leaves the chunks' own `finally` unrun.
    await answer.close();
  }
}

/** A sync's answer (updated_after) changes as changes arrive: never closed, never an ETag. */
function isClosed(query: WindowQuery, deps: ArchiveRouteDeps): boolean {
  return query.updatedAfterMs === undefined && query.endMs < Date.now() - deps.closedAfterMs;
}

/** Cache-Control, and the watermark every answer carries: the instant up to which it holds every change. */
function setCaching(res: Response, query: WindowQuery, deps: ArchiveRouteDeps, window: Window): void {
  res.set('Cache-Control', query.updatedAfterMs !== undefined ? 'no-store' : isClosed(query, deps) ? REVALIDATE : 'public, max-age=10');
  res.set('X-Archive-Watermark', new Date(window.watermarkMs).toISOString());
}

/** In the JSON envelope of a sync's answer: `watermark`, what to send as the next updated_after. */
function watermarkField(query: WindowQuery, window: Window): { watermark?: string } {
  return query.updatedAfterMs === undefined ? {} : { watermark: new Date(window.watermarkMs).toISOString() };
}

/** `admin`: the code asked for (checked by then: letters, digits and a hyphen). */
function fileName(query: WindowQuery, format: ArchiveFormat, admin: string | undefined): string {
  const stamp = (ms: number) => new Date(ms).toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
  const ext = format === 'arrow' ? 'arrows' : format;
  return `flood-reports_${stamp(query.startMs)}_${stamp(query.endMs)}${admin ? `_${admin}` : ''}.${ext}`;
}

function nextUrl(base: string, req: Request, cursor: string): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(req.query as Record<string, string>)) if (k !== 'cursor') params.set(k, v);
  params.set('cursor', cursor);
  return `${base}${req.baseUrl}${req.path}?${params.toString().replace(/\+/g, '%20')}`;
}

/** The filters a page cursor is bound to: a cursor used with other filters is refused. */
export function cursorFingerprint(values: Partial<Record<'start' | 'end' | 'admin' | 'version' | 'bbox' | 'include_retracted' | 'updated_after', string>>): string {
  // The boundary version decides what admin= covers; left out when not given, so cursors made
  // before the version could be named stay valid.
  const version = values.version === undefined ? [] : [values.version];
  return createHash('sha256')
    .update(JSON.stringify([values.start, values.end, values.admin ?? null, values.bbox ?? null, values.include_retracted ?? 'false', values.updated_after ?? null, ...version]))
    .digest('base64url')
    .slice(0, 16);
}

async function parseArchiveRequest(req: Request, deps: ArchiveRouteDeps): Promise<ArchiveRequest> {
  const { values, details } = readQuery(req, ['start', 'end', 'admin', 'version', 'bbox', 'include_retracted', 'updated_after', 'geoformat', 'format', 'limit', 'cursor']);
  const fingerprint = cursorFingerprint(values);
  // A cursor first: admin= is read in the boundary version the walk began with (see pinnedVersion).
  const decoded = values.cursor === undefined ? undefined : await deps.cursors.decode(values.cursor, fingerprint);
  const pinned = decoded?.ok && values.version === undefined ? decoded.cursor.version : undefined;
  const { query, servedVersion } = await parseFilters(req, values, details, deps, false, pinned);
  const geoformat = oneOf(values, 'geoformat', ['topojson', 'geojson'], 'topojson', details) as ArchiveRequest['geoformat'];
  const format = oneOf(values, 'format', ARCHIVE_FORMATS, 'json', details) as ArchiveFormat;
  if (values.geoformat !== undefined && format !== 'json') {
    const shape = format === 'geojson' ? 'is already GeoJSON' : format === 'topojson' ? 'is already TopoJSON' : 'has one shape';
    details.push({ in: 'query', field: 'geoformat', message: `applies to format=json only; format=${format} ${shape}` });
  }
  if (values.limit !== undefined || values.cursor !== undefined) {
    if (format === 'parquet' || format === 'arrow') {
      details.push({ in: 'query', field: values.limit !== undefined ? 'limit' : 'cursor', message: 'pages are for json, geojson, topojson, csv and ndjson; parquet and arrow return the whole window' });
    }
    const limit = values.limit === undefined ? 1000 : Number(values.limit);
    if (!/^\d+$/.test(values.limit ?? '1000') || limit < 1 || limit > MAX_PAGE) {
      details.push({ in: 'query', field: 'limit', message: `must be an integer from 1 to ${MAX_PAGE}` });
    }
    query.limit = limit;
    if (decoded?.ok) query.after = { createdMs: decoded.cursor.createdMs, pkey: decoded.cursor.pkey, receivedBeforeMs: decoded.cursor.receivedBeforeMs };
    else if (decoded) details.push(decoded.detail);
    else query.receivedBeforeMs = Date.now();
  }
  throwIfProblems(details);
  return { query, format, geoformat, fingerprint, pinnedVersion: values.admin !== undefined && values.version === undefined ? servedVersion : undefined };
}

/**
 * The window's filters; with the areas of the boundary version asked for (`version`: version=,
 * else `pinned`; none: the current one) when admin= or version= is given or `needAreas`, and
 * the id of the version they are of (`servedVersion`); undefined when that version is not served
 * (its problem among `details`).
 */
async function parseFilters(
  req: Request,
  values: QueryValues,
  details: ErrorDetail[],
  deps: ArchiveRouteDeps,
  needAreas = false,
  pinned?: string,
): Promise<{ query: WindowQuery; areas: AdminAreas | undefined; version: string | undefined; servedVersion: string | undefined }> {
  if (!req.get('user-agent')) {
    details.push({ in: 'header', field: 'User-Agent', message: 'is required: identify your client, e.g. "my-dashboard/1.0 (me@example.org)"' });
  }
  const updatedAfterMs = readUpdatedAfter(values, details, deps);
  // A sync may leave out the window (every created_at): its changes are bounded in time instead.
  const whole = values.updated_after !== undefined && values.start === undefined && values.end === undefined;
  // A start between two milliseconds is the later: reports keep milliseconds (Python's isoformat gives microseconds).
  const startMs = whole ? EARLIEST_MS : readInstant(values, 'start', details, true);
  const given = whole ? LATEST_MS : readInstant(values, 'end', details);
  // An end to the second covers the whole of it (reports keep milliseconds): a window ending at
  // 23:59:59 and the next starting at 00:00:00 leave nothing between them.
  const endMs = given === undefined || whole || /:\d{2}\.\d/.test(values.end ?? '') ? given : given + 999;
  if (startMs !== undefined && endMs !== undefined && given !== undefined && !whole) {
    // Against the start as sent: one within the same millisecond as the end (start = end between
    // two, rounded up) is a window of its own, which no report is in.
    if (endMs < parseOffsetDateTime(plusRestored(values.start!))!) details.push({ in: 'query', field: 'end', message: 'must not be before start' });
    else if (given - startMs > deps.maxWindowMs) {
      details.push({ in: 'query', field: 'end', message: `the window may span at most ${formatSpan(deps.maxWindowMs)}; split longer pulls` });
    }
  }
  // The boundaries are read only to check a code or a version (a cold read without either need
  // not wait for them); a version not served is a problem whether or not admin= needs it.
  const asked = readVersion(values, details);
  const version = values.version === undefined ? pinned : asked;
  // A malformed version names no areas: admin= and by= are checked once it names one.
  const malformed = values.version !== undefined && asked === undefined;
  const served = !malformed && (values.admin !== undefined || version !== undefined || needAreas) ? await deps.adminAreas(version, details) : undefined;
  const areas = served?.areas;
  const admin = values.admin === undefined || !areas ? undefined : readAdmin(values.admin, areas, details, version && versionWords(version));
  const includeRetracted = oneOf(values, 'include_retracted', ['true', 'false'], 'false', details) === 'true';
  // A sync's retractions are tombstones a mirror deletes by: leaving them out would keep them in it.
  if (values.updated_after !== undefined && values.include_retracted === 'false') {
    details.push({ in: 'query', field: 'include_retracted', message: 'cannot be false on a sync (updated_after): it carries retracted reports as tombstones, which a mirror deletes; leave it out' });
  }
  return { query: { startMs: startMs!, endMs: endMs!, admin, bbox: readBbox(values.bbox, details), includeRetracted, updatedAfterMs }, areas, version, servedVersion: served?.version };
}

/** `updated_after`: an instant in the past; without start and end, at most ARCHIVE_MAX_WINDOW ago. */
function readUpdatedAfter(values: QueryValues, details: ErrorDetail[], deps: ArchiveRouteDeps): number | undefined {
  if (values.updated_after === undefined) return undefined;
  const ms = readInstant(values, 'updated_after', details);
  if (ms === undefined || Number.isNaN(ms)) return undefined;
  if (ms > Date.now()) {
    details.push({ in: 'query', field: 'updated_after', message: 'must not be in the future: send the watermark of your last answer' });
  } else if (values.start === undefined && values.end === undefined && Date.now() - ms > deps.maxWindowMs) {
    details.push({ in: 'query', field: 'updated_after', message: `without start and end, may be at most ${formatSpan(deps.maxWindowMs)} ago; give start and end, or pull the window whole` });
  }
  return ms;
}

function readInstant(values: QueryValues, name: string, details: ErrorDetail[], roundUp = false): number | undefined {
  const raw = values[name];
  if (raw === undefined) {
    // Given more than once is said already (readQuery), not missing.
    if (!details.some((d) => d.in === 'query' && d.field === name)) details.push({ in: 'query', field: name, message: 'is required, e.g. 2026-11-21T00:00:00+0800 (send + as %2B)' });
    return undefined;
  }
  const value = plusRestored(raw);
  const ms = parseOffsetDateTime(value, roundUp);
  if (ms === undefined) {
    details.push({
      in: 'query',
      field: name,
      message: 'must be an ISO 8601 date-time with a UTC offset, e.g. 2026-11-21T00:00:00+0800 (send + as %2B)',
    });
  } else if (ms < EARLIEST_MS || ms > LATEST_MS) {
    details.push({ in: 'query', field: name, message: 'must be from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z' });
    return undefined;
  }
  return ms;
}

function formatSpan(ms: number): string {
  const hours = ms / 3_600_000;
  return hours % 24 === 0 ? `${hours / 24} days` : `${hours} hours`;
}

/** Bounds on the size of a stats answer (a year by hour is 8,784 buckets; by barangay, 680 keys each). */
const MAX_BUCKETS = 10_000;
const MAX_BUCKETS_BY_LOCAL_AREA = 1_000;
const BUCKET_MS: Record<StatsInterval, number> = { hour: 3_600_000, day: 86_400_000, week: 7 * 86_400_000, month: 28 * 86_400_000 };

/** `tz`: a UTC offset for the buckets, `+0800`, `+08:00`, `-0530` or `Z` (UTC when absent). */
function readOffset(raw: string | undefined, details: ErrorDetail[]): number {
  if (raw === undefined || raw === 'Z') return 0;
  // A '+' sent unencoded arrives as a space.
  const m = /^([+\- ])(\d{2}):?(\d{2})$/.exec(raw);
  const minutes = m ? (m[1] === '-' ? -1 : 1) * (Number(m[2]) * 60 + Number(m[3])) : NaN;
  if (!m || Number(m[3]) > 59 || minutes < -12 * 60 || minutes > 14 * 60) {
    details.push({ in: 'query', field: 'tz', message: 'must be a UTC offset from -1200 to +1400, e.g. +0800 for Manila (send + as %2B)' });
    return 0;
  }
  return minutes;
}

function formatOffset(minutes: number): string {
  const abs = Math.abs(minutes);
  return `${minutes < 0 ? '-' : '+'}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`;
}
