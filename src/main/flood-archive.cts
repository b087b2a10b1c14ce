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
import v8 from 'node:v8';

if (process.argv[2] === 'serve' || process.argv[2] === 'all') process.env.UV_THREADPOOL_SIZE ??= '16';
// The bulk commands assemble every part's ready texts on the main thread. With V8's default heap
// growth, its next full collection came a few MB of allocation after the last: a year's reprocess
// to the national set marked its 77 MB heap 342 times, every quarter second. Let grow to twice
// its live size, the year's reprocess is 15-20 % faster for up to 60 MB more resident
// (docs/performance.md, "Heap growth in the bulk commands").
if (process.argv[2] === 'import' || process.argv[2] === 'reprocess' || process.argv[2] === 'compact') v8.setFlagsFromString('--heap-growing-percent=100');
import('./cli.js').catch((err: unknown) => {
  process.stderr.write(`fatal: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
