// An import's staged reports are its own to archive only while the ledger holds them for it. A
// run resumed after its hold ran out (or one whose round outlasted it) finds some of them queued
// by reconciliation meanwhile, and archived by a worker or about to be: those leave the staged
// files before they become parts, so every report is stored once, by one of the two.
import fs from 'node:fs/promises';
import { LIST, VARCHAR, listValue } from '@duckdb/node-api';
import { sqlString, type DuckDb } from '../archive/duckdb.js';
import { fsyncFile } from '../shared/files.js';
import type { AcceptanceLedger } from '../ledger/ledger.js';

/**
 * Renews the hold of every report in the staged `files` until `holdUntilMs`, and rewrites each
 * file without the reports the ledger no longer holds for the import (removes it when none is
 * left). Returns how many reports left, and the files still staged. A crash part-way leaves each
 * file whole (old or new, or gone); running it again renews and drops again.
 */
export async function keepHeld(db: DuckDb, ledger: Pick<AcceptanceLedger, 'renewHolds'>, files: readonly string[], holdUntilMs: number): Promise<{ dropped: number; files: string[] }> {
  let dropped = 0;
  const kept: string[] = [];
  // A file at a time: a staged file is a batch (thousands of reports), a round's files millions.
  for (const file of files) {
    const pkeys = await db.withConnection(async (conn) => ((await conn.runAndReadAll(`SELECT pkey FROM read_parquet(${sqlString(file)})`)).getColumnsJS()[0] ?? []) as string[]);
    const released = await ledger.renewHolds(pkeys, holdUntilMs);
    dropped += released.length;
    if (released.length === pkeys.length) {
      await fs.rm(file, { force: true });
      continue;
    }
    kept.push(file);
    if (released.length === 0) continue;
    const rewritten = `${file}.kept`;
    // An anti-join (hashed), not a list searched for each row.
    await db.withConnection((conn) =>
      conn.run(
        `COPY (SELECT * FROM read_parquet(${sqlString(file)}) WHERE pkey NOT IN (SELECT unnest($released))) TO ${sqlString(rewritten)} (FORMAT parquet, COMPRESSION zstd)`,
        { released: listValue(released) },
        { released: LIST(VARCHAR) },
      ),
    );
    // On disk before it takes the staged file's name: a power loss leaves one or the other whole.
    await fsyncFile(rewritten);
    await fs.rename(rewritten, file);
  }
  return { dropped, files: kept };
}
