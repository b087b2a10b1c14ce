#!/usr/bin/env node
// The executable (`flood-archive`, `npm start`, the image's entry point): sizes libuv's thread
// pool, then runs the command line (cli.ts). Each call into DuckDB holds a pool thread for as
// long as the engine works on it, so with Node's default of four threads, four answers' queries
// left every file read and write, fsync and the readiness probe waiting behind them: `/ready`
// answered 503 for seconds at a time under a few readers. The processes that answer HTTP get 16.
// The ops commands keep four: their parts written at once were tuned with four, and with 16 more
// DuckDB calls ran at once on the same cores (the year's import slower and larger: docs/performance.md).
// The size must be set before anything uses the pool, and Node's ES module loader does before an
// ES module's first line runs: hence this CommonJS file. An operator's own UV_THREADPOOL_SIZE is kept.
if (process.argv[2] === 'serve' || process.argv[2] === 'all') process.env.UV_THREADPOOL_SIZE ??= '16';
import('./cli.js').catch((err: unknown) => {
  process.stderr.write(`fatal: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
