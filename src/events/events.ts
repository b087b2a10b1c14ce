// The port the worker speaks to after a flush has put its parts: "these reports are archived".
// The embedded adapter records them in the event log (webhooks, live stream, CAP); on AWS the
// SNS adapter publishes them. Recording is idempotent per report, so a flush repeated after a
// crash announces nothing twice.
import type { ArchiveRow } from '../archive/row.js';

export const EVENT_TYPES = ['archived', 'retracted'] as const;
export type EventKind = (typeof EVENT_TYPES)[number];

/** CloudEvents `type` of each kind (reverse-DNS, versioned with the payload). */
export const CLOUDEVENT_TYPE: Record<EventKind, string> = {
  archived: 'ph.floodarchive.report.archived.v1',
  retracted: 'ph.floodarchive.report.retracted.v1',
};

export interface ArchiveEvents {
  /** Called after the parts holding `rows` are durable and before the ledger says so. */
  archived(rows: readonly ArchiveRow[]): Promise<void>;
}

/** Several sinks in turn (the event log and SNS may both be configured). */
export function allOf(sinks: readonly ArchiveEvents[]): ArchiveEvents | undefined {
  if (sinks.length === 0) return undefined;
  if (sinks.length === 1) return sinks[0];
  return {
    async archived(rows) {
      for (const s of sinks) await s.archived(rows);
    },
  };
}
