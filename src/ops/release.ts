// `release --period 2025`: an immutable, citable snapshot of a closed period (src/releases/FORMAT.md).
// Each month's reports, as the archive answers them, are written as GeoParquet and gzipped CSV,
// checksummed, and compared with the period's latest revision: the same files, or the same
// reports in other bytes, make no new revision; other reports (a retraction purged, reports that
// came late, a re-tagging) make the next, with what changed in its changelog. Files are created,
// never overwritten; the manifest after them, so a release exists once it does; its citation and
// Item, from the manifest, after it; the STAC Collection and Catalog that list the releases anew
// after every run. One run at a time makes a period's release, from any host (storeLock.ts).
import { createHash, randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createGzip } from 'node:zlib';
import { sqlString, type DuckDb } from '../archive/duckdb.js';
import type { ReleaseFileFacts } from '../archive/releaseParquet.js';
import type { Archive } from '../archive/window.js';
import type { BoundaryRepository } from '../boundaries/repository.js';
import { plainPieces, renderArchive, separatorOf, shapeOf } from '../http/archiveBody.js';
import { citation, releaseSchema, SELECTION, stacCatalog, stacCollection, stacItem, type Manifest, type ReleaseFile } from '../releases/documents.js';
import { CATALOG_KEY, citationKey, COLLECTION_KEY, itemKey, manifestKey, monthFiles, notClosed, parsePeriod, parseReleaseId, RELEASES_PREFIX, releaseDir, releaseId, type Period } from '../releases/layout.js';
import type { Config } from '../shared/config.js';
import type { Logger } from '../shared/log.js';
import { pipeToFile } from '../shared/files.js';
import { SERVICE_VERSION } from '../shared/version.js';
import { releaseLockKey } from '../store/layout.js';
import type { ObjectStore } from '../store/objectStore.js';
import type { Progress } from './progress.js';
import { removeDeadRuns, removeUnpublished, type WithPeriodLock } from './releaseLeftovers.js';
import { withStoreLock } from './storeLock.js';
import { byCodeUnits } from '../shared/byCodeUnits.js';

export interface ReleaseDeps {
  archive: Pick<Archive, 'open'>;
  store: ObjectStore;
  db: DuckDb;
  boundaries: Pick<BoundaryRepository, 'latest'>;
  config: Pick<Config, 'dataDir' | 'publicBaseUrl' | 'releases'>;
  log: Pick<Logger, 'warn'>;
}

export interface ReleaseResult {
  release: string;
  /** False when the period's latest revision already holds these very files. */
  created: boolean;
  reports: number;
  files: number;
  bytes: number;
}

/** A release that cannot be made: as asked (`usage`: the period), or now (another process is making it). */
export class ReleaseError extends Error {
  override name = 'ReleaseError';
  constructor(
    message: string,
    readonly usage = false,
  ) {
    super(message);
  }
}

/** A first release of a period that holds no report: nothing to cite (a mistyped period, or a month before any report). */
export class NothingToReleaseError extends ReleaseError {
  override name = 'NothingToReleaseError';
}

/** Another run holds the period's release lock (by hand or scheduled, on any host); or took it over from this one. */
export class ReleaseRunningError extends ReleaseError {
  override name = 'ReleaseRunningError';
}

/** This run's lock was taken over (its touches failed for five minutes) or given back as its process stops: it stopped before its manifest. */
export class ReleaseLockLostError extends ReleaseError {
  override name = 'ReleaseLockLostError';
}

export interface ReleaseOptions {
  nowMs?: number;
  progress?: Progress;
  /** How often the period's lock is touched (a minute; shorter in tests). */
  lockTouchMs?: number;
}

/**
 * Makes the period's next revision, one run at a time for a period from any host: a run that
 * lost its lock stops before its manifest, so a revision is never published after a later one.
 */
