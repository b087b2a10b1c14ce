// The compiled entry point as a child process, as every benchmark drives it.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** dist/src/main/flood-archive.cjs (the executable), beside this file's dist/bench/. */
const here = path.dirname(fileURLToPath(import.meta.url));
/** The compiled CLI (`npm run build`), also when this module runs from source (the tests). */
export const CLI = import.meta.url.endsWith('.ts') ? path.resolve(here, '../dist/src/main/flood-archive.cjs') : path.resolve(here, '../src/main/flood-archive.cjs');

export interface Server {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

export interface StartOptions {
  /** all, serve or worker. */
  role?: string;
  /** Another build's cli.js, to compare with. */
  cli?: string;
  /** A worker serves nothing: it is up once spawned (what it misses meanwhile waits in the queue). */
  listens?: boolean;
  apiKey: string;
  logLevel?: string;
}

export async function startServer(env: Record<string, string>, options: StartOptions): Promise<Server> {
  const child: ChildProcess = spawn(process.execPath, [options.cli ?? CLI, options.role ?? 'all'], {
    // MALLOC_ARENA_MAX as the container image sets it.
    env: {
      PATH: process.env.PATH ?? '',
      TZ: 'UTC',
      LOG_LEVEL: options.logLevel ?? 'warn',
      PORT: '0',
      API_KEYS: options.apiKey,
      MALLOC_ARENA_MAX: '2',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return asServer(child, options.listens !== false);
}

/** A child process that prints "listening on <url>" once it serves, as a Server. */
export async function asServer(child: ChildProcess, listens = true): Promise<Server> {
  let out = '';
  const url = await new Promise<string>((resolve, reject) => {
    if (!listens) resolve('');
    child.stdout!.on('data', (d) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.on('exit', (code) => reject(new Error(`server exited with ${code}: ${out}`)));
  });
  return {
    url,
    pid: child.pid!,
    stop: () =>
      new Promise((resolve) => {
        child.removeAllListeners('exit');
        child.on('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

/** CPU time (user + system, ms) a process has used so far, every thread of it (Linux). */
export function processCpuMs(pid: number): number {
  return cpuMsOf(`/proc/${pid}/stat`);
}

/** CPU time (user + system, ms) one thread of a process has used: its main thread when `tid` is its pid. */
export function threadCpuMs(pid: number, tid = pid): number {
  return cpuMsOf(`/proc/${pid}/task/${tid}/stat`);
}

function cpuMsOf(statFile: string): number {
  const fields = fs.readFileSync(statFile, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // utime + stime, clock ticks (USER_HZ 100)
}

/** Runs an ops command of the CLI to its end; its --json answer. */
export function cliJson(args: string[], env: Record<string, string>): Promise<Record<string, unknown>> {
  return cliChild(args, env).result;
}

/** Peak RSS of a process since it started (or since its peak was reset: clear_refs 5), in MB (Linux); 0 once it has exited. */
export function peakRssMb(pid: number | undefined): number {
  try {
    return pid === undefined ? 0 : Number(/VmHWM:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
  } catch {
    return 0;
  }
}

/** An ops command of the CLI as a child process: its --json answer, wall time in s and peak RSS in MB. */
export async function cliMeasured(args: string[], env: Record<string, string>): Promise<{ result: Record<string, unknown>; seconds: number; rssMb: number }> {
  const t = performance.now();
  const child = cliChild(args, env);
  let rssMb = 0;
  const sample = setInterval(() => (rssMb = Math.max(rssMb, peakRssMb(child.pid))), 250);
  try {
    const result = await child.result;
    return { result, seconds: (performance.now() - t) / 1000, rssMb: Math.round(rssMb) };
  } finally {
    clearInterval(sample);
  }
}

/**
 * An ops command of the CLI as a child process (its pid, to sample its memory) and its --json
 * answer. With MALLOC_ARENA_MAX=2, as the container image runs every process (and as
 * docs/operations.md asks outside it): glibc's arena per thread took a 2.5 M-report import's
 * peak from 911 to 1,093 MiB.
 */
export function cliChild(args: string[], env: Record<string, string>): { pid: number | undefined; result: Promise<Record<string, unknown>> } {
  let child: ChildProcess | undefined;
  const result = new Promise<Record<string, unknown>>((resolve, reject) => {
    child = execFile(process.execPath, [CLI, ...args, '--json'], { env: { PATH: process.env.PATH ?? '', TZ: 'UTC', LOG_LEVEL: 'warn', MALLOC_ARENA_MAX: '2', ...env }, maxBuffer: 1 << 24 }, (err, stdout) => {
      if (err) reject(err);
      else resolve(JSON.parse(stdout) as Record<string, unknown>);
    });
  });
  return { pid: child?.pid, result };
}

/** Runs `flood-archive <args>` to its end with only `env` (and PATH, TZ) in its environment; `input` on its standard input. */
export function runCli(args: string[], env: Record<string, string>, input?: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '', TZ: 'UTC', LOG_LEVEL: 'silent', ...env }, stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    if (input !== undefined) child.stdin!.end(input);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A loopback port free now, for a child process that must listen on a known port. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
