// A benchmark module run in a new Node process of its own for one answer: the module, started
// with `--child` and its arguments, sends one message and ends.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** Runs `moduleUrl` (an `import.meta.url`) as `--child ...args`; its one message, once it has exited cleanly. */
export function forkedAnswer<T>(moduleUrl: string, args: string[]): Promise<T> {
  const child = fork(fileURLToPath(moduleUrl), ['--child', ...args], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    let answer: { value: T } | undefined;
    child.once('message', (m) => (answer = { value: m as T }));
    child.once('exit', (code) => (answer && code === 0 ? resolve(answer.value) : reject(new Error(`${fileURLToPath(moduleUrl)} exited with ${code} before its answer`))));
  });
}

/** In the child: the arguments after `--child`, or undefined when this process is not one. */
export function childArgs(): string[] | undefined {
  return process.argv[2] === '--child' && process.send ? process.argv.slice(3) : undefined;
}

/** In the child: sends the answer and lets the process end. */
export function answer(value: unknown): void {
  process.send!(value);
  process.disconnect();
}
