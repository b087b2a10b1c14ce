import os from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Every test's temporary files under one directory, removed when the run ends.
    globalSetup: ['test/support/tempRoot.ts'],
    // DuckDB and the servers under test are real; give slow shared machines room. A bound on a
    // hang, not on speed: beside another file, a bulk import's test took 49 s where alone it
    // took 31.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // Dates in assertions are UTC; pin the zone so a developer's TZ cannot change results.
    env: { TZ: 'UTC' },
    pool: 'forks',
    // Two files at a time even on two cores: the slow files mostly wait (on flush intervals,
    // visibility timeouts, killed processes' restarts), so a second file fills those waits.
    maxWorkers: Math.max(2, os.availableParallelism() - 1),
  },
});
