// The key that authenticates pagination cursors. Every API instance must use the same one
// (a page's cursor may come back to any of them): CURSOR_SECRET when set; otherwise one
// random key created once and kept, under DATA_DIR on the embedded default (mode 0600, like
// the generated API key) or in the object store on S3, created if absent so that instances
// starting together all end up reading the first one written.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Config } from '../shared/config.js';
import { fsyncDir, isCode, writeDurably } from '../shared/files.js';
import type { ObjectStore } from '../store/objectStore.js';

/** Where the generated key lives in the object store (S3 deployments). */
export const CURSOR_SECRET_KEY = 'secrets/cursor-key';
const KEY_BYTES = 32;

export async function cursorSecret(config: Config, store: ObjectStore): Promise<Buffer> {
  if (config.cursorSecret !== undefined) return Buffer.from(config.cursorSecret, 'utf8');
  const fresh = randomBytes(KEY_BYTES).toString('base64url');
  if (config.storageUrl.startsWith('file://')) return Buffer.from(await fileSecret(path.join(config.dataDir, 'cursor-secret'), fresh), 'utf8');
  const existing = await store.get(CURSOR_SECRET_KEY);
  if (existing) return parse(existing.body);
  await store.putIfAbsent(CURSOR_SECRET_KEY, fresh);
  // Whoever won the race, the stored key is the one every instance uses.
  const stored = await store.get(CURSOR_SECRET_KEY);
  if (!stored) throw new Error(`${CURSOR_SECRET_KEY} vanished right after it was created`);
  return parse(stored.body);
}

async function fileSecret(file: string, fresh: string): Promise<string> {
  await fs.mkdir(path.dirname(file), { recursive: true });
  try {
    // 'wx': create-if-absent, so two processes on one DATA_DIR cannot each keep their own.
    await writeDurably(file, 'wx', `${fresh}\n`, 0o600);
    await fsyncDir(path.dirname(file));
    return fresh;
  } catch (err) {
    if (!isCode(err, 'EEXIST')) throw err;
  }
  // Another process may have created it an instant ago and not written it yet.
  for (let attempt = 0; ; attempt += 1) {
    const key = (await fs.readFile(file, 'utf8')).trim();
    if (key.length >= KEY_BYTES) return key;
    if (attempt === 20) throw new Error(`${file} holds no usable cursor key: delete it to have a new one generated`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

function parse(body: Buffer): Buffer {
  const key = body.toString('utf8').trim();
  if (key.length < KEY_BYTES) throw new Error(`${CURSOR_SECRET_KEY} holds no usable cursor key`);
  return Buffer.from(key, 'utf8');
}
