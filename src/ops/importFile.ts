// Backfill from a file: NDJSON, GeoJSON or CSV, partner bodies or
// CogniCity-style export rows (point as GeoJSON or WKT). Every record is
// validated like the feed and accepted through the same idempotency keys, so
// re-running an import adds nothing. A checkpoint file makes it resumable.
// An import runs as one partner (its post_ids, its pkeys, its right to retract)
// or, by default, as none: the operators' own reports, keyed partner-<post_id>.
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import readline from 'node:readline';
import { parse as parseCsv } from 'csv-parse';
import type { BoundaryRepository } from '../boundaries/repository.js';
import type { Intake } from '../ingest/intake.js';
import { PkeyTakenError } from '../ledger/ledger.js';
import { InvalidReportError, parsePartnerReport } from '../partners/partnerReport.js';
import type { Progress } from './progress.js';

export type ImportFormat = 'ndjson' | 'geojson' | 'csv';

export interface ImportOptions {
  file: string;
  format?: ImportFormat;
  rejectsFile?: string;
  stateFile?: string;
  /** Ignore a checkpoint and start from the first record. */
  restart?: boolean;
  /** The key name whose reports these are (as if that partner had posted them); none: the operators'. */
  partner?: string;
}

export interface ImportResult {
  records: number;
  accepted: number;
  duplicate: number;
  rejected: number;
  resumedFrom: number;
  rejectsFile: string;
}

interface Checkpoint {
  size: number;
  mtimeMs: number;
  processed: number;
  accepted: number;
  duplicate: number;
  rejected: number;
  complete: boolean;
  partner?: string;
}

const BATCH = 32;

export function detectFormat(file: string): ImportFormat {
  const ext = file.toLowerCase().slice(file.lastIndexOf('.') + 1);
  if (ext === 'ndjson' || ext === 'jsonl') return 'ndjson';
  if (ext === 'geojson' || ext === 'json') return 'geojson';
  if (ext === 'csv') return 'csv';
  throw new Error(`cannot tell the format of ${file}; pass --format ndjson|geojson|csv`);
}

/** What an import uses: the intake (durable acceptance, as a partner's post) and the current boundaries. */
export interface ImportDeps {
  intake: Pick<Intake, 'accept'>;
  boundaries: Pick<BoundaryRepository, 'current'>;
}

export async function importFile(rt: ImportDeps, options: ImportOptions, progress?: Progress): Promise<ImportResult> {
  const format = options.format ?? detectFormat(options.file);
  const stat = await fs.stat(options.file);
  const stateFile = options.stateFile ?? `${options.file}.import-state.json`;
  const rejectsFile = options.rejectsFile ?? `${options.file}.rejected.ndjson`;
  const partner = options.partner;
  let checkpoint: Checkpoint = { size: stat.size, mtimeMs: stat.mtimeMs, processed: 0, accepted: 0, duplicate: 0, rejected: 0, complete: false, ...(partner !== undefined && { partner }) };
  if (!options.restart) {
    const saved = await readCheckpoint(stateFile);
    // A run as another partner starts over: the records done so far are not that partner's.
    if (saved && !saved.complete && saved.size === stat.size && saved.mtimeMs === stat.mtimeMs && saved.partner === partner) checkpoint = saved;
  }
  const resumedFrom = checkpoint.processed;
  if (resumedFrom === 0) await fs.writeFile(rejectsFile, '');
  const boundaries = await rt.boundaries.current();
  const tagger = boundaries.tagger;

  progress?.start(format === 'geojson' ? 0 : stat.size);
  let index = 0;
  let batch: { index: number; record: unknown }[] = [];
  const flush = async () => {
    const outcomes = await Promise.all(
      batch.map(async ({ index: n, record }): Promise<{ outcome: 'accepted' | 'duplicate' | 'rejected'; reject?: string }> => {
        try {
          // Without a partner_city, the code of the city holding the point, which names it.
          const input = toPartnerInput(record, (lng, lat) => tagger.tag(lng, lat).instance_region_code);
          const report = parsePartnerReport(input, Date.now(), boundaries.placeNames);
          return { outcome: (await rt.intake.accept(report, partner)).created ? 'accepted' : 'duplicate' };
        } catch (err) {
          if (err instanceof InvalidReportError || err instanceof RecordError || err instanceof PkeyTakenError) {
            const reasons =
              err instanceof InvalidReportError
                ? err.details.map((d) => `${d.field}: ${d.message}`)
                : err instanceof PkeyTakenError
                  ? [`post_id: ${err.pkey} is a partner's report (accepted before post_ids were per partner); import as a partner with --partner NAME`]
                  : [err.message];
            return { outcome: 'rejected', reject: JSON.stringify({ record: n + 1, reasons, input: record }) };
          }
          throw err; // storage or queue down: stop, the checkpoint lets a re-run resume
        }
      }),
    );
    // Rejects in record order, whatever order the batch finished in.
    const rejects = outcomes.flatMap((o) => (o.reject ? [`${o.reject}\n`] : []));
    if (rejects.length > 0) await fs.appendFile(rejectsFile, rejects.join(''));
    for (const o of outcomes) checkpoint[o.outcome] += 1;
    checkpoint.processed += batch.length;
    batch = [];
    await fs.writeFile(stateFile, JSON.stringify(checkpoint));
  };

  for await (const { record, bytes } of records(options.file, format)) {
    progress?.tick(bytes);
    if (index++ < resumedFrom) continue;
    batch.push({ index: index - 1, record });
    if (batch.length >= BATCH) await flush();
  }
  await flush();
  checkpoint.complete = true;
  await fs.writeFile(stateFile, JSON.stringify(checkpoint));
  progress?.stop();
  return {
    records: checkpoint.processed,
    accepted: checkpoint.accepted,
    duplicate: checkpoint.duplicate,
    rejected: checkpoint.rejected,
    resumedFrom,
    rejectsFile,
  };
}

