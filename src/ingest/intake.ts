// Durable acceptance of partner reports (invariants 1 and 2 of docs/architecture.md): the
// ledger records the report (first version wins) and queues it, and only then does the caller
// answer 2xx.
import type { AcceptanceLedger } from '../ledger/ledger.js';
import type { PartnerReport } from '../partners/partnerReport.js';
import { pkeyOf, SOURCE } from '../store/layout.js';

export type { AcceptResult, IngestRecord, QueueEnvelope } from '../ledger/ledger.js';
export { parseRecord } from '../ledger/ledger.js';
import type { AcceptResult } from '../ledger/ledger.js';

export class Intake {
  constructor(
    private readonly ledger: AcceptanceLedger,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * `partner`: the name of the key that posted it (the only partner that may retract it, and whose
   * post_ids these are); none for an operators' import. Throws PkeyTakenError (no partner only).
   */
  accept(report: PartnerReport, partner?: string, source = SOURCE): Promise<AcceptResult> {
    return this.ledger.accept({
      v: 1,
      pkey: pkeyOf(source, report.post_id, partner),
      source,
      post_id: report.post_id,
      received_at: new Date(this.now()).toISOString(),
      ...(partner !== undefined && { partner }),
      report,
    });
  }
}
