// Progress for long ops work (import, reprocess, release, export): a bar with the rate and the
// time left on a terminal; otherwise a JSON line every few seconds (and at the start and the end)
// that a log pipeline can parse: {"progress":"import","done":…,"total":…,"rate":…,"eta_s":…}.
import cliProgress from 'cli-progress';

export interface Progress {
  /** Starts (or, for the next pass of the same work, starts again) from nothing done. */
  start(total: number): void;
  tick(n?: number): void;
  stop(): void;
}

/** How often a log line is written while the work goes on. */
const LOG_EVERY_MS = 5_000;

export function createProgress(label: string, stream: NodeJS.WriteStream = process.stderr, now: () => number = Date.now): Progress {
  if (stream.isTTY) {
    const bar = new cliProgress.SingleBar(
      { format: `${label} [{bar}] {value}/{total} {percentage}% {rate}/s eta {eta_formatted}`, stream, clearOnComplete: false },
      cliProgress.Presets.shades_classic,
    );
    let startedAt = 0;
    let done = 0;
    return {
      start: (total) => {
        startedAt = now();
        done = 0;
        bar.start(total, 0, { rate: 0 });
      },
      tick: (n = 1) => {
        done += n;
        bar.increment(n, { rate: Math.round(done / Math.max(0.001, (now() - startedAt) / 1000)) });
      },
      stop: () => bar.stop(),
    };
  }
  let total = 0;
  let done = 0;
  let startedAt = 0;
  let lastLog = 0;
  const line = (state: 'started' | 'running' | 'done') => {
    const seconds = Math.max(0.001, (now() - startedAt) / 1000);
    const rate = done / seconds;
    const eta = total > 0 && rate > 0 && state === 'running' ? Math.round((total - done) / rate) : undefined;
    stream.write(`${JSON.stringify({ progress: label, state, done, total, rate: Math.round(rate), ...(eta !== undefined && { eta_s: eta }), elapsed_s: Math.round(seconds) })}\n`);
  };
  return {
    start(t) {
      total = t;
      done = 0;
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
      line('done');
    },
  };
}
