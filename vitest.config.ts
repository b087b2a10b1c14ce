import os from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // DuckDB and the servers under test are real; give slow shared machines room.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Dates in assertions are UTC; pin the zone so a developer's TZ cannot change results.
    env: { TZ: 'UTC' },
    pool: 'forks',
    // Two files at a time even on two cores: the slow files mostly wait (on flush intervals,
    // visibility timeouts, killed processes' restarts), so a second file fills those waits.
    maxWorkers: Math.max(2, os.availableParallelism() - 1),
  },
});
