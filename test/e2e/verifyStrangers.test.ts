// verify over a block whose every archived report the ledger does not know (a ledger lost or
// restored from an old backup): each is listed, past the 120,000-odd a call's arguments hold.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { newPartKey } from '../../src/store/layout.js';
import { verify } from '../../src/ops/verify.js';
import { runCli } from '../support/cli.js';
import { testConfig, testRuntime } from '../support/env.js';

const STRANGERS = 150_000;

describe('verify of an archive the ledger does not know', () => {
  it('lists every one of a block\'s 150,000 reports as unexpected, and loses none', async () => {
    const rt = await testRuntime(await testConfig('embedded'));
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'strangers-'));
    let closed = false;
    try {
      // A part stored behind the system's back: the columns verify reads, a report a second.
      const hourMs = Date.parse('2026-10-05T03:00:00Z');
      const file = path.join(dir, 'part.parquet');
      await rt.db.withConnection((conn) =>
        conn.run(
          `COPY (SELECT 'stranger-' || lpad(i::VARCHAR, 6, '0') AS pkey, make_timestamptz(${hourMs * 1000}::BIGINT + (i % 3600) * 1000000) AS created_at, 'confirmed' AS status
                 FROM range(${STRANGERS}) t(i)) TO '${file}' (FORMAT parquet)`,
        ),
      );
      await rt.store.put(newPartKey(hourMs), await fs.readFile(file));
      const result = await verify(rt, { fromMs: Date.parse('2026-10-05T00:00:00Z'), toMs: Date.parse('2026-10-05T23:59:59.999Z') });
      expect(result.unexpected).toHaveLength(STRANGERS);
      expect(result.unexpected[0]).toBe('stranger-000000');
      expect(result.unexpected.at(-1)).toBe(`stranger-${String(STRANGERS - 1).padStart(6, '0')}`);
      expect(result.missing).toEqual([]);
      // The CLI's --json answer whole through a pipe (some 3 MB), as a script reads it: cut at 64 KiB, it was no JSON.
      await rt.close();
      closed = true;
      const cli = await runCli(['verify', '--from', '2026-10-05', '--to', '2026-10-05', '--json'], { DATA_DIR: rt.config.dataDir });
      expect(cli.code).toBe(0);
      expect((JSON.parse(cli.stdout) as { unexpected: string[] }).unexpected).toHaveLength(STRANGERS);
    } finally {
      if (!closed) await rt.close();
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
