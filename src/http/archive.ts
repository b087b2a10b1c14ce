// GET /reports/archive: a time window of archived reports, streamed newest first.
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Router, type Request } from 'express';
import type { ArchiveQuery, ArchiveReader, FeatureShape } from '../archive/reader.js';
import { renderArchive } from '../archive/reader.js';
import type { ErrorDetail } from '../errors.js';
import { parseOffsetDateTime } from '../reports/partnerReport.js';
import { oneOf, readQuery, throwIfAny, type QueryValues } from './query.js';

export interface ArchiveRouteDeps {
  archive: ArchiveReader;
  cityCodes: () => Promise<string[]>;
  maxWindowMs: number;
}

export function archiveRouter(deps: ArchiveRouteDeps): Router {
  const router = Router();
  router.get('/reports/archive', async (req, res) => {
    const { query, shape } = await parseArchiveRequest(req, deps);
    res.status(200).type('application/json').set('Cache-Control', 'no-cache');
    await pipeline(Readable.from(renderArchive(deps.archive.batches(query, shape), shape)), res);
  });
  return router;
}

async function parseArchiveRequest(req: Request, deps: ArchiveRouteDeps): Promise<{ query: ArchiveQuery; shape: FeatureShape }> {
  const { values, details } = readQuery(req, ['start', 'end', 'admin', 'geoformat']);
  if (!req.get('user-agent')) {
    details.push({ in: 'header', field: 'User-Agent', message: 'is required: identify your client, e.g. "my-dashboard/1.0 (me@example.org)"' });
  }
  const startMs = readInstant(values, 'start', details);
  const endMs = readInstant(values, 'end', details);
  if (startMs !== undefined && endMs !== undefined) {
    if (endMs < startMs) details.push({ in: 'query', field: 'end', message: 'must not be before start' });
    else if (endMs - startMs > deps.maxWindowMs) {
      details.push({
        in: 'query',
        field: 'end',
        message: `the window may span at most ${formatSpan(deps.maxWindowMs)}; split longer pulls`,
      });
    }
  }
  const codes = await deps.cityCodes();
  const admin = values.admin;
  if (admin !== undefined && !codes.includes(admin)) {
    details.push({ in: 'query', field: 'admin', message: `must be one of: ${codes.join(', ')}` });
  }
  const shape = oneOf(values, 'geoformat', ['topojson', 'geojson'], 'topojson', details) as FeatureShape;
  throwIfAny(details);
  return { query: { startMs: startMs!, endMs: endMs!, admin }, shape };
}

function readInstant(values: QueryValues, name: string, details: ErrorDetail[]): number | undefined {
  const raw = values[name];
  if (raw === undefined) {
    details.push({ in: 'query', field: name, message: 'is required, e.g. 2026-11-21T00:00:00+0800 (send + as %2B)' });
    return undefined;
  }
  // A '+' sent unencoded arrives as a space; before four offset digits that can only mean '+'.
  const value = raw.replace(/ (\d{2}:?\d{2})$/, '+$1');
  const ms = parseOffsetDateTime(value);
  if (ms === undefined) {
    details.push({
      in: 'query',
      field: name,
      message: 'must be an ISO 8601 date-time with a UTC offset, e.g. 2026-11-21T00:00:00+0800 (send + as %2B)',
    });
  }
  return ms;
}

function formatSpan(ms: number): string {
  const hours = ms / 3_600_000;
  return hours % 24 === 0 ? `${hours / 24} days` : `${hours} hours`;
}
