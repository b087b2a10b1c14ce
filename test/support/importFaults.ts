// Kill points of an import, for tests of what a resumed run finds: the runtime's own ledger,
// with its acceptances wrapped (the real ledger commits; the import may then be stopped).
import type { HeldRecord } from '../../src/ledger/ledger.js';
import type { ImportDeps } from '../../src/ops/importFile.js';
import type { Runtime } from '../../src/main/runtime.js';

/** The runtime's import dependencies with the ledger's acceptHeld replaced. */
export function withAcceptHeld(rt: Runtime, acceptHeld: ImportDeps['ledger']['acceptHeld']): ImportDeps {
  return {
    ...rt,
    ledger: {
      acceptHeld,
      renewHolds: (pkeys, holdUntilMs) => rt.ledger.renewHolds(pkeys, holdUntilMs),
      markArchived: (pkeys) => rt.ledger.markArchived(pkeys),
      reclaimHeldSpace: () => rt.ledger.reclaimHeldSpace(),
      retractions: (filter) => rt.ledger.retractions(filter),
    },
  };
}

/** The runtime's import dependencies, its ledger failing once it has committed the second batch (a kill before that batch is staged). */
export function stoppedAfterSecondAcceptance(rt: Runtime): ImportDeps {
  let calls = 0;
  return withAcceptHeld(rt, async (records: readonly HeldRecord[], receivedAt: string, holdUntilMs: number) => {
    const outcome = await rt.ledger.acceptHeld(records, receivedAt, holdUntilMs);
    if (++calls === 2) throw new Error('killed after the ledger committed');
    return outcome;
  });
}
