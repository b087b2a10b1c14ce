// Incremental sync figures (`--only sync`): a month imported (its every report changed since
// the instant before the import), then a mirror's first sync of that month (updated_after
// before the import: every report in the answer, read through the change logs) beside the
// same window pulled whole, for the count and each format.
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { writeYear } from './bulk.js';
import { cliMeasured, startServer } from './server.js';

type Row = Record<string, string | number>;

const DAY_MS = 86_400_000;
const RUNS = 3;

export interface SyncOptions {
  /** Reports imported into the month. */
  reports: number;
  apiKey: string;
  /** Another build's cli.js to serve the answers (the import is this build's either way). */
  cli?: string;
}

export async function syncScenario(options: SyncOptions, log: (line: string) => void): Promise<{ scenario: string; rows: Row[] }> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'flood-bench-sync-'));
  try {
    const dataDir = path.join(dir, 'data');
    const file = path.join(dir, 'month.ndjson');
    // The 30 days before today (UTC): within the archive's window and the change logs kept.
    const endMs = Math.floor(Date.now() / DAY_MS) * DAY_MS;
    await writeYear(file, options.reports, 30, endMs, 'time');
    const before = new Date(Date.now() - 1_000).toISOString();
    log(`sync: importing ${options.reports.toLocaleString()} reports into a month …`);
    await cliMeasured(['import', '--file', file], { DATA_DIR: dataDir });
    const window = `start=${new Date(endMs - 30 * DAY_MS).toISOString()}&end=${new Date(endMs - 1).toISOString()}`;
    const sync = `${window}&updated_after=${encodeURIComponent(before)}`;
    const server = await startServer({ DATA_DIR: dataDir, RATE_LIMIT_READ_PER_MINUTE: '100000000', SYNC_SETTLE_SECONDS: '1' }, { role: 'serve', apiKey: options.apiKey, ...(options.cli && { cli: options.cli }) });
    const rows: Row[] = [];
    try {
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const timed = async (query: string): Promise<{ ms: number; bytes: number }> => {
        const times: number[] = [];
        let bytes = 0;
        for (let i = 0; i < RUNS; i++) {
          const t = performance.now();
          const res = await fetch(`${server.url}${query}`, { headers: { 'User-Agent': 'flood-bench/1.0', 'Accept-Encoding': 'identity' } });
          const body = Buffer.from(await res.arrayBuffer());
          if (res.status !== 200) throw new Error(`sync bench: ${query}: ${res.status} ${body.toString().slice(0, 300)}`);
          times.push(performance.now() - t);
          bytes = body.length;
        }
        return { ms: times.sort((a, b) => a - b)[Math.floor(RUNS / 2)]!, bytes };
      };
      for (const [answer, path_] of [
        ['count', '/reports/archive/count?'],
        ['ndjson', '/reports/archive?format=ndjson&'],
        ['geojson', '/reports/archive?geoformat=geojson&'],
        ['csv', '/reports/archive?format=csv&'],
        ['parquet', '/reports/archive?format=parquet&'],
      ] as const) {
        const whole = await timed(`${path_}${window}`);
        const changed = await timed(`${path_}${sync}`);
        rows.push({ answer, reports: options.reports, 'whole window p50 ms': Math.round(whole.ms), 'sync p50 ms': Math.round(changed.ms), 'sync MB': Math.round(changed.bytes / 1e5) / 10 });
        log(`sync ${answer}: whole ${Math.round(whole.ms)} ms, sync ${Math.round(changed.ms)} ms`);
      }
    } finally {
      await server.stop();
    }
    return { scenario: `incremental sync: a month of ${options.reports.toLocaleString()} reports, every one changed (updated_after before its import), beside the month pulled whole (p50 of ${RUNS})`, rows };
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
}
