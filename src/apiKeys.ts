// Where API keys come from when API_KEYS is unset: one random key, created
// once under DATA_DIR with mode 0600, so a laptop install works out of the box.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';

export async function resolveApiKeys(
  configured: string[],
  dataDir: string,
): Promise<{ keys: string[]; generated?: { file: string; key: string; created: boolean } }> {
  if (configured.length > 0) return { keys: configured };
  const file = path.join(dataDir, 'api-key');
  await fs.mkdir(dataDir, { recursive: true });
  try {
    const key = (await fs.readFile(file, 'utf8')).trim();
    if (key.length >= 16) return { keys: [key], generated: { file, key, created: false } };
  } catch (err) {
    if ((err as { code?: string }).code !== 'ENOENT') throw err;
  }
  const key = randomBytes(24).toString('base64url');
  await fs.writeFile(file, `${key}\n`, { mode: 0o600 });
  return { keys: [key], generated: { file, key, created: true } };
}
