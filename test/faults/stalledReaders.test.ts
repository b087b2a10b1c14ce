// Clients that stop reading a large answer: each holds one of the archive's few turns for heavy
// answers (admission.ts) for as long as its answer waits on it. Four of them, from four addresses,
// took every turn of a process for as long as they kept their connections open, and every other
// whole-window request got a 503. The server closes a connection whose client has taken none of
// its answer's bytes for HTTP_SEND_STALL_SECONDS; a client that reads slowly keeps its answer. And
// one address holds at most its share of the turns, however it reads: the others are left to the
// rest. Readers at many addresses that each take a trickle keep their turns until another answer
// waits: then the slowest below ARCHIVE_MIN_READ_KIB_PER_SECOND gives its turn up. The service
// runs behind one trusted proxy here, so X-Forwarded-For names each client.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildBenchStore } from '../../bench/synthetic.js';
import { defaultBoundaries } from '../../src/boundaries/defaultBoundaries.js';
import { CLI, runCli } from '../support/cli.js';
import { tempDir } from '../support/env.js';

const DAY = 86_400_000;
const FROM = Math.floor(Date.now() / DAY) * DAY - 4 * DAY;
const iso = (ms: number) => new Date(ms).toISOString();
/** Three closed days of 20,000 reports each: some 40 MB of GeoJSON, far more than the sockets' buffers hold. */
const WHOLE = `/reports/archive?start=${iso(FROM)}&end=${iso(FROM + 3 * DAY - 1000)}&format=geojson`;
const DAY_WINDOW = `start=${iso(FROM)}&end=${iso(FROM + DAY - 1000)}`;
const STALL_SECONDS = 3;
/**
 * The floor below which a reader's turn goes to a waiting answer (measured over STALL_SECONDS):
 * high here, as a reader on loopback far slower than it lets the server's writes wait on TCP's
 * window for longer than the stall time.
 */
const MIN_READ_KIB = 8192;

let dataDir: string;
let child: ChildProcess;
/** What the suite's service printed so far. */
let output: () => string;
let port: number;
/** The services started, stopped after the file. */
const children: ChildProcess[] = [];