export function release(rt: ReleaseDeps, label: string, options: ReleaseOptions = {}): Promise<ReleaseResult> {
  const period = parsePeriod(label);
  if (!period) return Promise.reject(new ReleaseError(`--period must be a UTC year (2025) or month (2025-06), not ${JSON.stringify(label)}`, true));
  const nowMs = options.nowMs ?? Date.now();
  const open = notClosed(period, nowMs);
  if (open) return Promise.reject(new ReleaseError(open, true));
  const lockOf = (of: string) => ({ store: rt.store, key: releaseLockKey(of), what: `release of ${of}`, log: rt.log, errors, touchMs: options.lockTouchMs });
  return withStoreLock(lockOf(label), async (_, confirmHeld) => {
    const withPeriodLock: WithPeriodLock = (of, remove) => withStoreLock(lockOf(of), (_, held) => remove(held));
    const removeLeftovers = () => removeDeadRuns(rt.store, rt.log, { period: label, confirmHeld }, withPeriodLock);
    try {
      const result = await releaseAlone(rt, label, period, nowMs, options.progress, confirmHeld);
      await removeLeftovers();
      return result;
    } catch (err) {
      // A period with nothing to release (the monthly job's empty months) is a run all the same.
      if (err instanceof NothingToReleaseError) await removeLeftovers();
      throw err;
    }
  });
}

/** The months' reports by the boundary version they carry, most first (a publish not yet followed by a reprocess leaves older ones). */
function taggedWith(facts: readonly ReleaseFileFacts[]): { id: string; reports: number }[] {
  const all = new Map<string, number>();
  for (const f of facts) for (const [id, n] of Object.entries(f.taggedWith)) all.set(id, (all.get(id) ?? 0) + n);
  return [...all].map(([id, reports]) => ({ id, reports })).sort((a, b) => b.reports - a.reports || (a.id < b.id ? -1 : 1));
}

/** How a release's store lock (storeLock.ts) reports another run holding it, and its loss. */
const errors = { running: (m: string) => new ReleaseRunningError(m), lost: (m: string) => new ReleaseLockLostError(m) };

