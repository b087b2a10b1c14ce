// GET /reports/{pkey}: one report by its key. Its hour comes from the ledger (the report's
// created_at), so the answer reads that hour's parts alone, never the archive at large.
import type { Archive } from '../archive/window.js';
import { HttpError } from '../shared/errors.js';
import type { ReportLookup } from '../ledger/ledger.js';
import { parsePkey } from '../store/layout.js';
import { plainPieces, renderArchive } from './archiveBody.js';
import { REVALIDATE } from './bodyTags.js';
import { oneOf, readQuery, throwIfAny } from './query.js';
import { handlerSet, type Handlers } from './route.js';

/** What a path's report key must be. */
export const PKEY_MESSAGE = 'must be a report key such as partner-123 or partner-alpha-123 (a source, the partner\'s key name if any, a post_id, joined by hyphens)';

export interface ReportRouteDeps {
  archive: Archive;
  ledger: Pick<ReportLookup, 'lookup'>;
}

/** A pending report is archived within about this long: a client may retry after it. */
const RETRY_AFTER_SECONDS = 60;

export function reportsHandlers(deps: ReportRouteDeps): Handlers {
  const { handlers, serve } = handlerSet<'getReport'>();
  serve('getReport', async (req, res) => {
    const { values, details } = readQuery(req, ['geoformat']);
    const geoformat = oneOf(values, 'geoformat', ['geojson', 'topojson'], 'geojson', details) as 'geojson' | 'topojson';
    const pkey = String(req.params.pkey);
    if (!parsePkey(pkey)) details.push({ in: 'path', field: 'pkey', message: PKEY_MESSAGE });
    throwIfAny(details);
    const entry = await deps.ledger.lookup(pkey);
    if (!entry) throw new HttpError(404, `No report has the key ${pkey}.`, [{ in: 'path', field: 'pkey', message: 'is unknown' }]);
    if (entry.retraction) {
      throw new HttpError(410, `The report ${pkey} was retracted at ${entry.retraction.retracted_at}.`, [{ in: 'path', field: 'pkey', message: 'was retracted' }]);
    }
    const { createdMs } = entry;
    const window = await deps.archive.open({ startMs: createdMs, endMs: createdMs, admin: undefined, pkey, limit: 1 });
    const page = await window.page(geoformat);
    const item = page.batches.flatMap((b) => b.items as string[])[0];
    if (item === undefined) {
      // Accepted, not yet in a part (the worker flushes within seconds to a minute).
      throw new HttpError(404, `The report ${pkey} was accepted and is not archived yet; retry in a minute.`, [{ in: 'path', field: 'pkey', message: 'is not archived yet' }], {
        'Retry-After': String(RETRY_AFTER_SECONDS),
      });
    }
    res.set('Cache-Control', REVALIDATE);
    res.status(200).type('application/json; charset=utf-8');
    if (geoformat === 'geojson') {
      res.send(`{"statusCode":200,"result":${item}}`);
      return;
    }
    let body = '';
    for await (const piece of plainPieces(renderArchive((async function* () { yield* page.batches; })(), 'topojson'))) body += typeof piece === 'string' ? piece : Buffer.from(piece).toString('utf8');
    res.send(body);
  });
  return handlers;
}
