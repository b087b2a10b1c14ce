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
  const lock = `${file}.replacing`;
  for (let attempt = 0; ; attempt += 1) {
    if (await createWhole(file, `${fresh}\n`)) return fresh;
    // Another process's, whole: a key is linked into place only once written.
    const key = (await readKey(file)) ?? '';
    if (key.length >= KEY_BYTES) return key;
    if (attempt === 40) throw new Error(`${file} holds no usable cursor key: delete it (and ${lock}, if there) to have a new one generated`);
    // Unusable (an earlier release wrote it in place, and a full disk or a crash cut it): no
    // cursor was ever sealed with it. One process at a time, the one that made the lock,
    // replaces it, so two starting together cannot each keep a key of their own.
    if (await createWhole(lock, `${process.pid}\n`)) {
      try {
        if (((await readKey(file)) ?? '').length < KEY_BYTES) await fs.rm(file, { force: true });
        if (await createWhole(file, `${fresh}\n`)) return fresh;
      } finally {
        await fs.rm(lock, { force: true });
      }
    } else {
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }
}

/**
 * Creates `file` holding `body`, or finds it there (false): written and flushed under a name of
 * its own, then linked into place, so the file is never seen empty or cut short, nor made twice.
 */
async function createWhole(file: string, body: string): Promise<boolean> {
  const temp = `${file}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    await writeDurably(temp, 'wx', body, 0o600);
    await fs.link(temp, file);
    await fsyncDir(path.dirname(file));
    return true;
  } catch (err) {
    if (isCode(err, 'EEXIST')) return false;
    throw err;
  } finally {
    await fs.rm(temp, { force: true });
  }
}

async function readKey(file: string): Promise<string | undefined> {
  try {
    return (await fs.readFile(file, 'utf8')).trim();
  } catch (err) {
    if (isCode(err, 'ENOENT')) return undefined;
    throw err;
  }
}

function parse(body: Buffer): Buffer {
  const key = body.toString('utf8').trim();
  if (key.length < KEY_BYTES) throw new Error(`${CURSOR_SECRET_KEY} holds no usable cursor key`);
  return Buffer.from(key, 'utf8');
}
