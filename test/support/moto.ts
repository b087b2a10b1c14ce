// S3 and SQS from moto_server, a third-party implementation of their protocols (it enforces
// If-None-Match on PUT, which fauxqs does not), started on a free loopback port per test file.
import { spawnSync } from 'node:child_process';
import { startMotoServer } from '../../bench/moto.js';
import type { Emulator } from './fauxqs.js';
import { freePort } from './net.js';

/** Whether moto's server can run here (CI installs it with pip). */
export const HAS_MOTO = spawnSync('python3', ['-c', 'import moto.server'], { stdio: 'ignore' }).status === 0;
export const MOTO_MISSING = 'skipped: moto_server is absent (pip install "moto[server]")';

export async function startMoto(): Promise<Emulator> {
  return startMotoServer(await freePort());
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
