// What the archive reader needs of the ledger's retractions: the reports of a window that were
// retracted and whose parts still hold their personal fields, so every answer leaves them out
// (or shows them as tombstones) from the moment the retraction is answered.
import type { RetractedReport } from '../archive/query.js';
import type { IngestLedger } from './ledger.js';

export async function unpurgedRetractions(ledger: Pick<IngestLedger, 'retractions'>, fromMs: number, toMs: number): Promise<RetractedReport[]> {
  const out: RetractedReport[] = [];
  for await (const r of ledger.retractions({ createdFromMs: fromMs, createdToMs: toMs, unpurgedOnly: true })) out.push({ pkey: r.pkey, createdMs: Date.parse(r.created_at) });
  return out;
}
