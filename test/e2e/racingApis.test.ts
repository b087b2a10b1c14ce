// Two API processes on AWS (moto_server: real If-None-Match: * on S3), each sent the first post
// of the same post_id at the same moment, as a partner's retry through a load balancer does:
// exactly one answers 201, the other 200, and the archive keeps the version that got the 201.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { API_KEY, eventually, report, tempDir, pkeyOf } from '../support/env.js';
import type { Emulator } from '../support/fauxqs.js';
import { HAS_MOTO, MOTO_MISSING, motoEnv, startMoto } from '../support/moto.js';
import { freePort } from '../support/net.js';

const CLI = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../dist/src/main/flood-archive.cjs');
const POSTS = 40;
if (!HAS_MOTO) console.warn(MOTO_MISSING);

const children: ChildProcess[] = [];
let moto: Emulator | undefined;
afterAll(async () => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
  await moto?.stop();
});

function run(command: string, env: Record<string, string>): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, [CLI, command], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  return { child, output: () => out, exited };
}

async function post(url: string, body: unknown): Promise<number> {
  const res = await fetch(`${url}/feeds/partner`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-Api-Key': API_KEY },
    body: JSON.stringify(body),
  });
  await res.arrayBuffer();
  return res.status;
}

describe.skipIf(!HAS_MOTO)('two API processes on S3 and SQS (moto)', () => {
  it('racing the first post of each post_id: one 201 and one 200 each, and the archive keeps the 201 version', async () => {
    moto = await startMoto();
    const id = randomBytes(4).toString('hex');
    const shared = {
      ...motoEnv(moto, id),
      API_KEYS: API_KEY,
      FLUSH_INTERVAL_SECONDS: '0.5',
      RATE_LIMIT_FEED_PER_MINUTE: '100000',
      LOG_LEVEL: 'warn',
    };
    const boot = run('bootstrap', { ...shared, DATA_DIR: await tempDir() });
    expect(await boot.exited, boot.output()).toBe(0);

    const apis = await Promise.all(
      ['a', 'b'].map(async () => {
        const port = await freePort();
        const p = run('serve', { ...shared, DATA_DIR: await tempDir(), PORT: String(port) });
        const url = `http://127.0.0.1:${port}`;
        await eventually(() => fetch(`${url}/health`).then((r) => (r.ok ? true : undefined)), 30_000, `API ${port} to listen`);
        return { url, p };
      }),
    );
    const worker = run('worker', { ...shared, DATA_DIR: await tempDir() });

    const winners = new Map<number, string>();
    for (let i = 0; i < POSTS; i++) {
      const postId = 5_000 + i;
      const versions = ['first-a', 'first-b'].map((v) => report(postId, { title: `${v} ${postId}` }));
      const statuses = await Promise.all(apis.map((api, n) => post(api.url, versions[n])));
      expect([...statuses].sort(), `post_id ${postId}`).toEqual([200, 201]);
      winners.set(postId, statuses[0] === 201 ? `first-a ${postId}` : `first-b ${postId}`);
    }
    // Both processes won some races: each really decided on its own.
    const aWins = [...winners.values()].filter((t) => t.startsWith('first-a')).length;
    expect(aWins).toBeGreaterThan(0);
    expect(aWins).toBeLessThan(POSTS);

    const titles = await eventually(
      async () => {
        const res = await fetch(`${apis[1]!.url}/reports/archive?start=2026-11-21T00:00:00%2B0800&end=2026-11-21T23:59:59%2B0800&format=ndjson`, {
          headers: { 'User-Agent': 'flood-tests/1.0' },
        });
        const lines = (await res.text()).split('\n').filter(Boolean).map((l) => JSON.parse(l));
        return lines.length === POSTS ? new Map(lines.map((f) => [f.properties.pkey, f.properties.title])) : undefined;
      },
      60_000,
      'every report in the archive',
    ).catch((err) => {
      throw new Error(`${String(err)}\n${worker.output()}\n${apis.map((a) => a.p.output()).join('\n')}`);
    });
    for (const [postId, title] of winners) expect(titles.get(pkeyOf(postId))).toBe(title);
  }, 180_000);
});
