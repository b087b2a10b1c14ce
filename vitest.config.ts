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
  },
});
