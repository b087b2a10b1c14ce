// Making the ledger's file private again (as each runtime's opening of the ledger does, and `all`
// opens two) must keep the locks this process's connections hold on it: closing any descriptor of
// the file drops them all, and a backup or CLI command beside the service then takes the live
// ledger for idle (it deleted its write-ahead log). Seen from another process, as they see it.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { privateDatabaseFile } from '../../src/shared/files.js';
import { openLedgerDb } from '../../src/sqlite/database.js';
import { tempDir } from '../support/env.js';

/** Whether another process finds SQLite's shared-lock range of `file` locked (a reader holds it). */
async function sharedRangeHeld(file: string): Promise<boolean> {
  const probe = [
    'import fcntl, os, sys',
    'fd = os.open(sys.argv[1], os.O_RDWR)',
    'try:',
    // SQLite's SHARED lock: a read lock on the 510 bytes after its pending and reserved bytes (at 1 GiB).
    '    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 510, 0x40000002, 0)',
    "    print('free')",
    'except OSError:',
    "    print('held')",
  ].join('\n');
  const { stdout } = await promisify(execFile)('python3', ['-c', probe, file]);
  return stdout.trim() === 'held';
}

describe('the ledger database beside other processes', () => {
  it("keeps this process's locks on it when its file is made private again", async () => {
    const dir = await tempDir();
    const file = path.join(dir, 'ledger.sqlite');
    const db = openLedgerDb(dir);
    try {
      db.prepare("INSERT INTO meta (name, value) VALUES ('probe', 'written')").run();
      expect(await sharedRangeHeld(file)).toBe(true);
      privateDatabaseFile(file);
      expect(await sharedRangeHeld(file)).toBe(true);
    } finally {
      db.close();
    }
    expect(await sharedRangeHeld(file)).toBe(false);
  });
});