async function releaseAlone(
  rt: ReleaseDeps,
  label: string,
  period: Period,
  nowMs: number,
  progress: Progress | undefined,
  confirmHeld: () => Promise<void>,
): Promise<ReleaseResult> {
  const latest = (await manifests(rt.store)).filter((m) => m.period === label).at(-1);
  const tmp = path.join(rt.config.dataDir, 'tmp', 'release', randomUUID());
  await fs.mkdir(tmp, { recursive: true });
  try {
    progress?.start(period.months.length);
    const files: (ReleaseFile & { local: string })[] = [];
    const facts: ReleaseFileFacts[] = [];
    /** Each CSV file's SHA-256 before gzip, by its path. */
    const csvTexts = new Map<string, string>();
    for (const month of period.months) {
      const names = monthFiles(month.label);
      const parquet = path.join(tmp, names.parquet);
      const csv = path.join(tmp, names.csv);
      // The month is read twice, for each file: a purge or a late report between the two reads
      // makes them differ (their counts), as does a part replaced meanwhile (a reprocess's, read
      // from a new listing: the counts may agree, the tags not), and the month is written again
      // (both files from the archive as it is).
      let written: ReleaseFileFacts | undefined;
      for (let attempt = 1; !written; attempt++) {
        const window = await rt.archive.open({ startMs: month.startMs, endMs: month.endMs, admin: undefined });
        const got = await window.writeReleaseParquet(parquet);
        // Level 9 once, read many times; the gzip header carries no time, so the same rows give the same bytes.
        const rows = csvRecords();
        await pipeToFile(csv, Readable.from(plainPieces(renderArchive(window.batches(shapeOf('csv'), separatorOf('csv')), 'csv'))), rows.counter, createGzip({ level: 9 }));
        // The header is a line too.
        if (rows.lines() - 1 === got.reports && !window.replanned) {
          written = got;
          csvTexts.set(names.csv, rows.sha256());
        }
        else if (attempt === MONTH_ATTEMPTS) throw new ReleaseError(`the reports of ${month.label} changed while it was written, ${MONTH_ATTEMPTS} times: run the release again`);
      }
      facts.push(written);
      for (const [local, name, format, type] of [
        [parquet, names.parquet, 'GeoParquet 1.1', 'application/vnd.apache.parquet'],
        [csv, names.csv, 'CSV (gzip)', 'application/gzip'],
      ] as const) {
        files.push({ local, path: name, format, media_type: type, month: month.label, reports: written.reports, bytes: (await fs.stat(local)).size, sha256: await sha256Of(local) });
      }
      progress?.tick();
    }
    progress?.stop();
    const reports = facts.reduce((n, f) => n + f.reports, 0);
    // Empty after a release is a revision (every report retracted and purged since); empty
    // before any, a period to leave alone.
    if (reports === 0 && !latest) throw new NothingToReleaseError(`${label} holds no report: nothing to release`, true);
    const sameFiles = latest !== undefined && latest.files.length === files.length && files.every((f, i) => latest.files[i]!.path === f.path);
    const same = sameFiles && files.every((f, i) => latest.files[i]!.sha256 === f.sha256);
    // Other bytes, the same reports (a new DuckDB or zlib lays the same rows out otherwise): no
    // new revision either, the files released stand.
    const changes = latest ? await changesSince(rt, latest, files, tmp) : [];
    if (same || (sameFiles && changes.every(unchanged) && (await sameCsvTexts(rt, latest, files, csvTexts)))) {
      await writeIndex(rt);
      return { release: latest!.release, created: false, reports: latest!.reports, files: latest!.files.length, bytes: latest!.files.reduce((n, f) => n + f.bytes, 0) };
    }

    const created = new Date(nowMs).toISOString();
    const boxes = facts.flatMap((f) => (f.bbox ? [f.bbox] : []));
    const firsts = facts.flatMap((f) => (f.firstMs === undefined ? [] : [f.firstMs]));
    const lasts = facts.flatMap((f) => (f.lastMs === undefined ? [] : [f.lastMs]));
    const boundaries = await rt.boundaries.latest();
    const note = latest ? noteOf(latest, changes) : 'First release of the period.';
    const manifestOf = (revision: number): Manifest => ({
      release: releaseId(label, revision),
      period: label,
      revision,
      created,
      window: { start: new Date(period.startMs).toISOString(), end: new Date(period.endMs).toISOString() },
      reports,
      bbox: boxes.length > 0 ? [Math.min(...boxes.map((b) => b[0])), Math.min(...boxes.map((b) => b[1])), Math.max(...boxes.map((b) => b[2])), Math.max(...boxes.map((b) => b[3]))] : null,
      time_extent: firsts.length > 0 ? [new Date(Math.min(...firsts)).toISOString(), new Date(Math.max(...lasts)).toISOString()] : null,
      boundary_version: { id: boundaries.version, label: boundaries.label, attribution: boundaries.attribution ?? null },
      tagged_with: taggedWith(facts),
      files: files.map(({ local: _, ...f }) => f),
      schema: releaseSchema(),
      license: rt.config.releases.license,
      publisher: rt.config.releases.publisher,
      made_with: { service: `flood-archive ${SERVICE_VERSION}`, command: `flood-archive release --period ${label}`, selection: SELECTION },
      changes: [...(latest?.changes ?? []), { revision, created, note }],
    });
    // The next revision, unless a dead run's files hold its folder: the one after (a file once
    // written is never replaced, so a revision number may go unused; the dead run's files are removed).
    for (let revision = (latest?.revision ?? 0) + 1, skipped = 0; ; revision++) {
      const manifest = manifestOf(revision);
      const id = manifest.release;
      // Files first, each created, never overwritten. One already there with these very bytes
      // is a run cut short before its manifest (this run finishes it); other bytes are another
      // run's (see create).
      const written = new Map<string, string>();
      let stale = false;
      for (const f of files) {
        // Touched at once, not as of the last minute's touch: a run stalled past its lock (a
        // stopped process, a paused host) must not create a file in a folder its successor emptied.
        await confirmHeld();
        const etag = await create(rt.store, id, f.path, await fs.readFile(f.local));
        if (etag === undefined) {
          stale = true;
          break;
        }
        written.set(f.path, etag);
      }
      if (stale) {
        // Another's files are a dead run's only while the lock is still this run's: a run that
        // stalled past its lock finds its successor's there, and stops rather than publish the
        // revision after the one its successor is making.
        await confirmHeld();
        // Never published, and its files may hold reports retracted since (why their bytes
        // differ): they go, while the lock keeps other runs out. The number stays unused.
        await removeUnpublished(rt.store, id);
        if (++skipped === STALE_FOLDERS) throw new ReleaseError(`${STALE_FOLDERS} revisions of ${label} in a row held a dead run's files (removed, under ${RELEASES_PREFIX}): run again`);
        continue;
      }
      // Each file still the version this run wrote or found, no later revision made by a run
      // that took this one's lock over, and the lock still this run's. Then the manifest, created
      // if absent, makes the release; its citation and Item, derived from it alone, only once
      // it stands (the winner's, whoever writes them).
      for (const [name, etag] of written) {
        if ((await rt.store.head(`${releaseDir(id)}${name}`))?.etag !== etag) throw new ReleaseRunningError(`${releaseDir(id)}${name} was rewritten by another run meanwhile: that run makes ${id}`);
      }
      // Any revision after the one this run read as the latest: this one's changelog and
      // predecessor would skip it (a run that took the lock over from a stalled one, or from a
      // host whose clock is ahead, may publish a revision between them).
      const later = (await manifests(rt.store)).find((m) => m.period === label && m.revision > (latest?.revision ?? 0));
      if (later) throw new ReleaseRunningError(`${later.release} was made by another run meanwhile, which took this one's lock over: GET /releases lists it`);
      const manifestBody = `${JSON.stringify(manifest, null, 2)}\n`;
      // Touched at once, not as of the last minute's touch: no run can have taken it over since.
      await confirmHeld();
      if (!(await rt.store.putIfAbsent(manifestKey(id), manifestBody))) throw new ReleaseRunningError(`${id} was made by another run meanwhile: GET /releases lists it`);
      await describe(rt, manifest, Buffer.from(manifestBody), latest?.release);
      await writeIndex(rt);
      return { release: id, created: true, reports, files: files.length, bytes: files.reduce((n, f) => n + f.bytes, 0) };
    }
  } finally {
    await fs.rm(tmp, { recursive: true, force: true });
  }
}

