// A bulk job's runtime (reprocess, import) runs each DuckDB query on one thread, as it runs its
// parts' queries side by side; the service's keeps two for its one large answer at a time.
import { describe, expect, it } from 'vitest';
import { BULK_JOB } from '../../src/main/cli/archiveCommands.js';
import type { Runtime } from '../../src/main/runtime.js';
import { testConfig, testRuntime } from '../support/env.js';

async function threadsOf(rt: Runtime): Promise<number> {
  try {
    return await rt.db.withConnection(async (conn) => Number((await conn.runAndReadAll(`SELECT current_setting('threads')`)).getRowsJS()[0]![0]));
  } finally {
    await rt.close();
  }
}

describe('DuckDB threads a query', () => {
  it('one in a bulk job, two in the service', async () => {
    expect(await threadsOf(await testRuntime(await testConfig('embedded'), undefined, BULK_JOB))).toBe(1);
    expect(await threadsOf(await testRuntime(await testConfig('embedded')))).toBe(2);
  });
});
