// Retractions as events: a ledger whose retract() also tells the event log, in one place for every
// caller (the partner's DELETE, the CLI). The log then drops the report's archived event (so the
// stream and CAP stop showing it) and records a `retracted` event without the personal fields,
// sent to subscriptions of `retracted`. Recording is idempotent, so a repeated retraction (a retry
// after a crash between the ledger and the log) fills a gap and never announces twice.
import type { IngestLedger } from '../ledger/ledger.js';
import type { EventLog } from './eventLog.js';
import type { ReportFeature } from './feature.js';

export function announcingRetractions(ledger: IngestLedger, events: EventLog): IngestLedger {
  const retract: IngestLedger['retract'] = async (pkey, by, reason) => {
    const result = await ledger.retract(pkey, by, reason);
    if (!result.found) return result;
    const archived = events.archivedReport(pkey)?.feature;
    const entry = archived ? undefined : await ledger.lookup(pkey);
    const location = archived?.geometry.coordinates ?? (entry ? [entry.record.report.location.lng, entry.record.report.location.lat] : undefined);
    if (!location) return result;
    const feature: ReportFeature = {
      type: 'Feature',
      geometry: { type: 'Point', coordinates: location },
      properties: {
        pkey,
        created_at: result.retraction.created_at,
        source: archived?.properties.source ?? entry?.record.source ?? '',
        status: 'retracted',
        url: null,
        image_url: null,
        disaster_type: archived?.properties.disaster_type ?? entry?.record.report.disaster_type ?? 'flood',
        report_data: null,
        tags: archived?.properties.tags ?? { instance_region_code: null, local_area_id: null },
        title: '',
        text: '',
      },
    };
    events.retracted(feature);
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