/** Reads of a month for its two files before a release gives up on a month that keeps changing. */
const MONTH_ATTEMPTS = 3;

/**
 * A pass-through that counts a CSV's lines: newlines outside quoted cells (a text cell may hold
 * one; a quote inside a cell is doubled, so the count of quotes tells inside from outside); and
 * the SHA-256 of its text (before gzip).
 */
function csvRecords(): { counter: Transform; lines: () => number; sha256: () => string } {
  let lines = 0;
  let quoted = false;
  const hash = createHash('sha256');
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      for (let i = 0; i < chunk.length; i++) {
        const byte = chunk[i];
        if (byte === 0x22) quoted = !quoted;
        else if (byte === 0x0a && !quoted) lines += 1;
      }
      done(null, chunk);
    },
  });
  return { counter, lines: () => lines, sha256: () => hash.digest('hex') };
}

/**
 * A release's citation and STAC Item, from its manifest as stored (the citation names its
 * SHA-256) and the period's revision before it: the same bytes whoever writes them, each created
 * if absent. Written once the manifest stands, so neither ever describes a manifest that was not
 * published; one a run stopped before is written by the next run (writeIndex).
 */
async function describe(rt: ReleaseDeps, manifest: Manifest, manifestBody: Buffer, previous: string | undefined): Promise<void> {
  await rt.store.putIfAbsent(citationKey(manifest.release), citation(manifest, createHash('sha256').update(manifestBody).digest('hex'), rt.config.publicBaseUrl));
  await rt.store.putIfAbsent(itemKey(manifest.release), `${JSON.stringify(stacItem(manifest, previous), null, 2)}\n`);
}

