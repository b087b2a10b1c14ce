// Progress lines as a log pipeline reads them when the output is not a terminal: the rate and
// the time left, at the start, every few seconds and at the end.
import { describe, expect, it } from 'vitest';
import { createProgress } from '../../src/ops/progress.js';

describe('progress off a terminal', () => {
  it('writes JSON lines with the rate and the time left', () => {
    const written: string[] = [];
    const stream = { isTTY: false, write: (s: string) => written.push(s) } as unknown as NodeJS.WriteStream;
    let clock = 1_000_000;
    const progress = createProgress('import', stream, () => clock);
    progress.start(1_000);
    clock += 2_000;
    progress.tick(100); // too soon for a line
    clock += 3_000;
    progress.tick(150); // 250 done in 5 s: 50/s, 750 left: 15 s
    clock += 1_000;
    progress.tick(750);
    progress.stop();
    const lines = written.map((l) => JSON.parse(l));
    expect(lines).toEqual([
      { progress: 'import', state: 'started', done: 0, total: 1_000, rate: 0, elapsed_s: 0 },
      { progress: 'import', state: 'running', done: 250, total: 1_000, rate: 50, eta_s: 15, elapsed_s: 5 },
      { progress: 'import', state: 'done', done: 1_000, total: 1_000, rate: 167, elapsed_s: 6 },
    ]);
  });

  it('names each pass of a job, and says a pass is done once', () => {
    const written: string[] = [];
    const stream = { isTTY: false, write: (s: string) => written.push(s) } as unknown as NodeJS.WriteStream;
    const progress = createProgress('import', stream, () => 0);
    progress.start(10, 'reading bytes');
    progress.tick(10);
    progress.stop();
    progress.start(3, 'accepting records');
    progress.tick(3);
    progress.stop();
    // The job's own end, after its last pass's.
    progress.stop();
    expect(written.map((l) => JSON.parse(l)).map((l) => [l.pass, l.state, l.done])).toEqual([
      ['reading bytes', 'started', 0],
      ['reading bytes', 'done', 10],
      ['accepting records', 'started', 0],
      ['accepting records', 'done', 3],
    ]);
  });
});
