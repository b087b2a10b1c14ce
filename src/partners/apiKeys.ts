// Partner API keys: each has a name (logs, metrics and the ledger carry the name, never the
// key). They come from API_KEYS (`name:key` pairs, or bare keys named by a short hash), from
// the ledger (kept as SHA-256 digests, managed with `flood-archive keys`), or, when neither
// holds any, from one random key created once under DATA_DIR with mode 0600, so a laptop
// install works out of the box.
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { ensureDataDir, fsyncDir, isCode, writeDurably } from '../shared/files.js';

export interface ApiKey {
  name: string;
  key: string;
}

export const KEY_NAME_PATTERN = '[a-z0-9][a-z0-9._-]{0,63}';
const KEY_NAME = new RegExp(`^${KEY_NAME_PATTERN}$`);
export const KEY_PATTERN = '[A-Za-z0-9._~-]{16,}';

/** SHA-256 of a key, hex: what the ledger keeps and what a presented key is looked up by. */
export function keyDigest(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/** The name of a key given without one: stable, and says nothing usable about the key. */
export function nameOfBareKey(key: string): string {
  return `key-${keyDigest(key).slice(0, 8)}`;
}

export function isKeyName(name: string): boolean {
  return KEY_NAME.test(name);
}

/** `name:key` or `key` entries, comma-separated (the config has already checked the syntax). */
export function parseApiKeys(text: string): ApiKey[] {
  return text
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '')
    .map((entry) => {
      const colon = entry.indexOf(':');
      return colon < 0 ? { name: nameOfBareKey(entry), key: entry } : { name: entry.slice(0, colon), key: entry.slice(colon + 1) };
    });
}

/** A new random key (24 bytes, base64url). */
export function newKey(): string {
  return randomBytes(24).toString('base64url');
}

/** Where a data dir keeps the key generated for it (the `local` key), when no key is configured. */
export const GENERATED_KEY_FILE = 'api-key';

/** The name of the key generated for a data directory (its reports are `partner-local-<post_id>`). */
export const GENERATED_KEY_NAME = 'local';

/** The key generated earlier for `dataDir`, and its file; undefined when there is none. */
export async function generatedKey(dataDir: string): Promise<{ file: string; key: string } | undefined> {
  const file = path.join(dataDir, GENERATED_KEY_FILE);
  try {
    const key = (await fs.readFile(file, 'utf8')).trim();
    return key.length >= 16 ? { file, key } : undefined;
  } catch (err) {
    if (!isCode(err, 'ENOENT')) throw err;
    return undefined;
  }
}

export async function resolveApiKeys(
  configured: ApiKey[],
  dataDir: string,
  /** Whether the ledger keeps keys: then no key is generated. */
  ledgerHasKeys = false,
): Promise<{ keys: ApiKey[]; generated?: { file: string; key: string; created: boolean } }> {
  if (configured.length > 0 || ledgerHasKeys) return { keys: configured };
  ensureDataDir(dataDir);
  const kept = await generatedKey(dataDir);
  if (kept) return { keys: [{ name: GENERATED_KEY_NAME, key: kept.key }], generated: { ...kept, created: false } };
  const file = path.join(dataDir, GENERATED_KEY_FILE);
  const key = newKey();
  await writeDurably(file, 'w', `${key}\n`, 0o600);
  await fsyncDir(dataDir);
  return { keys: [{ name: GENERATED_KEY_NAME, key }], generated: { file, key, created: true } };
}
