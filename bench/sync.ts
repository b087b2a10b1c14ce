// Incremental sync figures (`--only sync`): a month imported (its every report changed since
// the instant before the import), then a mirror's first sync of that month (updated_after
// before the import: every report in the answer, read through the change logs) beside the
// same window pulled whole, for the count and each format: each kind of pull on a new server,
// its first pull cold and the next ones warm.
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
    const rows: Row[] = [];
    // Each kind of pull on a server of its own: its first pull is cold (a new process, its caches
    // empty; the files themselves in the host's page cache), the ones after it warm.
    const timed = async (query: string): Promise<{ cold: number; warm: number; bytes: number }> => {
      const server = await startServer({ DATA_DIR: dataDir, RATE_LIMIT_READ_PER_MINUTE: '100000000', SYNC_SETTLE_SECONDS: '1' }, { role: 'serve', apiKey: options.apiKey, ...(options.cli && { cli: options.cli }) });
      try {
        // A sync's newest changes wait SYNC_SETTLE_SECONDS: the import's are older by now.
        await new Promise((resolve) => setTimeout(resolve, 1_500));
        const times: number[] = [];
        let bytes = 0;
        for (let i = 0; i <= RUNS; i++) {
          const t = performance.now();
          const res = await fetch(`${server.url}${query}`, { headers: { 'User-Agent': 'flood-bench/1.0', 'Accept-Encoding': 'identity' } });
          const body = Buffer.from(await res.arrayBuffer());
          if (res.status !== 200) throw new Error(`sync bench: ${query}: ${res.status} ${body.toString().slice(0, 300)}`);
          times.push(performance.now() - t);
          bytes = body.length;
        }
        const [cold, ...warm] = times;
        return { cold: cold!, warm: warm.sort((a, b) => a - b)[Math.floor(RUNS / 2)]!, bytes };
      } finally {
        await server.stop();
      }
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
      const ms = Math.round;
      rows.push({ answer, reports: options.reports, 'whole cold ms': ms(whole.cold), 'whole warm p50 ms': ms(whole.warm), 'sync cold ms': ms(changed.cold), 'sync warm p50 ms': ms(changed.warm), 'sync MB': Math.round(changed.bytes / 1e5) / 10 });
      log(`sync ${answer}: whole ${ms(whole.cold)} ms cold, ${ms(whole.warm)} warm; sync ${ms(changed.cold)} ms cold, ${ms(changed.warm)} warm`);
    }
    return { scenario: `incremental sync: a month of ${options.reports.toLocaleString()} reports, every one changed (updated_after before its import), beside the month pulled whole (each on a new server: its first pull cold, then the p50 of ${RUNS} warm)`, rows };
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
}
