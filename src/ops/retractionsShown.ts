// Retractions the ledger holds whose report the event log still shows: its archived event, with
// the personal fields, replayed by the stream and CAP. An event log restored from a backup older
// than the retraction is one way; an announcement that failed after the ledger's write is another
// (a repeated DELETE or the purge mends that one). Verify lists them; its repair announces each
// retraction as the DELETE did, which takes the archived event out.
import type { EventFeed } from '../events/events.js';
import { retractionFeature } from '../events/retractions.js';
import type { RetractionLedger, RetractionRef } from '../ledger/ledger.js';
import { mapLimit } from './concurrency.js';

/** A retraction younger than this may still be on its way to the log (a DELETE between its two writes). */
export const ANNOUNCE_SETTLE_MS = 60_000;

export type ShownFeed = Pick<EventFeed, 'archivedReport' | 'retracted'>;

/** Retractions of reports created in [fromMs, toMs], made before `beforeMs`, whose archived event the log still holds. */
export async function retractionsShown(ledger: Pick<RetractionLedger, 'retractions'>, feed: ShownFeed, window: { fromMs: number; toMs: number }, beforeMs: number): Promise<RetractionRef[]> {
  const made: RetractionRef[] = [];
  for await (const r of ledger.retractions({ createdFromMs: window.fromMs, createdToMs: window.toMs })) if (Date.parse(r.retracted_at) < beforeMs) made.push(r);
  const shown = await mapLimit(made, 16, async (r) => (await feed.archivedReport(r.pkey)) !== undefined);
  return made.filter((_, i) => shown[i]);
}

/** Announces these retractions, each from its report's archived event; returns how many it announced. */
export async function announceShown(feed: ShownFeed, shown: readonly RetractionRef[]): Promise<number> {
  const announced = await mapLimit(shown, 16, async (r) => {
    const archived = (await feed.archivedReport(r.pkey))?.feature;
    // Taken out meanwhile (a repeated DELETE, the purge): nothing left to do.
    if (!archived) return false;
    const { source, disaster_type, tags } = archived.properties;
    await feed.retracted(retractionFeature(r.pkey, r.created_at, archived.geometry.coordinates, { source, disaster_type, tags }));
    return true;
  });
  return announced.filter(Boolean).length;
}
