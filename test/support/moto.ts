// S3 and SQS from moto_server, a third-party implementation of their protocols (it enforces
// If-None-Match on PUT, which fauxqs does not), started on a free loopback port per test file.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { S3Client } from '@aws-sdk/client-s3';
import { SQSClient } from '@aws-sdk/client-sqs';
import type { Emulator } from './fauxqs.js';
import { freePort } from './net.js';

/** Whether moto's server can run here (CI installs it with pip). */
export const HAS_MOTO = spawnSync('python3', ['-c', 'import moto.server'], { stdio: 'ignore' }).status === 0;
export const MOTO_MISSING = 'skipped: moto_server is absent (pip install "moto[server]")';

async function launch(port: number): Promise<ChildProcess> {
  const child = spawn('python3', ['-m', 'moto.server', '-H', '127.0.0.1', '-p', String(port)], { stdio: 'ignore' });
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

export async function startMoto(): Promise<Emulator> {
  const port = await freePort();
  let child = await launch(port);
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
      child = await launch(port);
    },
    // moto names queues after its default account.
    queueUrl: (name) => `${endpoint}/123456789012/${name}`,
  };
}

/**
 * The environment of a service process on `moto`: its own bucket (archive-<id>, under the
 * prefix flood/) and queue (reports-<id>), with only PATH and TZ from this process.
 */
export function motoEnv(moto: Emulator, id: string): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    TZ: 'UTC',
    STORAGE_URL: `s3://archive-${id}/flood`,
    QUEUE_URL: moto.queueUrl(`reports-${id}`),
    AWS_ENDPOINT_URL: moto.endpoint,
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'test',
    AWS_SECRET_ACCESS_KEY: 'test',
  };
}
