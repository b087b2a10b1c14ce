import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const root = path.dirname(fileURLToPath(import.meta.url));

export default defineConfig({
  // Tests import the build (dist/, made by freshBuild.ts when older than a source), loaded by Node
  // itself, as the processes under test run it: through the test runner's transform, importing
  // the service took each test file about twice as long (docs/testing.md).
  resolve: { alias: [{ find: /^(?:\.\.\/)+(src|bench|jobs|infra)\/(.*)$/, replacement: `${root}/dist/$1/$2` }] },
  test: {
    include: ['test/**/*.test.ts'],
    // The build made fresh first; every test's temporary files under one directory, removed when the run ends.
    globalSetup: ['test/support/freshBuild.ts', 'test/support/tempRoot.ts'],
    server: { deps: { external: [/\/dist\//, /\/node_modules\//] } },
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
