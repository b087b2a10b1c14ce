// A command run at a terminal (a pseudo-terminal from Python's pty module, as a person's shell
// gives it): what it shows there, and how it ends, after `typed` is typed once it asks.
import { spawn } from 'node:child_process';
import { CLI } from './cli.js';

const TYPIST = `
import os, pty, select, signal, sys, time
prompt, typed, args = sys.argv[1].encode(), sys.argv[2].encode(), sys.argv[3:]
pid, fd = pty.fork()
if pid == 0:
    os.execvp(args[0], args)
seen, status, end = b'', None, time.time() + 60
def read():
    global seen
    if select.select([fd], [], [], 0.05)[0]:
        try: seen += os.read(fd, 4096)
        except OSError: pass
while prompt not in seen and time.time() < end: read()
os.write(fd, typed)
while status is None and time.time() < end:
    read()
    done, code = os.waitpid(pid, os.WNOHANG)
    if done: status = code
for _ in range(5): read()
sys.stdout.write(seen.decode(errors='replace'))
if status is None: print('\\nEXIT null timeout')
elif os.WIFSIGNALED(status): print('\\nEXIT null ' + signal.Signals(os.WTERMSIG(status)).name)
else: print('\\nEXIT %d null' % os.WEXITSTATUS(status))
`;

/** Runs the CLI with `args` at a terminal and types `typed` once `prompt` shows: its screen, and its exit code or signal. */
export function cliAtTerminal(args: string[], env: Record<string, string>, prompt: string, typed: string): Promise<{ screen: string; code: number | null; signal: string | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn('python3', ['-c', TYPIST, prompt, typed, process.execPath, CLI, ...args], { env: { PATH: process.env.PATH ?? '', TZ: 'UTC', LOG_LEVEL: 'silent', ...env } });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.on('error', reject);
    child.on('exit', () => {
      const at = out.lastIndexOf('\nEXIT ');
      const [code, signal] = out.slice(at + '\nEXIT '.length).trim().split(' ');
      resolve({ screen: out.slice(0, at), code: code === 'null' ? null : Number(code), signal: signal === 'null' ? null : (signal ?? null) });
    });
  });
}
