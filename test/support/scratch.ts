// A test file's scratch directory, with a real DuckDB spilling into it: made before the file's
// own `beforeAll` hooks (call this at the top of the file or of its `describe`), closed and
// removed after its tests.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { DuckDb, type DuckDbOptions } from '../../src/archive/duckdb.js';

export interface Scratch {
  /** The directory, empty but for DuckDB's spill folder. */
  readonly dir: string;
  /** DuckDB, opened with `options` and its temp directory under `dir`. */
  readonly db: DuckDb;
}

/** Registers the hooks; read `dir` and `db` inside hooks and tests, once they exist. */
export function scratch(prefix: string, options: Omit<DuckDbOptions, 'tempDir'> = {}): Scratch {
  let dir: string | undefined;
  let db: DuckDb | undefined;
  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), prefix));
    db = await DuckDb.open({ ...options, tempDir: path.join(dir, 'duckdb') });
  });
  afterAll(async () => {
    db?.close();
    if (dir) await fs.rm(dir, { recursive: true, force: true });
  });
  const made = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('the scratch directory is made in beforeAll: read it inside hooks and tests');
    return value;
  };
  return {
    get dir() {
      return made(dir);
    },
    get db() {
      return made(db);
    },
  };
}
