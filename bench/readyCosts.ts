// Where a part's ready texts cost their time: compacted days of synthetic reports (points in the
// barangays of the two-city set and of the national set), each day's ready texts built as
// compaction, import and reprocess build them (readyTextsOfParts, one part at a time), with the
// builder's own probe timing each step. Microseconds a report, the median of the runs.
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { BoundarySet } from '../src/boundaries/types.js';
import { DuckDb } from '../src/archive/duckdb.js';
import { readyTextsOfParts, type ReadyStep, type ReadyTimings } from '../src/archive/sidecars/index.js';
import { cliJson } from './server.js';
import { buildBenchStore } from './synthetic.js';

export type Row = Record<string, string | number>;

export interface ReadyCostOptions {
  /** Days built, and reports a day (a storm day of the benchmark year has about 7,000). */
  days: number;
  perDay: number;
  runs: number;
  sets: readonly { label: string; set: BoundarySet }[];
}

const STEPS: readonly ReadyStep[] = ['rows', 'parquet', 'hours', 'geojson', 'csv', 'arrow', 'assemble'];

/** One row per boundary set: µs a report in each step, and in all. */
export async function readyCostRows(options: ReadyCostOptions, log: (line: string) => void): Promise<Row[]> {
  const rows: Row[] = [];
  for (const { label, set } of options.sets) {
    const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'flood-bench-ready-'));
    try {
      const storeDir = path.join(dir, 'store');
      const startMs = Date.UTC(2025, 7, 1);
      await buildBenchStore({ storeDir, reports: options.days * options.perDay, startMs, days: options.days, boundaries: set });
      await cliJson(['compact'], { DATA_DIR: dir, RETIRE_GRACE_SECONDS: '0' });
      const parts = (await fsp.readdir(storeDir, { recursive: true })).filter((f) => f.includes('hour=all') && f.endsWith('.parquet')).map((f) => path.join(storeDir, f));
      if (parts.length !== options.days) throw new Error(`${parts.length} compacted days, not ${options.days}`);
      // As the service opens it: two threads.
      const db = await DuckDb.open({ tempDir: path.join(dir, 'duckdb') });
      try {
        const runs: Record<ReadyStep | 'all', number>[] = [];
        for (let run = 0; run < options.runs; run++) {
          const timings: ReadyTimings = {};
          const started = performance.now();
          for (const part of parts) await readyTextsOfParts(db, [part], path.join(dir, 'scratch'), timings);
          const perReport = (ms: number) => (ms * 1000) / (options.days * options.perDay);
          runs.push({ ...(Object.fromEntries(STEPS.map((s) => [s, perReport(timings[s] ?? 0)])) as Record<ReadyStep, number>), all: perReport(performance.now() - started) });
        }
        const median = (k: ReadyStep | 'all') => runs.map((r) => r[k]).sort((a, b) => a - b)[Math.floor(runs.length / 2)]!;
        const row: Row = { boundaries: label, days: options.days, 'reports a day': options.perDay };
        for (const step of [...STEPS, 'all'] as const) row[`${step} µs`] = Math.round(median(step) * 100) / 100;
        log(`ready texts (${label}): ${median('all').toFixed(1)} µs a report`);
        rows.push(row);
      } finally {
        db.close();
      }
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  }
  return rows;
}
