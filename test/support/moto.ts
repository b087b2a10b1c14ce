// S3 and SQS from moto_server, a third-party implementation of their protocols (it enforces
// If-None-Match on PUT, which fauxqs does not), started on a free loopback port per test file.
import { spawnSync } from 'node:child_process';
import { startMotoServer, type MotoOptions } from '../../bench/moto.js';
import type { Emulator } from './fauxqs.js';
import { freePort } from './net.js';

/** Whether moto's server can run here (CI installs it with pip). */
export const HAS_MOTO = spawnSync('python3', ['-c', 'import moto.server'], { stdio: 'ignore' }).status === 0;
export const MOTO_MISSING = 'skipped: moto_server is absent (pip install "moto[server]")';

/** `lean`: the benchmarks' moto, without costs of its own that S3 and SQS do not have (bench/moto_lean.py). */
export async function startMoto(options: MotoOptions = {}): Promise<Emulator> {
  return startMotoServer(await freePort(), options);
}

/** The environment of a service process on `moto` (bench/moto.ts). */
export { emulatorEnv as motoEnv } from '../../bench/moto.js';
