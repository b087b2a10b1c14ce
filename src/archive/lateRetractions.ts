// Retractions made while parts are rewritten (compaction, reprocess). A purge beside the rewrite
// may mark one purged before the new part stands, and readers then hide a purged report by its
// status alone: the new part must hold it as a tombstone. A rewrite reads the retractions of its
// span when it reads the parts, and again around storing the new part; a new one since has the
// part written again.
import fs from 'node:fs/promises';
import type { RetractionLedger } from '../ledger/ledger.js';
import type { DuckDb } from './duckdb.js';
import { mergeParts } from './readRows.js';

/** A span of created_at, both ends included. */
export interface CreatedSpan {
  fromMs: number;
  toMs: number;
}

/** The pkeys retracted among the reports created in `span`. */
export async function retractedIn(ledger: Pick<RetractionLedger, 'retractions'>, span: CreatedSpan): Promise<string[]> {
  const pkeys: string[] = [];
  for await (const r of ledger.retractions({ createdFromMs: span.fromMs, createdToMs: span.toMs })) pkeys.push(r.pkey);
  return pkeys;
}

/**
 * Reads the retractions of `span` again and, when one is not among `known`, rewrites `file` in
 * place with all of them as tombstones. Returns what is known now: `known` itself (the same
 * array) when nothing was new, so a caller tells by identity whether the file changed.
 */
export async function withLaterRetractions(
  deps: { db: DuckDb; ledger: Pick<RetractionLedger, 'retractions'> },
  file: string,
  span: CreatedSpan,
  known: readonly string[],
): Promise<readonly string[]> {
  const now = await retractedIn(deps.ledger, span);
  const seen = new Set(known);
  if (!now.some((pkey) => !seen.has(pkey))) return known;
  const again = `${file}.again`;
  try {
    await mergeParts(deps.db, [file], again, now);
    await fs.rename(again, file);
  } finally {
    await fs.rm(again, { force: true });
  }
  return now;
}
