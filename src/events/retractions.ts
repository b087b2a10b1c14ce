// Retractions as events: a ledger whose retract() also tells the event log, in one place for every
// caller (the partner's DELETE, the CLI). The log records a `retracted` event without the
// personal fields (the stream and CAP stop showing the report; webhooks of `retracted` and SNS
// announce it), with the point, city and barangay of its archived event, or of the archive's copy
// when that event is no longer kept (of a pending report, its point's). A repeated retraction (a
// retry after a crash between the ledger and the log) fills that gap and never announces twice:
// within REPEAT_ANNOUNCED_WITHIN_MS of the first the log is asked whether it has it; a repeat
// later than that was announced back then. Two processes asked at once (a DELETE repeated on
// another API task) both find it missing: the log's retracted() records it once (the embedded
// log by its key, the object log by a claim: objectEventLog.ts).
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

/** A report as the archive holds it (its Feature, retracted or not), for one whose archived event is no longer kept. */
export type ArchivedFeatureOf = (pkey: string, createdMs: number) => Promise<ReportFeature | undefined>;

/** The same ledger (every other role passes through), its retract() announcing too. */
export function announcingRetractions<L extends RetractionLedger & Pick<ReportLookup, 'lookup'>>(
  ledger: L,
  events: Pick<EventFeed, 'wasRetracted' | 'archivedReport' | 'retracted' | 'hide'>,
  tagOf?: TagOf,
  now: () => number = Date.now,
  archivedFeatureOf?: ArchivedFeatureOf,
): L {
  const retract: RetractionLedger['retract'] = async (pkey, by, reason) => {
    const result = await ledger.retract(pkey, by, reason);
    if (!result.found) return result;
    // A repeat is announced again only if the first one never reached the log (a crash between).
    if (!result.first && (now() - Date.parse(result.retraction.retracted_at) > REPEAT_ANNOUNCED_WITHIN_MS || (await events.wasRetracted(pkey)))) return result;
    const logged = (await events.archivedReport(pkey))?.feature;
    // Pending reports alone are in the ledger whole; an archived one whose event is no longer
    // kept (older than the log's retention) is read from the archive.
    const record = logged ? undefined : (await ledger.lookup(pkey))?.record;
    // The archive unreadable for a moment: the retraction stands all the same (a repeat fills the gap).
    const archived = logged ?? (record ? undefined : await archivedFeatureOf?.(pkey, Date.parse(result.retraction.created_at)).catch(() => undefined));
    const location = archived?.geometry.coordinates ?? (record ? [record.report.location.lng, record.report.location.lat] : undefined);
    if (!location) {
      // No Feature to announce: still, no reader gets its archived events from now on.
      await events.hide(pkey);
      return result;
    }
    const [lng, lat] = location as [number, number];
    const tags = archived?.properties.tags ?? (tagOf ? await tagOf(lng, lat) : undefined);
    await events.retracted(
      retractionFeature(pkey, result.retraction.created_at, location, {
        source: archived?.properties.source ?? record?.source ?? '',
        disaster_type: archived?.properties.disaster_type ?? record?.report.disaster_type ?? 'flood',
        ...(tags && { tags }),
      }),
    );
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

/** A retraction's Feature: the report's point, cleared as the archive's tombstone clears it (no tags known: null ones). */
export function retractionFeature(
  pkey: string,
  createdAt: string,
  location: number[],
  known: { source: string; disaster_type: string; tags?: ReportFeature['properties']['tags'] },
): ReportFeature {
  return {
    type: 'Feature',
    geometry: { type: 'Point', coordinates: location },
    properties: tombstoneProperties({ pkey, created_at: createdAt, ...known }),
  };
}
