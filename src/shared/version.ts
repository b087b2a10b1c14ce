// The service's version, from its package.json. It is part of every cache key and strong
// validator of rendered output: answers kept by one release are never served by another,
// which may render the same reports differently.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

function findVersion(): string {
  // src/ under vitest, dist/src/ when built: the package file is a few levels up.
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'flood-archive' && pkg.version) return pkg.version;
    } catch {
      // No package file at this level.
    }
    const up = path.dirname(dir);
    if (up === dir) return 'unknown';
    dir = up;
  }
}

export const SERVICE_VERSION = findVersion();
