// The yardstick of a bulk import: a stock PostgreSQL loading the same NDJSON file in the same
// sitting (COPY into a jsonb table, an index on the partner's key and one on the time, VACUUM
// ANALYZE), timed from the first byte to the vacuum's end. Run when the machine has a
// PostgreSQL server installed (Debian's `postgresql` package); otherwise the figure is absent.
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The server's programs (initdb, pg_ctl, psql), or undefined when none is installed. */
function binDir(): string | undefined {
  const root = '/usr/lib/postgresql';
  const versions = fs.existsSync(root) ? fs.readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  return versions.map((v) => path.join(root, v, 'bin')).find((dir) => fs.existsSync(path.join(dir, 'initdb')));
}

/** The server refuses to run as root: as root, its programs run as the `postgres` user. */
function asServerUser(program: string, args: string[]): [string, string[]] {
  return process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', program, ...args]] : [program, args];
}

/** The SQL of the load, after the COPY of every line (`doc`: one line's JSON). */
const INDEXES = [
  `CREATE UNIQUE INDEX reports_partner_key ON reports ((doc->>'partner_city'), ((doc->>'post_id')::bigint))`,
  `CREATE INDEX reports_created ON reports ((doc->>'created_at'))`,
  'VACUUM ANALYZE reports',
];

/**
 * Seconds a fresh PostgreSQL cluster (default settings, fsync on) takes to load `file` (COPY,
 * both indexes, VACUUM ANALYZE), and the bytes of the table with its indexes and TOAST after it.
 * Undefined when PostgreSQL is not installed.
 */
export async function postgresLoad(file: string): Promise<{ seconds: number; bytes: number } | undefined> {
  const bin = binDir();
  if (!bin) return undefined;
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'flood-bench-pg-'));
  const data = path.join(dir, 'data');
  if (process.getuid?.() === 0) {
    const id = async (flag: string) => Number((await run('id', [flag, 'postgres'])).stdout);
    await fsp.chown(dir, await id('-u'), await id('-g'));
  }
  const pg = (program: string, args: string[]) => run(...asServerUser(path.join(bin, program), args));
  try {
    await pg('initdb', ['-D', data, '-A', 'trust', '-U', 'bench', '--no-sync']);
    await pg('pg_ctl', ['-D', data, '-o', `-k ${dir} -c listen_addresses='' -p 5499`, '-l', path.join(dir, 'log'), '-w', 'start']);
    try {
      const psql = [path.join(bin, 'psql'), '-h', dir, '-p', '5499', '-U', 'bench', '-d', 'postgres', '-v', 'ON_ERROR_STOP=1', '-q'];
      const started = performance.now();
      // Each line whole into one jsonb value: CSV with quote and delimiter bytes no line holds.
      await new Promise<void>((resolve, reject) => {
        const [program, args] = asServerUser(psql[0]!, [...psql.slice(1), '-c', 'CREATE TABLE reports (doc jsonb NOT NULL)', '-c', `COPY reports (doc) FROM STDIN WITH (FORMAT csv, QUOTE E'\\x01', DELIMITER E'\\x02')`]);
        const child = spawn(program, args, { stdio: ['pipe', 'ignore', 'inherit'] });
        child.on('error', reject);
        child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`psql COPY exited ${code}`))));
        fs.createReadStream(file).on('error', reject).pipe(child.stdin);
      });
      await run(...asServerUser(psql[0]!, [...psql.slice(1), ...INDEXES.flatMap((sql) => ['-c', sql])]));
      const seconds = (performance.now() - started) / 1000;
      const size = await run(...asServerUser(psql[0]!, [...psql.slice(1), '-t', '-A', '-c', "SELECT pg_total_relation_size('reports')"]));
      return { seconds, bytes: Number(size.stdout.trim()) };
    } finally {
      await pg('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']);
    }
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
}