async function readCheckpoint(file: string): Promise<Checkpoint | undefined> {
  try {
    return JSON.parse(await fs.readFile(file, 'utf8')) as Checkpoint;
  } catch {
    return undefined;
  }
}

async function* records(file: string, format: ImportFormat): AsyncIterable<{ record: unknown; bytes: number }> {
  if (format === 'geojson') {
    const doc = JSON.parse(await fs.readFile(file, 'utf8')) as { type?: string; features?: unknown[] };
    const features = doc.type === 'FeatureCollection' && Array.isArray(doc.features) ? doc.features : [doc];
    for (const f of features) yield { record: f, bytes: 0 };
    return;
  }
  if (format === 'ndjson') {
    const lines = readline.createInterface({ input: createReadStream(file), crlfDelay: Infinity });
    for await (const line of lines) {
      if (line.trim() === '') continue;
      let record: unknown;
      try {
        record = JSON.parse(line);
      } catch {
        record = new RecordError('the line is not valid JSON');
      }
      yield { record, bytes: Buffer.byteLength(line) + 1 };
    }
    return;
  }
  const parser = createReadStream(file).pipe(parseCsv({ columns: true, bom: true, skip_empty_lines: true, trim: true }));
  for await (const row of parser) yield { record: row, bytes: 0 };
}

class RecordError extends Error {
  override name = 'RecordError';
}

type CityForPoint = (lng: number, lat: number) => string | null;

/** Maps one input record (partner body, GeoJSON Feature, CSV or CogniCity row) to a feed body. */
export function toPartnerInput(record: unknown, cityForPoint: CityForPoint): Record<string, unknown> {
  if (record instanceof RecordError) throw record;
  if (typeof record !== 'object' || record === null || Array.isArray(record)) throw new RecordError('the record is not an object');
  const r = record as Record<string, unknown>;
  const props = r.type === 'Feature' ? ((r.properties ?? {}) as Record<string, unknown>) : r;
  const location =
    r.type === 'Feature' ? pointOf(r.geometry) : pointOf(props.location ?? props.the_geom ?? props.geom ?? props.geometry ?? props.point) ?? latLngOf(props);
  if (!location) throw new RecordError('no point: give location {lat,lng}, lat/lng columns, or a GeoJSON or WKT point');
  const out: Record<string, unknown> = {
    post_id: props.post_id,
    created_at: normaliseTimestamp(props.created_at),
    partner_city: props.partner_city || cityForPoint(location.lng, location.lat) || undefined,
    disaster_type: props.disaster_type,
    location,
  };
  for (const field of ['title', 'text', 'image_url'] as const) {
    const value = props[field];
    if (value !== undefined && value !== null && value !== '') out[field] = value;
  }
  if (out.partner_city === undefined) {
    throw new RecordError('partner_city missing and the point is in no city of the current boundaries');
  }
  return Object.fromEntries(Object.entries(out).filter(([, v]) => v !== undefined));
}

function pointOf(value: unknown): { lat: number; lng: number } | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value === 'string') {
    const wkt = /^\s*(?:SRID=4326;)?POINT\s*\(\s*(-?[\d.]+(?:e-?\d+)?)\s+(-?[\d.]+(?:e-?\d+)?)\s*\)\s*$/i.exec(value);
    if (wkt) return { lng: Number(wkt[1]), lat: Number(wkt[2]) };
    try {
      return pointOf(JSON.parse(value));
    } catch {
      throw new RecordError(`not a GeoJSON or WKT point: ${value.slice(0, 60)}`);
    }
  }
  if (typeof value === 'object') {
    const v = value as { type?: string; coordinates?: unknown; lat?: unknown; lng?: unknown };
    if (v.type === 'Point' && Array.isArray(v.coordinates) && v.coordinates.length >= 2) {
      return { lng: Number(v.coordinates[0]), lat: Number(v.coordinates[1]) };
    }
    if ('lat' in v || 'lng' in v) return { lat: numberOrRaw(v.lat) as number, lng: numberOrRaw(v.lng) as number };
  }
  throw new RecordError('the point is not a GeoJSON Point, a WKT POINT or {lat, lng}');
}

function latLngOf(props: Record<string, unknown>): { lat: number; lng: number } | undefined {
  const lat = props.lat ?? props.latitude;
  const lng = props.lng ?? props.lon ?? props.long ?? props.longitude;
  if (lat === undefined || lng === undefined || lat === '' || lng === '') return undefined;
  return { lat: numberOrRaw(lat) as number, lng: numberOrRaw(lng) as number };
}

/** CSV gives strings; keep non-numeric ones as they are so validation names them. */
function numberOrRaw(value: unknown): unknown {
  if (typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value))) return Number(value);
  return value;
}

/** Accepts PostgreSQL's `2017-01-01 00:00:00+07` as CogniCity exports write it. */
function normaliseTimestamp(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  const m = /^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2}(?:\.\d+)?)(Z|[+-]\d{2}(?::?\d{2})?)$/.exec(value.trim());
  if (!m) return value;
  const zone = m[3]!.length === 3 ? `${m[3]}:00` : m[3];
  return `${m[1]}T${m[2]}${zone}`;
}
