// One DuckDB instance per process, in memory, spilling to a temp directory.
import fs from 'node:fs/promises';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { releaseMemory } from './memory.js';

export interface DuckDbOptions {
  tempDir: string;
  threads?: number;
  memoryLimit?: string;
}

export class DuckDb {
  private constructor(private readonly instance: DuckDBInstance) {}

  static async open(options: DuckDbOptions): Promise<DuckDb> {
    await fs.mkdir(options.tempDir, { recursive: true });
    const instance = await DuckDBInstance.create(':memory:', {
      threads: String(options.threads ?? 2),
      memory_limit: options.memoryLimit ?? '512MB',
      temp_directory: options.tempDir,
      // Extensions cannot be fetched in locked-down deployments; the ones we use are built in.
      autoinstall_known_extensions: 'false',
      autoload_known_extensions: 'false',
      // Parts are local files (the store's, or the part cache's): the OS page cache already
      // holds them, so DuckDB's own copy would only add resident memory.
      enable_external_file_cache: 'false',
      // Hand freed memory back to the OS promptly: the server's RSS then follows the work
      // in flight instead of the largest answer it ever gave.
      allocator_flush_threshold: '16MB',
      allocator_bulk_deallocation_flush_threshold: '16MB',
    });
    return new DuckDb(instance);
  }

  /** Runs `fn` on a fresh connection pinned to UTC, closing it afterwards. */
  async withConnection<T>(fn: (conn: DuckDBConnection) => Promise<T>): Promise<T> {
    const conn = await this.instance.connect();
    try {
      await conn.run("SET TimeZone = 'UTC'");
      return await fn(conn);
    } finally {
      conn.closeSync();
      // The results' native memory goes when their wrappers do: see memory.ts.
      releaseMemory();
    }
  }

  close(): void {
    this.instance.closeSync();
  }
}

/** A SQL string literal; used only for paths the service itself built. */
export function sqlString(value: string): string {
  return `'${value.replace(/'/g, "''")}'`;
}
