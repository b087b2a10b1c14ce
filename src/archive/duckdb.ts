// One DuckDB instance per process, in memory, spilling to a temp directory.
import fs from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { DuckDBBlobVector, DuckDBInstance, DuckDBListValue, type DuckDBConnection, type DuckDBType, type DuckDBValue } from '@duckdb/node-api';
import { OverloadedError } from '../shared/errors.js';
import { releaseAll, releaseMemory } from './duckdbMemory.js';

export interface DuckDbOptions {
  tempDir: string;
  threads?: number;
  memoryLimit?: string;
  /** Bound of the spill files under tempDir, e.g. "4GB" (DuckDB's own default is 90% of the disk). */
  maxTempSize?: string;
}

export class DuckDb {
  private constructor(private readonly instance: DuckDBInstance) {}

  static async open(options: DuckDbOptions): Promise<DuckDb> {
    await fs.mkdir(options.tempDir, { recursive: true });
    const instance = await DuckDBInstance.create(':memory:', {
      threads: String(options.threads ?? 2),
      memory_limit: options.memoryLimit ?? '512MB',
      temp_directory: options.tempDir,
      max_temp_directory_size: options.maxTempSize ?? '4GB',
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

  private open = 0;
  /** Connections opened since the start, for withMemory to tell whether a run had the engine alone. */
  private acquired = 0;

  /** Connections in use (queries running or being read). */
  get openConnections(): number {
    return this.open;
  }

  /**
   * Runs `fn` on a fresh connection pinned to UTC, closing it afterwards. When `signal` aborts
   * (a client hung up), the query running on it is interrupted and `fn` fails: DuckDB frees
   * the query's memory and temporary files instead of finishing work nobody will read.
   */
  async withConnection<T>(fn: (conn: DuckDBConnection) => Promise<T>, signal?: AbortSignal): Promise<T> {
    const { conn, release } = await this.acquire(signal);
    try {
      const result = await fn(signal ? abortable(conn, signal) : conn);
      // Aborted between two of fn's queries: its answer is not wanted either.
      signal?.throwIfAborted();
      return result;
    } catch (err) {
      throw overloaded(err, signal);
    } finally {
      release();
    }
  }

  /**
   * As `withConnection`, for an answer's queries: when the engine runs out of memory, `fn` runs
   * again from its start once the memory others hold may have been given back. Results of
   * finished queries hold theirs until their wrappers are collected (see duckdbMemory.ts), so
   * every retry follows a full collection; other connections in use (other answers, a part
   * being written) finish theirs in a moment, so while there are some (or were, during the
   * run) the retries go on, for up to MEMORY_WAIT_MS. Alone on the engine throughout a run, and
   * still out of memory after a collection, the OverloadedError comes at once. A query of an
   * answer whose first byte has gone out can no longer become a 503, only a cut answer; before
   * it, a short wait beats a client's retry.
   * `fn` must be re-runnable: it reads, or writes only files it overwrites.
   */
  async withMemory<T>(fn: (conn: DuckDBConnection) => Promise<T>, signal?: AbortSignal): Promise<T> {
    const started = Date.now();
    let collectedAlone = false;
    for (let delay = MEMORY_WAIT_FIRST_MS; ; delay = Math.min(delay * 2, MEMORY_WAIT_STEP_MS)) {
      const othersOpen = this.open;
      const acquiredBefore = this.acquired;
      try {
        return await this.withConnection(fn, signal);
      } catch (err) {
        // Alone only if no other connection was in use at any moment of this run: one closed by
        // now may be another answer's between two of its queries, about to open the next.
        const alone = othersOpen === 0 && this.open === 0 && this.acquired === acquiredBefore + 1;
        if (!(err instanceof OverloadedError) || (alone && collectedAlone) || Date.now() - started + delay > MEMORY_WAIT_MS) throw err;
        collectedAlone = alone;
      }
      releaseAll();
      // Jittered, so two answers that ran each other out of memory do not retry in step.
      if (!collectedAlone) await sleep(delay * (0.5 + Math.random()), undefined, { signal });
    }
  }

  /** A fresh connection pinned to UTC, interrupted when `signal` aborts; `release` closes it. */
  private async acquire(signal: AbortSignal | undefined): Promise<{ conn: DuckDBConnection; release: () => void }> {
    signal?.throwIfAborted();
    const conn = await this.instance.connect();
    this.open += 1;
    this.acquired += 1;
    // Once aborted, interrupted again and again until the work is done: one call of the client
    // (a statement with parameters) is several steps (parse, prepare, run), and an interrupt
    // that lands before the last one is forgotten when it starts.
    let again: NodeJS.Timeout | undefined;
    const interrupt = () => {
      conn.interrupt();
      again = setInterval(() => conn.interrupt(), INTERRUPT_AGAIN_MS);
    };
    signal?.addEventListener('abort', interrupt, { once: true });
    const release = () => {
      signal?.removeEventListener('abort', interrupt);
      clearInterval(again);
      this.open -= 1;
      conn.closeSync();
      // The results' native memory goes when their wrappers do: see duckdbMemory.ts.
      releaseMemory();
    };
    try {
      await conn.run("SET TimeZone = 'UTC'");
    } catch (err) {
      release();
      throw err;
    }
    return { conn, release };
  }

  close(): void {
    this.instance.closeSync();
  }
}

/**
 * DuckDB out of memory, or out of temp space (`max_temp_directory_size`), for a query still
 * wanted: the engine is overloaded by the work under way, not broken, and the same query is
 * likely to succeed shortly (an OverloadedError, a 503 with Retry-After before an answer's
 * first byte). Anything else passes unchanged.
 */
function overloaded(err: unknown, signal: AbortSignal | undefined): unknown {
  if (signal?.aborted || !(err instanceof Error) || !/^Out of Memory Error/.test(err.message)) return err;
  return new OverloadedError('The query engine is out of memory or temporary space for the answers under way', { cause: err });
}

/** How long an answer's query waits, at most, for memory that other connections hold; its first wait and its longest. */
const MEMORY_WAIT_MS = 15_000;
const MEMORY_WAIT_FIRST_MS = 50;
const MEMORY_WAIT_STEP_MS = 1_000;

/** How often an abandoned connection is interrupted until its work has stopped. */
const INTERRUPT_AGAIN_MS = 20;

/**
 * The connection, refusing to start anything once `signal` has aborted: the abort interrupts
 * the query running then, and fn's next query (a COPY after its set-up statements) must not
 * start in its place and run to its end.
 */
function abortable(conn: DuckDBConnection, signal: AbortSignal): DuckDBConnection {
  return new Proxy(conn, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== 'function' || property === 'interrupt') return value;
      return (...args: unknown[]) => {
        signal.throwIfAborted();
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

/** A SQL string literal; used only for paths the service itself built. */
export function sqlString(value: string): string {
  return `'${value.replace(/'/g, "''")}'`;
}

/**
 * A query's columns as JavaScript arrays, one per column even when no row came back
 * (`getColumnsJS` then gives none).
 */
export async function columnsOf<T extends unknown[][]>(conn: DuckDBConnection, sql: string, values?: Record<string, DuckDBValue>): Promise<T> {
  const reader = await conn.runAndReadAll(sql, values);
  const columns = reader.getColumnsJS();
  return Array.from({ length: reader.columnCount }, (_, i) => columns[i] ?? []) as T;
}

/**
 * A query's rows with each BLOB as the bytes DuckDB hands over (`getRowsJS` copies them once
 * more: a storm day's ready texts are 100 MB), each LIST as its items, anything else as its value.
 */
export async function rowsWithBytesOf(conn: DuckDBConnection, sql: string, values?: Record<string, DuckDBValue>, types?: Record<string, DuckDBType>): Promise<unknown[][]> {
  const rows: unknown[][] = [];
  const result = await conn.stream(sql, values, types);
  for await (const chunk of result) {
    const vectors = Array.from({ length: chunk.columnCount }, (_, c) => chunk.getColumnVector(c));
    for (let i = 0; i < chunk.rowCount; i++) {
      rows.push(
        vectors.map((v) => {
          if (v instanceof DuckDBBlobVector) {
            // A short blob is a view into the chunk's memory, gone with the chunk: copied.
            const bytes = v.getItemBytes(i);
            return bytes && bytes.byteLength <= 12 ? bytes.slice() : bytes;
          }
          const value = v.getItem(i);
          return value instanceof DuckDBListValue ? value.items : value;
        }),
      );
    }
  }
  return rows;
}
