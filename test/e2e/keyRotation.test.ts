// Kept partner keys rotated and revoked with the CLI while two compiled API processes (`serve`)
// run on the same storage: the embedded default (one DATA_DIR) and S3/SQS (moto_server).
// "At once", as the issue means it: every request that reaches any API process after the
// `keys` command has exited is answered with the new state, with no restart, no reload and no
// cache to expire. The checks below therefore run right after the command exits, without
// waiting, on both processes. (`npm run build` first.)
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI, runCli } from '../support/cli.js';
import { API_KEY, eventually, report, tempDir } from '../support/env.js';
import type { Emulator } from '../support/fauxqs.js';
import { HAS_MOTO, MOTO_MISSING, startMoto } from '../support/moto.js';
import { freePort } from '../support/net.js';

if (!HAS_MOTO) console.warn(MOTO_MISSING);

const children: ChildProcess[] = [];
let moto: Emulator | undefined;
afterAll(async () => {
  for (const c of children.splice(0)) {
    c.kill('SIGTERM');
    await new Promise((r) => (c.exitCode !== null ? r(undefined) : c.once('exit', r)));
  }
  await moto?.stop();
});

async function startServe(env: Record<string, string>): Promise<string> {
  const port = await freePort();
  const child = spawn(process.execPath, [CLI, 'serve'], { env: { ...env, PORT: String(port) }, stdio: 'ignore' });
  children.push(child);
  const url = `http://127.0.0.1:${port}`;
  await eventually(() => fetch(`${url}/health`).then((r) => (r.ok ? true : undefined), () => undefined), 30_000, `API ${port} to listen`);
  return url;
}

async function post(url: string, postId: number, key: string): Promise<{ status: number; message?: string }> {
  const res = await fetch(`${url}/feeds/partner`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-Api-Key': key },
    body: JSON.stringify(report(postId)),
  });
  const body = (await res.json()) as { message?: string };
  return { status: res.status, ...(res.status >= 400 && { message: body.message }) };
}

async function keys(env: Record<string, string>, ...args: string[]): Promise<any> {
  const out = await runCli(['keys', ...args, '--json'], env);
  expect(out.code, out.stderr).toBe(0);
  return JSON.parse(out.stdout);
}

type Backend = 'embedded' | 'moto';

/** The environment of one more process (API or CLI) on the backend's shared storage. */
async function environment(kind: Backend): Promise<() => Promise<Record<string, string>>> {
  const common = { PATH: process.env.PATH ?? '', TZ: 'UTC', LOG_LEVEL: 'warn', API_KEYS: `ops:${API_KEY}`, RATE_LIMIT_FEED_PER_MINUTE: '100000' };
  if (kind === 'embedded') {
    const env = { ...common, DATA_DIR: await tempDir() };
    return async () => env;
  }
  moto ??= await startMoto();
  const id = randomBytes(4).toString('hex');
  const aws = {
    ...common,
    STORAGE_URL: `s3://keys-${id}/flood`,
    QUEUE_URL: moto.queueUrl(`reports-${id}`),
    AWS_ENDPOINT_URL: moto.endpoint,
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'test',
    AWS_SECRET_ACCESS_KEY: 'test',
  };
  // Each process has a DATA_DIR of its own (a host of its own): the bucket is all they share.
  return async () => ({ ...aws, DATA_DIR: await tempDir() });
}

describe.each(['embedded', 'moto'] as Backend[])('kept keys across two API processes (%s)', (kind) => {
  it.skipIf(kind === 'moto' && !HAS_MOTO)('a key added, rotated and revoked with the CLI counts at once on both processes', async () => {
    const env = await environment(kind);
    const boot = await runCli(['bootstrap'], await env());
    expect(boot.code, boot.stderr).toBe(0);
    const apis = [await startServe(await env()), await startServe(await env())];
    let postId = 1;

    const added = await keys(await env(), 'add', '--name', 'delta');
    expect(added).toMatchObject({ name: 'delta', key: expect.any(String), revoked: 0 });
    for (const url of apis) expect(await post(url, postId++, added.key)).toEqual({ status: 201 });

    const rotated = await keys(await env(), 'rotate', '--name', 'delta');
    expect(rotated).toMatchObject({ name: 'delta', revoked: 1 });
    // Both processes, in the same instant after the command exited: old key refused, new one taken.
    const afterRotation = await Promise.all(apis.flatMap((url) => [post(url, postId++, added.key), post(url, postId++, rotated.key)]));
    expect(afterRotation).toEqual([
      { status: 403, message: 'The API key was revoked.' },
      { status: 201 },
      { status: 403, message: 'The API key was revoked.' },
      { status: 201 },
    ]);

    expect(await keys(await env(), 'revoke', '--name', 'delta')).toEqual({ name: 'delta', revoked: 1 });
    const afterRevocation = await Promise.all(apis.map((url) => post(url, postId++, rotated.key)));
    expect(afterRevocation).toEqual([
      { status: 403, message: 'The API key was revoked.' },
      { status: 403, message: 'The API key was revoked.' },
    ]);
    // The configured key is untouched by what the ledger keeps.
    for (const url of apis) expect(await post(url, postId++, API_KEY)).toEqual({ status: 201 });
    const listed = (await keys(await env(), 'list')) as { name: string; from: string; revoked_at?: string }[];
    expect(listed.filter((k) => k.name === 'delta').map((k) => [k.from, typeof k.revoked_at])).toEqual([
      ['ledger', 'string'],
      ['ledger', 'string'],
    ]);
  });

  it.skipIf(kind === 'moto' && !HAS_MOTO)('two operators rotating one key at once: the partner keeps exactly one working key, handed out by a command that succeeded', async () => {
    const env = await environment(kind);
    const boot = await runCli(['bootstrap'], await env());
    expect(boot.code, boot.stderr).toBe(0);
    const api = await startServe(await env());
    await keys(await env(), 'add', '--name', 'epsilon');
    let postId = 100;
    for (const round of [1, 2, 3]) {
      const outs = await Promise.all([1, 2].map(async () => runCli(['keys', 'rotate', '--name', 'epsilon', '--json'], await env())));
      // A command whose key a rotation run meanwhile revoked says so and hands out no key.
      for (const o of outs.filter((o) => o.code !== 0)) expect([o.code, o.stdout, o.stderr]).toEqual([1, '', expect.stringMatching(/another rotation of epsilon ran at the same time/)]);
      const handedOut = outs.filter((o) => o.code === 0).map((o) => JSON.parse(o.stdout).key as string);
      const works = await Promise.all(handedOut.map(async (key) => (await post(api, postId++, key)).status === 201));
      expect(works.filter(Boolean), `round ${round}`).toHaveLength(1);
      const live = ((await keys(await env(), 'list')) as { name: string; revoked_at?: string }[]).filter((k) => k.name === 'epsilon' && !k.revoked_at);
      expect(live, `round ${round}`).toHaveLength(1);
    }
  });
});
