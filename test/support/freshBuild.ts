// The tests run the build (dist/), as the service's processes do: a build older than a source is
// made again before any test runs, so a test never runs code that is no longer there.
import { execFileSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** The folders tsconfig.build.json compiles into dist/. */
export const BUILT_FOLDERS = ['src', 'bench', 'jobs', 'infra'];

/** Sources whose build is missing or older than them. */
function staleSources(): string[] {
  const stale: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
      const name = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(name);
      else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) {
        const built = statSync(path.join(ROOT, 'dist', name.replace(/\.ts$/, '.js')), { throwIfNoEntry: false });
        if (!built || built.mtimeMs < statSync(path.join(ROOT, name)).mtimeMs) stale.push(name);
      }
    }
  };
  for (const folder of BUILT_FOLDERS) walk(folder);
  return stale;
}

export default function setup(): void {
  const stale = staleSources();
  if (stale.length === 0) return;
  process.stderr.write(`building dist/ (${stale.slice(0, 3).join(', ')}${stale.length > 3 ? ', …' : ''} newer than it)\n`);
  execFileSync(process.execPath, [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', path.join(ROOT, 'tsconfig.build.json')], { stdio: 'inherit' });
}
