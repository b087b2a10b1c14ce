// What an embedded data dir stores, by store: the benchmarks' storage figures.
import fsp from 'node:fs/promises';
import path from 'node:path';
import { walkFiles } from './synthetic.js';

/**
 * Bytes a report costs in each store of an embedded data dir: the ledger and the event log
 * (databases with their write-ahead logs), and the parts, ready texts, stats sidecars and change
 * logs of the store.
 */
export async function footprint(dataDir: string, reports: number): Promise<Record<string, string | number>[]> {
  const fileBytes = async (name: string) => {
    let bytes = 0;
    for (const suffix of ['', '-wal', '-shm']) bytes += (await fsp.stat(path.join(dataDir, name + suffix)).catch(() => ({ size: 0 }))).size;
    return bytes;
  };
  const store = (sub: string) => storeBytes(path.join(dataDir, 'store', sub), '').catch(() => ({ files: 0, bytes: 0 }));
  const stores: [string, number][] = [
    ['ledger (SQLite, with WAL)', await fileBytes('ledger.sqlite')],
    ['event log (SQLite, with WAL)', await fileBytes('events.sqlite')],
    ['parts', (await store('reports')).bytes],
    ['ready texts', (await store('ready')).bytes],
    ['stats sidecars', (await store('stats')).bytes],
    ['change logs', (await store('changes')).bytes],
  ];
  const total = stores.reduce((n, [, b]) => n + b, 0);
  return [...stores, ['total', total] as [string, number]].map(([name, bytes]) => ({ store: name, reports, MB: Math.round(bytes / 1e5) / 10, 'bytes/report': Math.round(bytes / reports) }));
}

/** Files under `dir` ending in `suffix` (parts: .parquet; their ready texts: .ready), and their bytes. */
export async function storeBytes(dir: string, suffix = '.parquet'): Promise<{ files: number; bytes: number }> {
  let files = 0;
  let bytes = 0;
  for await (const file of walkFiles(dir)) {
    if (!file.endsWith(suffix)) continue;
    files += 1;
    bytes += (await fsp.stat(file)).size;
  }
  return { files, bytes };
}

