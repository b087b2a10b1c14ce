import os from 'node:os';
import fs from 'node:fs';
import path from 'node:path';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

// The files that take minutes (each over a minute in CI), longest first. A fresh clone has no
// timings cached, so vitest would order by file size and could start one of these last, leaving
// the other worker idle for minutes; starting them first lets the short files fill in around them.
const SLOW_FILES = [
  'test/e2e/bulkImport.test.ts',
  'test/e2e/cli.test.ts',
  'test/faults/scaleOut.test.ts',
  'test/browser/explorer.test.ts',
  'test/faults/crash.test.ts',
  'test/e2e/awsWebhooks.test.ts',
  'test/e2e/durability.test.ts',
];

// A renamed file would silently lose its place: say so instead.
for (const file of SLOW_FILES) if (!fs.existsSync(file)) throw new Error(`vitest.config.ts: SLOW_FILES names ${file}, which is not there`);

class SlowFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (spec: TestSpecification): number => {
      const at = SLOW_FILES.indexOf(path.relative(spec.project.config.root, spec.moduleId).split(path.sep).join('/'));
      return at === -1 ? SLOW_FILES.length : at;
    };
    // Array.prototype.sort is stable: the rest keep vitest's own order (its cached timings, or size).
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b));
  }
}

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
    sequence: { sequencer: SlowFirst },
    // Two files at a time even on two cores: the slow files mostly wait (on flush intervals,
    // visibility timeouts, killed processes' restarts), so a second file fills those waits.
    maxWorkers: Math.max(2, os.availableParallelism() - 1),
  },
});