/** A `serve` on the data dir with `env` besides the suite's; its port, and everything it printed so far. */
async function startServe(env: Record<string, string>): Promise<{ child: ChildProcess; port: number; output: () => string }> {
  const started = spawn(process.execPath, [CLI, 'serve'], {
    env: { PATH: process.env.PATH ?? '', DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'info', RATE_LIMIT_READ_PER_MINUTE: '100000', HTTP_SEND_STALL_SECONDS: String(STALL_SECONDS), TRUST_PROXY: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(started);
  let printed = '';
  started.stdout!.on('data', (d) => (printed += d));
  started.stderr!.on('data', (d) => (printed += d));
  const deadline = Date.now() + 30_000;
  for (;;) {
    const m = /listening on http:\/\/[^:]+:(\d+)/.exec(printed);
    if (m) return { child: started, port: Number(m[1]), output: () => printed };
    if (Date.now() > deadline) throw new Error(`the service did not start:\n${printed}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

beforeAll(async () => {
  dataDir = await tempDir('flood-stalled-');
  await buildBenchStore({ storeDir: path.join(dataDir, 'store'), reports: 60_000, startMs: FROM, days: 3, boundaries: await defaultBoundaries() });
  const compacted = await runCli(['compact', '--json'], { DATA_DIR: dataDir, RETIRE_GRACE_SECONDS: '0' });
  expect(compacted.code, compacted.stderr).toBe(0);
  // No floor for slow readers here: stalled clients give their turns up by the stall clock alone.
  ({ child, port, output } = await startServe({ ARCHIVE_MIN_READ_KIB_PER_SECOND: '0' }));
}, 180_000);

afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  if (dataDir) await fs.rm(dataDir, { recursive: true, force: true });
});

/**
 * A raw request for `target` from `client` (the address the proxy reports) whose client reads
 * `reads` bytes (none: it never reads) every `everyMs`; counts what arrived.
 */
function reader(target: string, client: string, reads?: { bytes: number; everyMs: number; agent: string }, at = port): { received: () => number; closed: Promise<void>; socket: net.Socket } {
  const socket = net.connect(at, '127.0.0.1');
  socket.on('error', () => undefined);
  let received = 0;
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.on('connect', () => {
    socket.write(`GET ${target} HTTP/1.1\r\nHost: x\r\nUser-Agent: ${reads?.agent ?? 'stalled-reader/1.0'}\r\nX-Forwarded-For: ${client}\r\nAccept-Encoding: identity\r\n\r\n`);
    if (!reads) return socket.pause();
    // Paused between reads: the kernel's buffers fill, and the server waits on this client.
    socket.pause();
    const timer = setInterval(() => {
      let got = 0;
      socket.resume();
      const take = (chunk: Buffer) => {
        received += chunk.length;
        got += chunk.length;
        if (got >= reads.bytes) {
          socket.pause();
          socket.off('data', take);
        }
      };
      socket.on('data', take);
    }, reads.everyMs);
    socket.once('close', () => clearInterval(timer));
  });
  socket.on('data', (chunk: Buffer) => {
    if (!reads) received += chunk.length;
  });
  return { received: () => received, closed, socket };
}

describe('clients that stop reading', () => {
  it('lose their connections, and their turns go to the next requests; a slow reader keeps its answer', async () => {
    // Four stalled clients at four addresses: every one of the process's turns for heavy answers.
    const stalled = Array.from({ length: 4 }, (_, i) => reader(WHOLE, `198.51.100.${i + 1}`));
    await new Promise((r) => setTimeout(r, 1_000));

    const res = await fetch(`http://127.0.0.1:${port}/reports/archive?${DAY_WINDOW}&format=csv`, { headers: { 'User-Agent': 'flood-tests/1.0' } });
    expect(res.status, await res.clone().text().then((t) => t.slice(0, 300))).toBe(200);
    const count = await fetch(`http://127.0.0.1:${port}/reports/archive/count?${DAY_WINDOW}`, { headers: { 'User-Agent': 'flood-tests/1.0' } });
    // Every report of the day, a line each after the header.
    expect((await res.text()).trimEnd().split('\n').length - 1).toBe(((await count.json()) as { result: { count: number } }).result.count);
    // The server closed the stalled ones (their turns went to the request above as each closed;
    // the last may close a little later): read now, each ends short of its answer (bounded here
    // to fail a server that keeps them open).
    const aborted = () => output().split('\n').filter((l) => l.includes('"userAgent":"stalled-reader/1.0"') && l.includes('"aborted":true')).length;
    for (const until = Date.now() + 15_000; aborted() < stalled.length && Date.now() < until; ) await new Promise((r) => setTimeout(r, 100));
    expect(aborted()).toBe(stalled.length);
    for (const s of stalled) s.socket.resume();
    const closedAll = await Promise.race([Promise.all(stalled.map((s) => s.closed)).then(() => true), new Promise<false>((r) => setTimeout(() => r(false), 15_000))]);
    expect(closedAll).toBe(true);
    const whole = (await (await fetch(`http://127.0.0.1:${port}${WHOLE}`, { headers: { 'User-Agent': 'flood-tests/1.0', 'Accept-Encoding': 'identity' } })).arrayBuffer()).byteLength;
    for (const s of stalled) expect(s.received()).toBeLessThan(whole);

    // A client that reads in bursts (512 KiB every quarter second, pausing between) keeps its
    // answer past twice the stall time: its writes complete, if not one by one.
    const slow = reader(WHOLE, '198.51.100.9', { bytes: 512 * 1024, everyMs: 250, agent: 'slow-reader/1.0' });
    await new Promise((r) => setTimeout(r, 1_000));
    const before = slow.received();
    await new Promise((r) => setTimeout(r, 2 * STALL_SECONDS * 1000));
    expect(slow.received()).toBeGreaterThan(before);
    // The server has not ended it: its access log has no line for it yet.
    expect(output()).not.toMatch(/slow-reader/);
    slow.socket.destroy();
    expect(child.exitCode).toBeNull();
  }, 120_000);

  it("hold no more than their address's share of the turns: the same address gets a 429, another its answer", async () => {
    const from = (client: string) => ({ 'User-Agent': 'flood-tests/1.0', 'X-Forwarded-For': client });
    // Two clients that read in bursts of 256 KiB (so the server keeps their answers for some 25 s,
    // making progress within its stall time), from one address: its share (half of the four turns).
    const held = Array.from({ length: 2 }, () => reader(WHOLE, '203.0.113.7', { bytes: 256 * 1024, everyMs: 250, agent: 'held-reader/1.0' }));
    await new Promise((r) => setTimeout(r, 1_000));
    try {
      // A third from that address waits for one of its own answers (ARCHIVE_QUEUE_SECONDS, 10 s),
      // then is told why, before any byte.
      const third = await fetch(`http://127.0.0.1:${port}/reports/archive?${DAY_WINDOW}&format=csv`, { headers: from('203.0.113.7') });
      expect(third.status).toBe(429);
      expect(third.headers.get('retry-after')).toMatch(/^\d+$/);
      const problem = (await third.json()) as { statusCode: number; error: string; message: string };
      expect(problem).toMatchObject({ statusCode: 429, error: 'Too Many Requests' });
      expect(problem.message).toMatch(/This address already has 2 whole-window answers under way/);
      // Two other addresses get theirs at once: the turns the first one cannot take are theirs.
      const others = await Promise.all(
        ['203.0.113.8', '203.0.113.9'].map(async (client) => {
          const res = await fetch(`http://127.0.0.1:${port}/reports/archive?${DAY_WINDOW}&format=csv`, { headers: from(client) });
          return [res.status, (await res.text()).length] as const;
        }),
      );
      for (const [status, length] of others) {
        expect(status).toBe(200);
        expect(length).toBeGreaterThan(1_000_000);
      }
    } finally {
      for (const h of held) h.socket.destroy();
    }
    expect(child.exitCode).toBeNull();
  }, 60_000);

  it('that read a trickle keep their turns until another answer waits: then the slowest is cut and its turn goes on', async () => {
    // A service of its own, with a floor for slow readers.
    const floored = await startServe({ ARCHIVE_MIN_READ_KIB_PER_SECOND: String(MIN_READ_KIB) });
    const cuts = () => floored.output().split('\n').filter((l) => l.includes('whole-window answer cut')).length;
    const before = cuts();
    // Four readers at four addresses, each taking 512 KiB every quarter second (2 MiB/s, under the
    // floor but never stalled): every turn of the process.
    const trickles = Array.from({ length: 4 }, (_, i) => reader(WHOLE, `192.0.2.${i + 1}`, { bytes: 512 * 1024, everyMs: 250, agent: 'trickle-reader/1.0' }, floored.port));
    try {
      await new Promise((r) => setTimeout(r, (STALL_SECONDS + 1.5) * 1000));
      // Nobody waited: none was cut, though each has read slowly for longer than the window.
      expect(cuts()).toBe(before);
      for (const t of trickles) expect(t.socket.destroyed).toBe(false);
      // An answer for a fifth address: without a cut it would wait ARCHIVE_QUEUE_SECONDS and get a 503.
      const res = await fetch(`http://127.0.0.1:${floored.port}/reports/archive?${DAY_WINDOW}&format=csv`, { headers: { 'User-Agent': 'flood-tests/1.0', 'X-Forwarded-For': '192.0.2.99' } });
      expect(res.status, await res.clone().text().then((t) => t.slice(0, 300))).toBe(200);
      expect((await res.text()).length).toBeGreaterThan(1_000_000);
      expect(cuts()).toBeGreaterThan(before);
    } finally {
      for (const t of trickles) t.socket.destroy();
    }
    expect(floored.child.exitCode).toBeNull();
  }, 60_000);
});
