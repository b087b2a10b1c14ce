// The order test files start in. With timings from an earlier run vitest starts the longest
// first; with none (a fresh clone, as CI runs) it starts the largest first, which left short
// files of long waits (the fault suites: killed processes, restarts, visibility timeouts) to
// start last and run alone while the other worker sat idle. Without timings, those go first.
import path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const WAITING = `${path.sep}test${path.sep}faults${path.sep}`;

export default class FaultsFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const timed = files.every((f) => this.ctx.cache.getFileTestResults(`${f.project.name}:${path.relative(this.ctx.config.root, f.moduleId)}`));
    if (timed) return sorted;
    return [...sorted.filter((f) => f.moduleId.includes(WAITING)), ...sorted.filter((f) => !f.moduleId.includes(WAITING))];
  }
}
