// Where a worker thread's script is: worker threads run JavaScript only, so a thread runs the
// build's copy of its module. When the code that starts it runs as TypeScript (under the test
// runner), that copy is refused if any source is newer than its build: the thread would run code
// that is no longer there.
import { readdirSync, statSync } from 'node:fs';

/** The src/ folder of the build, and of the sources. */
const SRC = new URL('../', import.meta.url);
const BUILT_SRC = import.meta.url.endsWith('.ts') ? new URL('../../dist/src/', import.meta.url) : SRC;

/** The script of the module `name` (a path under src/, without its extension), built. */
export function workerScript(name: string): URL {
  if (BUILT_SRC !== SRC) {
    const stale = staleSources();
    if (stale.length > 0) throw new Error(`worker threads run the build, and ${stale.slice(0, 3).join(', ')} ${stale.length === 1 ? 'is' : 'are'} newer than it: npm run build`);
  }
  return new URL(`${name}.js`, BUILT_SRC);
}

/** Sources under src/ whose build is missing or older. */
function staleSources(): string[] {
  const stale: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(new URL(dir, SRC), { withFileTypes: true })) {
      const name = `${dir}${entry.name}`;
      if (entry.isDirectory()) walk(`${name}/`);
      else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) {
        const built = statSync(new URL(name.replace(/\.ts$/, '.js'), BUILT_SRC), { throwIfNoEntry: false });
        if (!built || built.mtimeMs < statSync(new URL(name, SRC)).mtimeMs) stale.push(`src/${name}`);
      }
    }
  };
  walk('');
  return stale;
}
