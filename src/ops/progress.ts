// Progress for long ops work: a bar on a terminal, plain log lines otherwise.
import cliProgress from 'cli-progress';

export interface Progress {
  start(total: number): void;
  tick(n?: number): void;
  stop(): void;
}

export function createProgress(label: string, stream: NodeJS.WriteStream = process.stderr): Progress {
  if (stream.isTTY) {
    const bar = new cliProgress.SingleBar(
      { format: `${label} [{bar}] {value}/{total} {percentage}% eta {eta_formatted}`, stream, clearOnComplete: false },
      cliProgress.Presets.shades_classic,
    );
    return {
      start: (total) => bar.start(total, 0),
      tick: (n = 1) => bar.increment(n),
      stop: () => bar.stop(),
    };
  }
  let total = 0;
  let done = 0;
  let lastLog = 0;
  return {
    start(t) {
      total = t;
      stream.write(`${label}: ${total} to do\n`);
    },
    tick(n = 1) {
      done += n;
      if (Date.now() - lastLog > 5000) {
        lastLog = Date.now();
        stream.write(`${label}: ${done}/${total}\n`);
      }
    },
    stop() {
      stream.write(`${label}: ${done}/${total} done\n`);
    },
  };
}
