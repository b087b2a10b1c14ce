// Progress for long ops work (import, reprocess, release, export): a bar with the rate and the
// time left on a terminal; otherwise a JSON line every few seconds (and at the start and the end)
// that a log pipeline can parse: {"progress":"import","pass":"accepting records","done":…,"total":…,"rate":…,"eta_s":…}.
import cliProgress from 'cli-progress';

export interface Progress {
  /**
   * Starts (or, for the next pass of the same work, starts again) from nothing done; `pass`
   * names it and what it counts ("reading bytes", "accepting records") where a job has several.
   */
  start(total: number, pass?: string): void;
  tick(n?: number): void;
  stop(): void;
}

/** How often a log line is written while the work goes on. */
const LOG_EVERY_MS = 5_000;

export function createProgress(label: string, stream: NodeJS.WriteStream = process.stderr, now: () => number = Date.now): Progress {
  if (stream.isTTY) {
    const bar = new cliProgress.SingleBar(
      { format: `{label} [{bar}] {value}/{total} {percentage}% {rate}/s eta {eta_formatted}`, stream, clearOnComplete: false },
      cliProgress.Presets.shades_classic,
    );
    let startedAt = 0;
    let done = 0;
    let running = false;
    return {
      start: (total, pass) => {
        // The pass before ends on its own line.
        if (running) bar.stop();
        running = true;
        startedAt = now();
        done = 0;
        bar.start(total, 0, { rate: 0, label: pass === undefined ? label : `${label}: ${pass}` });
      },
      tick: (n = 1) => {
        done += n;
        bar.increment(n, { rate: Math.round(done / Math.max(0.001, (now() - startedAt) / 1000)) });
      },
      stop: () => {
        if (running) bar.stop();
        running = false;
      },
    };
  }
  let total = 0;
  let done = 0;
  let startedAt = 0;
  let lastLog = 0;
  let pass: string | undefined;
  let running = false;
  const line = (state: 'started' | 'running' | 'done') => {
    const seconds = Math.max(0.001, (now() - startedAt) / 1000);
    const rate = done / seconds;
    const eta = total > 0 && rate > 0 && state === 'running' ? Math.round((total - done) / rate) : undefined;
    stream.write(`${JSON.stringify({ progress: label, ...(pass !== undefined && { pass }), state, done, total, rate: Math.round(rate), ...(eta !== undefined && { eta_s: eta }), elapsed_s: Math.round(seconds) })}\n`);
  };
  return {
    start(t, named) {
      total = t;
      done = 0;
      pass = named;
      running = true;
      startedAt = lastLog = now();
      line('started');
    },
    tick(n = 1) {
      done += n;
      if (now() - lastLog >= LOG_EVERY_MS) {
        lastLog = now();
        line('running');
      }
    },
    stop() {
      // Once a pass: a job that stops its last pass and then itself says "done" once.
      if (running) line('done');
      running = false;
    },
  };
}
