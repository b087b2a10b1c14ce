// A client that takes an answer's headers, then reads nothing until told to, with a small
// receive buffer (Python sets SO_RCVBUF before connecting, which Node cannot): loopback's buffers
// grow to tens of MB otherwise, and would take a whole answer while the client "waits".
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';

export interface StalledAnswer {
  status: number;
  /** Reads the rest: its body, and whether the connection closed before the answer's end. */
  read(): Promise<{ status: number; body: Buffer; cut: boolean }>;
}

const SCRIPT = `
import http.client, socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32768); s.connect((sys.argv[1], int(sys.argv[2])))
c = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2])); c.sock = s
c.request('GET', sys.argv[3], headers={'User-Agent': sys.argv[5], 'Accept-Encoding': 'identity'})
r = c.getresponse(); print(r.status, flush=True)
sys.stdin.readline()
got = []; cut = 0
try:
  while True:
    b = r.read(65536)
    if not b: break
    got.append(b)
  # A read of a part ends early without an error: fewer bytes than the length said.
  length = r.getheader('Content-Length')
  if length is not None and sum(map(len, got)) < int(length): cut = 1
except http.client.IncompleteRead as e:
  got.append(e.partial); cut = 1
except OSError:
  cut = 1  # reset: the answer cut all the same
open(sys.argv[4], 'wb').write(b''.join(got)); print(cut, flush=True)
`;

/** GETs `pathAndQuery` of `baseUrl`; resolves with the status once the headers are in. `scratch`: a directory for the body. */
export function stalledGet(baseUrl: string, pathAndQuery: string, scratch: string, userAgent: string): Promise<StalledAnswer> {
  const { hostname, port } = new URL(baseUrl);
  const out = path.join(scratch, `stalled-${Math.random().toString(36).slice(2)}.body`);
  const child = spawn('python3', ['-c', SCRIPT, hostname, port, pathAndQuery, out, userAgent], { stdio: ['pipe', 'pipe', 'inherit'] });
  // One listener: each line once, and only whole lines (a line may come in two writes).
  let text = '';
  let exited: number | null | undefined;
  const waiting = new Set<() => void>();
  child.stdout!.on('data', (d) => {
    text += d;
    for (const wake of waiting) wake();
  });
  // 'close', not 'exit': after the last of its output is read.
  child.on('close', (code) => {
    exited = code;
    for (const wake of waiting) wake();
  });
  const lines = (n: number) =>
    new Promise<string[]>((resolve, reject) => {
      const wake = () => {
        const whole = text.split('\n').slice(0, -1);
        if (whole.length >= n) resolve(whole);
        else if (exited !== undefined) reject(new Error(`client exited ${exited}`));
        else return;
        waiting.delete(wake);
      };
      waiting.add(wake);
      wake();
    });
  return lines(1).then(([status]) => ({
    status: Number(status),
    read: async () => {
      child.stdin!.end('\n');
      const [, cut] = await lines(2);
      return { status: Number(status), body: await fs.readFile(out), cut: cut === '1' };
    },
  }));
}