/** Revisions in a row skipped for a dead run's files before a run gives up. */
const STALE_FOLDERS = 5;

/**
 * Creates a release's file, or finds it there already with the same bytes (a run cut short);
 * the ETag of the version kept. Other bytes with no manifest beside them are a dead run's (this
 * run holds the period's lock; the reports changed since that run stopped): undefined, the folder
 * is left to it.
 */
async function create(store: ObjectStore, id: string, name: string, body: Buffer): Promise<string | undefined> {
  const key = `${releaseDir(id)}${name}`;
  if (await store.putIfAbsent(key, body)) return (await store.head(key))?.etag ?? '';
  const there = await store.get(key);
  if (there?.body.equals(body)) return there.etag;
  if (!(await store.head(manifestKey(id)))) return undefined;
  throw new ReleaseRunningError(`${id} was made by another run meanwhile: GET /releases lists it`);
}

/**
 * Every release made (those whose manifest is written), oldest period and revision first. A
 * manifest never changes, so `known` (kept by a caller that asks often) saves reading it again.
 * `described`: only those whose citation and Item are written too (what the API serves).
 */
export async function manifests(store: ObjectStore, known = new Map<string, Manifest>(), options: { described?: boolean } = {}): Promise<Manifest[]> {
  const out: Manifest[] = [];
  const keys = new Set<string>();
  for await (const info of store.list({ prefix: RELEASES_PREFIX })) {
    keys.add(info.key);
    const id = /^releases\/([^/]+)\/manifest\.json$/.exec(info.key)?.[1];
    if (!id || !parseReleaseId(id)) continue;
    const cached = `${info.key} ${info.etag}`;
    let manifest = known.get(cached);
    if (!manifest) {
      const body = await store.get(info.key);
      if (!body) continue;
      known.set(cached, (manifest = JSON.parse(body.body.toString('utf8')) as Manifest));
    }
    out.push(manifest);
  }
  const kept = options.described ? out.filter((m) => keys.has(citationKey(m.release)) && keys.has(itemKey(m.release))) : out;
  return kept.sort((a, b) => byCodeUnits(a.period, b.period) || a.revision - b.revision);
}

/**
 * The STAC Collection and Catalog, from every manifest: the only objects of releases/ ever
 * rewritten. The Collection is replaced only as the version read before the manifests were
 * listed: a run beside this one that published a release and wrote it meanwhile makes this one
 * list again, so the last one written lists every release. A release whose run stopped before
 * its citation or Item gets them here.
 */
async function writeIndex(rt: ReleaseDeps): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const before = await rt.store.head(COLLECTION_KEY);
    const all = await manifests(rt.store);
    await describeMissing(rt, all);
    const body = `${JSON.stringify(stacCollection(all, rt.config.releases.license, rt.config.releases.publisher), null, 2)}\n`;
    if (before ? await rt.store.putIfMatch(COLLECTION_KEY, body, before.etag) : await rt.store.putIfAbsent(COLLECTION_KEY, body)) break;
    if (attempt === INDEX_ATTEMPTS) throw new ReleaseError(`${COLLECTION_KEY} was rewritten by other runs ${INDEX_ATTEMPTS} times while this one wrote it: run again`);
  }
  await rt.store.put(CATALOG_KEY, `${JSON.stringify(stacCatalog(), null, 2)}\n`);
}

/** Writes of the Collection a run tries before it gives up. */
const INDEX_ATTEMPTS = 5;

