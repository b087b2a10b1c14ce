import os from 'node:os';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Vitest's own order (slowest first once it has timings, else largest first), with the file that
 * takes minutes started first: in a fresh clone, which has no timings, it came last and ran alone.
 */
class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const first = (spec: TestSpecification) => spec.moduleId.endsWith('test/faults/scaleOut.test.ts');
    return [...sorted.filter(first), ...sorted.filter((spec) => !first(spec))];
  }
}

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
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
    sequence: { sequencer: LongestFirst },
  },
});
