// Researchers' own clients, driven as they would be: Python (pandas, pyarrow,
// geopandas) and GDAL's command-line tools; and strace, which watches a process's file calls. Each is looked for once; a test that
// needs one that is absent is skipped with a message saying which.
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

function works(cmd: string, args: string[]): boolean {
  try {
    execFileSync(cmd, args, { stdio: 'ignore', timeout: 30_000 });
    return true;
  } catch {
    return false;
  }
}

export const HAS_PYARROW = works('python3', ['-c', 'import pyarrow, pandas']);
export const PYARROW_MISSING = 'skipped: python3 with pandas and pyarrow not found (pip install pandas pyarrow)';
export const HAS_GEOPANDAS = works('python3', ['-c', 'import geopandas, pyarrow']);
export const GEOPANDAS_MISSING = 'skipped: python3 with geopandas and pyarrow not found (pip install geopandas pyarrow)';
export const HAS_OGR = works('ogrinfo', ['--version']) && works('ogr2ogr', ['--version']);
export const OGR_MISSING = 'skipped: GDAL (ogrinfo, ogr2ogr) not found (apt-get install -y gdal-bin)';
/** strace, able to trace a command here (a container may forbid ptrace). */
export const HAS_STRACE = works('strace', ['-f', '-qq', '-o', '/dev/null', 'true']);
export const STRACE_MISSING = 'skipped: strace not found, or not allowed to trace here (apt-get install -y strace)';

/** Runs a Python script with arguments; resolves to its stdout parsed as JSON. */
export async function python<T = any>(script: string, ...args: string[]): Promise<T> {
  const { stdout } = await run('python3', ['-c', script, ...args], { maxBuffer: 64 * 1024 * 1024, timeout: 120_000 });
  return JSON.parse(stdout) as T;
}

/** Runs a GDAL tool; resolves to its stdout. GDAL's own HTTP cache and proxies are kept out of the way. */
export async function gdal(tool: 'ogrinfo' | 'ogr2ogr', args: string[]): Promise<string> {
  const { stdout } = await run(tool, args, {
    maxBuffer: 256 * 1024 * 1024,
    timeout: 300_000,
    env: { ...process.env, GDAL_HTTP_TIMEOUT: '120', CPL_VSIL_CURL_CACHE_SIZE: '0', NO_PROXY: '127.0.0.1', no_proxy: '127.0.0.1' },
  });
  return stdout;
}