/** The citation and Item of every release (of `all`, oldest first) that lacks either. */
async function describeMissing(rt: ReleaseDeps, all: readonly Manifest[]): Promise<void> {
  const keys = new Set<string>();
  for await (const info of rt.store.list({ prefix: RELEASES_PREFIX })) keys.add(info.key);
  for (const [i, m] of all.entries()) {
    if (keys.has(citationKey(m.release)) && keys.has(itemKey(m.release))) continue;
    const body = await rt.store.get(manifestKey(m.release));
    if (!body) continue;
    const previous = all.slice(0, i).filter((p) => p.period === m.period).at(-1)?.release;
    await describe(rt, m, body.body, previous);
  }
}

async function sha256Of(file: string): Promise<string> {
  const hash = createHash('sha256');
  await pipeline(createReadStream(file), hash);
  return hash.digest('hex');
}

/** A month's Parquet file against the previous revision's: its reports added, removed and changed (tags, tombstones). */
interface MonthChange {
  month: string;
  added: number;
  removed: number;
  changed: number;
  before: number;
  after: number;
}

const unchanged = (c: MonthChange) => c.added === 0 && c.removed === 0 && c.changed === 0;

/** The changelog entry of a new revision: the months whose reports changed. */
function noteOf(previous: Manifest, changes: readonly MonthChange[]): string {
  const lines = changes.filter((c) => !unchanged(c)).map((c) => `${c.month}: ${c.added} added, ${c.removed} removed, ${c.changed} changed (${c.before} → ${c.after} reports)`);
  return lines.length > 0 ? `Since ${previous.release}: ${lines.join('; ')}.` : `Since ${previous.release}: the same reports; the files were written anew.`;
}

/** Whether each CSV file whose bytes differ from the previous revision's holds the same text (compared by the SHA-256 of the gunzipped text). */
async function sameCsvTexts(rt: ReleaseDeps, previous: Manifest | undefined, files: readonly ReleaseFile[], csvTexts: ReadonlyMap<string, string>): Promise<boolean> {
  if (!previous) return false;
  for (const f of files) {
    if (!f.path.endsWith('.csv.gz') || previous.files.find((p) => p.path === f.path)?.sha256 === f.sha256) continue;
    const stored = await rt.store.getStream(`${releaseDir(previous.release)}${f.path}`);
    if (!stored) return false;
    const hash = createHash('sha256');
    await pipeline(stored.body, createGunzip(), hash);
    if (hash.digest('hex') !== csvTexts.get(f.path)) return false;
  }
  return true;
}

/** What changed since the period's previous revision in each month whose Parquet file's bytes differ. */
async function changesSince(rt: ReleaseDeps, previous: Manifest, files: readonly (ReleaseFile & { local: string })[], tmp: string): Promise<MonthChange[]> {
  const out: MonthChange[] = [];
  for (const f of files) {
    if (!f.path.endsWith('.parquet')) continue;
    const before = previous.files.find((p) => p.path === f.path);
    if (before?.sha256 === f.sha256) continue;
    const old = path.join(tmp, `previous-${f.path}`);
    const stored = before && (await rt.store.get(`${releaseDir(previous.release)}${f.path}`));
    if (stored) await fs.writeFile(old, stored.body);
    const counts = await rt.db.withConnection(async (conn) => {
      const read = (file: string) => `(SELECT pkey, md5(to_json(r)::VARCHAR) AS h FROM (SELECT * EXCLUDE (geometry, bbox) FROM read_parquet(${sqlString(file)})) r)`;
      if (!stored) return { added: f.reports, removed: 0, changed: 0 };
      const row = (
        await conn.runAndReadAll(
          `SELECT count(*) FILTER (WHERE o.pkey IS NULL)::INTEGER AS added, count(*) FILTER (WHERE n.pkey IS NULL)::INTEGER AS removed,
                  count(*) FILTER (WHERE n.h <> o.h)::INTEGER AS changed
           FROM ${read(f.local)} n FULL OUTER JOIN ${read(old)} o ON n.pkey = o.pkey`,
        )
      ).getRowObjectsJS()[0]!;
      return { added: Number(row.added), removed: Number(row.removed), changed: Number(row.changed) };
    });
    out.push({ month: f.month, ...counts, before: before?.reports ?? 0, after: f.reports });
  }
  return out;
}
