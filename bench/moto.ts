// moto_server, a third-party implementation of the S3 and SQS protocols (it enforces
// If-None-Match on PUT), as a child process on a loopback port, with SDK clients of it, its
// conditional writes made atomic (moto_atomic.py). The scale-out run and the tests start it;
// `pip install "moto[server]"` provides it.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { S3Client } from '@aws-sdk/client-s3';
import { SQSClient } from '@aws-sdk/client-sqs';
import { processCpuMs } from './server.js';

/** An S3 and SQS emulator (moto_server, fauxqs) and SDK clients of it. */
export interface Emulator {
  endpoint: string;
  s3: S3Client;
  sqs: SQSClient;
  stop(): Promise<void>;
  /** Starts a fresh emulator on the same port (state is lost, as with a restarted server). */
  restart(): Promise<void>;
  /** A queue's URL as this implementation names it (requests still go to `endpoint`). */
  queueUrl(name: string): string;
  /** CPU time the emulator's own process has used, in ms (a child process's; Linux). */
  cpuMs?(): number;
}

/** The Python launchers beside this file's source (also when it runs compiled, from dist/bench/). */
const here = path.dirname(fileURLToPath(import.meta.url));
const script = (name: string) => (import.meta.url.endsWith('.ts') ? path.join(here, name) : path.resolve(here, '../../bench', name));
/** moto_server with S3's conditional writes atomic: moto checks If-None-Match, then writes, with nothing held between. */
const MOTO = script('moto_atomic.py');
/** The same, without costs S3 and SQS do not have. */
const LEAN = script('moto_lean.py');

export interface MotoOptions {
  /**
   * moto_lean.py: listings walk only the objects under their prefix, as S3's do; a request's
   * service is found once per host; a queued message's visibility is one clock read; a
   * connection stays open between requests. moto's own walk the whole bucket, scan its package
   * directory per request, build datetimes per message and close every connection after its
   * answer (each request a new TCP connection, which S3's clients keep open).
   */
  lean?: boolean;
}

async function launch(port: number, options: MotoOptions): Promise<ChildProcess> {
  const server = [options.lean ? LEAN : MOTO];
  const child = spawn('python3', [...server, '-H', '127.0.0.1', '-p', String(port)], { stdio: 'ignore' });
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/moto-api/`)).ok) return child;
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline || child.exitCode !== null) {
      child.kill('SIGKILL');
      throw new Error(`moto_server did not start on port ${port}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function startMotoServer(port: number, options: MotoOptions = {}): Promise<Emulator> {
  let child = await launch(port, options);
  const endpoint = `http://127.0.0.1:${port}`;
  const common = { endpoint, region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' }, maxAttempts: 1 };
  return {
    endpoint,
    s3: new S3Client({ ...common, forcePathStyle: true }),
    sqs: new SQSClient(common),
    async stop() {
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
    },
    async restart() {
      child = await launch(port, options);
    },
    // moto names queues after its default account.
    queueUrl: (name) => `${endpoint}/123456789012/${name}`,
    cpuMs: () => processCpuMs(child.pid!),
  };
}

/**
 * The environment of a service process on `emulator`: its own bucket (archive-<id>, under the
 * prefix flood/) and queue (reports-<id>), with only PATH and TZ from this process.
 */
export function emulatorEnv(emulator: Pick<Emulator, 'endpoint' | 'queueUrl'>, id: string): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    TZ: 'UTC',
    STORAGE_URL: `s3://archive-${id}/flood`,
    QUEUE_URL: emulator.queueUrl(`reports-${id}`),
    AWS_ENDPOINT_URL: emulator.endpoint,
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'test',
    AWS_SECRET_ACCESS_KEY: 'test',
  };
}
