// One temporary directory for a whole test run, removed at its end: every test's data dirs,
// files and child processes' temp files are made under it (TMPDIR, which os.tmpdir() reads and
// the forked test workers and the processes they start inherit), so a run leaves nothing behind.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

export default async function setup(): Promise<() => Promise<void>> {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), 'flood-tests-'));
  process.env.TMPDIR = root;
  return async () => {
    // A tmpfs a test could not unmount keeps its mount point; everything else goes.
    await fs.rm(root, { recursive: true, force: true, maxRetries: 3 }).catch(() => undefined);
  };
}
