// The shaped proxy in a process of its own, for the benchmarks: its pacing timers then run beside
// the benchmark's client, not in the client's event loop (S3's network is not in the client's
// process either; in one process a client reading a gigabyte delayed the pacing, and the proxy
// the client). Started with `--child TARGET SHAPE` it is that process.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { childArgs } from './forked.js';
import { shapedProxy, type Shape } from './shapedProxy.js';

export interface ProxyCounts {
  /** Bytes sent back to clients so far. */
  bytesDown: number;
  /** Answers begun so far: one per request. */
  answers: number;
}

export interface ProxyProcess {
  url: string;
  /** The proxy's process (its CPU is taken from the same cores as the service's). */
  pid: number;
  counts(): Promise<ProxyCounts>;
  close(): Promise<void>;
}

export async function startShapedProxyProcess(target: string, shape: Shape): Promise<ProxyProcess> {
  const child = fork(fileURLToPath(import.meta.url), ['--child', target, JSON.stringify(shape)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const url = await new Promise<string>((resolve, reject) => {
    child.once('message', (m) => resolve((m as { url: string }).url));
    child.once('exit', (code) => reject(new Error(`the shaped proxy exited with ${code}`)));
  });
  child.removeAllListeners('exit');
  return {
    url,
    pid: child.pid!,
    counts: () =>
      new Promise<ProxyCounts>((resolve) => {
        child.once('message', (m) => resolve(m as ProxyCounts));
        child.send('counts');
      }),
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

const child = childArgs();
if (child) {
  const proxy = await shapedProxy(child[0]!, JSON.parse(child[1]!) as Shape);
  process.on('message', () => process.send!({ bytesDown: proxy.bytesDown(), answers: proxy.answers() } satisfies ProxyCounts));
  // The parent gone, so is this process.
  process.on('disconnect', () => process.exit(0));
  process.send!({ url: proxy.url });
}
