import os from 'node:os';
import fs from 'node:fs';
import path from 'node:path';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

// The files that take minutes, started first, in this order: a fresh clone has no timings cached,
// so vitest orders by file size and started the scale-out suite (six services and moto, three
// minutes) last, the other worker idle meanwhile. Not the longest two side by side: the
// scale-out suite beside the bulk import's S3 half starved it into timeouts; beside the CLI's
// tests (one process at a time) it is not, and the bulk import follows it.
const SLOW_FILES = ['test/faults/scaleOut.test.ts', 'test/e2e/cli.test.ts', 'test/e2e/bulkImport.test.ts'];

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
