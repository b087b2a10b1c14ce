// Retractions as events: a ledger whose retract() also tells the event log, in one place for every
// caller (the partner's DELETE, the CLI). The log records a `retracted` event without the
// personal fields (the stream and CAP stop showing the report; webhooks of `retracted` and SNS
// announce it), with the city and barangay of its archived event, or of its point when that event
// is no longer kept. A repeated retraction (a retry after a crash between the ledger and the log)
// fills that gap and never announces twice: within REPEAT_ANNOUNCED_WITHIN_MS of the first the
// log is asked whether it has it; a repeat later than that was announced back then.
import { tombstoneProperties } from '../archive/schema.js';
import type { ReportLookup, RetractionLedger } from '../ledger/ledger.js';
import type { EventFeed } from './events.js';
import type { ReportFeature } from './feature.js';

/**
 * A crash between the ledger and the log is seconds long; a repeat this long after its first
 * retraction finds that one announced (and the AWS log's index of retractions reaches back a
 * little further: 25 hours).
 */
const REPEAT_ANNOUNCED_WITHIN_MS = 24 * 3_600_000;

/** City and barangay of a point, for a report retracted before its archived event was kept. */
export type TagOf = (lng: number, lat: number) => Promise<ReportFeature['properties']['tags']>;

/** The same ledger (every other role passes through), its retract() announcing too. */
export function announcingRetractions<L extends RetractionLedger & Pick<ReportLookup, 'lookup'>>(
  ledger: L,
  events: Pick<EventFeed, 'wasRetracted' | 'archivedReport' | 'retracted'>,
  tagOf?: TagOf,
  now: () => number = Date.now,
): L {
  const retract: RetractionLedger['retract'] = async (pkey, by, reason) => {
    const result = await ledger.retract(pkey, by, reason);
    if (!result.found) return result;
    // A repeat is announced again only if the first one never reached the log (a crash between).
    if (!result.first && (now() - Date.parse(result.retraction.retracted_at) > REPEAT_ANNOUNCED_WITHIN_MS || (await events.wasRetracted(pkey)))) return result;
    const archived = (await events.archivedReport(pkey))?.feature;
    // Pending reports alone are in the ledger whole: of an archived one without its event, the point is unknown here.
    const record = archived ? undefined : (await ledger.lookup(pkey))?.record;
    const location = archived?.geometry.coordinates ?? (record ? [record.report.location.lng, record.report.location.lat] : undefined);
    if (!location) return result;
    const [lng, lat] = location as [number, number];
    const tags = archived?.properties.tags ?? (tagOf ? await tagOf(lng, lat) : undefined);
    const feature: ReportFeature = {
      type: 'Feature',
      geometry: { type: 'Point', coordinates: location },
      // Cleared as the archive's tombstone clears the report (no tags known: null ones).
      properties: tombstoneProperties({
        pkey,
        created_at: result.retraction.created_at,
        source: archived?.properties.source ?? record?.source ?? '',
        disaster_type: archived?.properties.disaster_type ?? record?.report.disaster_type ?? 'flood',
        ...(tags && { tags }),
      }),
    };
    await events.retracted(feature);
    return result;
  };
  return new Proxy(ledger, {
    get(target, prop) {
      if (prop === 'retract') return retract;
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
