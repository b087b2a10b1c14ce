// The project's own folder (the one holding its package.json), found from this module whether
// it runs from src/ (tests) or dist/src/ (built): files shipped beside the code (web/,
// boundaries/) are read from there.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const PACKAGE_NAME = 'flood-archive';

function find(): { dir: string; version: string } {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === PACKAGE_NAME) return { dir, version: pkg.version ?? 'unknown' };
    } catch {
      // No package file at this level.
    }
    const up = path.dirname(dir);
    if (up === dir) throw new Error(`the ${PACKAGE_NAME} package.json was not found above ${fileURLToPath(import.meta.url)}`);
    dir = up;
  }
}

let found: { dir: string; version: string } | undefined;

/** The project's folder. */
export function projectDir(): string {
  return (found ??= find()).dir;
}

/** The version in the project's package.json. */
export function projectVersion(): string {
  return (found ??= find()).version;
}
