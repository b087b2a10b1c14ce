// The CLI as ops run it: --help, --json, exit codes.
import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import Database from 'better-sqlite3';
import path from 'node:path';
import { execFile, spawn } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import { S3Client } from '@aws-sdk/client-s3';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import { CLI, runCli as run } from '../support/cli.js';
import { postReport, report, SHARED_PH, SHARED_PH_NATIONAL, startTestService, tempDir, testConfig, testRuntime } from '../support/env.js';
import { freePort } from '../support/net.js';
import { GENERATED_KEY_FILE, GENERATED_KEY_NAME, resolveApiKeys } from '../../src/partners/apiKeys.js';
import { S3ObjectStore } from '../../src/store/s3Store.js';

/** A preload that fails the process on any import of DuckDB or the AWS SDK. */
const WITHOUT_ENGINE = fileURLToPath(new URL('../support/withoutEngine.mjs', import.meta.url));


/** The CLI in a process of its own, once its progress says it has started (or it has exited). */
async function startedCli(args: string[], env: Record<string, string>) {
  const child = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '', TZ: 'UTC', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  child.stdout.resume();
  let code: number | null | undefined;
  const exited = new Promise<number | null>((resolve) => child.on('exit', (c) => resolve((code = c))));
  while (!/"state":"started"/.test(stderr) && code === undefined) await new Promise((r) => setTimeout(r, 5));
  return { child, exited, stderr: () => stderr };
}

describe('flood-archive CLI', () => {
  it('lists its commands, and each command has --help', async () => {
    const env = { DATA_DIR: await tempDir() };
    const top = await run(['--help'], env);
    expect(top.code).toBe(0);
    for (const c of ['serve', 'worker', 'scheduler', 'all', 'bootstrap', 'compact', 'reconcile', 'reprocess', 'import', 'export', 'cities', 'dlq', 'verify', 'retract', 'keys']) {
      expect(top.stdout).toMatch(new RegExp(`^  ${c} `, 'm'));
      const help = await run([c, '--help'], env);
      expect(help.code, c).toBe(0);
      expect(help.stdout).toMatch(new RegExp(`usage: flood-archive ${c}`));
    }
  });

  it('exits 2 on usage errors and 78 on bad configuration, told before DuckDB or the AWS SDK is loaded', async () => {
    // Each mistake is answered at once: the process fails if it imports the engine or the SDK.
    const env = { DATA_DIR: await tempDir(), NODE_OPTIONS: `--import=${WITHOUT_ENGINE}` };
    expect((await run(['frobnicate'], env)).code).toBe(2);
    expect((await run(['compact', '--nope'], env)).code).toBe(2);
    const missing = await run(['reprocess', '--from', '2026-11-01'], env);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/--to is required/);
    // A word the command does not read is refused, not passed over (here, a forgotten --).
    const stray = await run(['reprocess', '--from', '2026-11-01', '--to', '2026-11-02', 'dry-run'], env);
    expect([stray.code, stray.stderr]).toEqual([2, expect.stringMatching(/unexpected argument "dry-run"/)]);
    expect((await run(['compact', '2026-11-01'], env)).code).toBe(2);
    expect((await run(['keys', 'list', 'extra'], env)).code).toBe(2);
    // A subcommand missing or misspelt: told at once, before the data directory or the store is
    // touched (here one that cannot be reached), and without a command, help on stderr.
    const fresh = path.join(await tempDir(), 'never-made');
    const offline = { NODE_OPTIONS: env.NODE_OPTIONS, DATA_DIR: fresh, STORAGE_URL: 's3://bucket/', QUEUE_URL: 'http://127.0.0.1:9/000000000000/q', AWS_ENDPOINT_URL: 'http://127.0.0.1:9', AWS_ACCESS_KEY_ID: 'x', AWS_SECRET_ACCESS_KEY: 'x' };
    const misspelt = await run(['keys', 'lst'], offline);
    expect([misspelt.code, misspelt.stderr]).toEqual([2, expect.stringMatching(/^unknown subcommand "lst" of keys: one of list, add, rotate, revoke$/m)]);
    expect((await run(['cities'], offline)).stderr).toMatch(/^cities needs a subcommand: one of publish, list, rollback$/m);
    expect((await run(['dlq', 'bogus'], offline)).code).toBe(2);
    // So are options missing or wrong, for every command: a usage error (2), not the unreachable
    // store's 69, and the data directory not made.
    const input = path.join(await tempDir(), 'in.ndjson');
    await fs.writeFile(input, `${JSON.stringify(report(1))}\n`);
    const mistakes: Promise<void>[] = [];
    for (const [args, message] of [
      [['import'], /--file is required/],
      [['import', '--file', input, '--format', ''], /--format must be ndjson, geojson or csv/],
      [['import', '--file', input, '--rejects', '/proc/rejects.ndjson'], /--rejects \/proc\/rejects\.ndjson cannot be written/],
      // Flushed and cut back on a resume, the rejects must be a file.
      [['import', '--file', input, '--rejects', '/dev/null'], /--rejects \/dev\/null is not a regular file/],
      // The checkpoint goes beside the file: a folder no one may write in is found before anything opens.
      [['import', '--file', '/proc/version', '--format', 'ndjson', '--rejects', path.join(path.dirname(input), 'r.ndjson')], /the checkpoint \/proc\/version\.import-state\.json cannot be written beside the file \(.*\): keep it elsewhere with --checkpoint F/],
      // Kept where told: never over the input (a rename would replace it), a folder, or the rejects.
      [['import', '--file', input, '--checkpoint', '/proc/state.json'], /--checkpoint \/proc\/state\.json cannot be written/],
      [['import', '--file', input, '--checkpoint', input], /--checkpoint .*in\.ndjson is the file to import/],
      [['import', '--file', input, '--checkpoint', path.dirname(input)], /--checkpoint .* is a folder/],
      [['import', '--file', input, '--checkpoint', `${input}.state`, '--rejects', `${input}.state`], /--rejects .*in\.ndjson\.state is .*in\.ndjson\.state: the rejects file is written over/],
      [['export', '--format', 'csv', '--out', path.join(path.dirname(input), 'out.csv')], /--from is required/],
      [['verify', '--from', 'nope'], /--from/],
      [['compact', '--to', '1960-01-01'], /^--from \(1970-01-01T00:00:00\.000Z when not given\) is after --to$/m],
      [['release'], /--period is required/],
      [['release', '--period', '20x5'], /--period must be a UTC year/],
      // Not over yet: told from the clock, before the store (unreachable here) is opened.
      [['release', '--period', '2099-12'], /--period 2099-12 is not over until 2100-01-01T00:00:00\.000Z: a release is of a closed period/],
      [['retract', '--reason', 'dpa'], /give the report/],
      [['keys', 'add'], /--name is required/],
      [['keys', 'rotate', '--name', 'bad name'], /--name must be/],
      [['cities', 'publish', '--from', 'boundaries/ph-2023', '--attribution', ''], /--attribution is required/],
      [['cities', 'publish', '--from', 'boundaries/ph-2023', '--label', ''], /--label is required/],
    ] as const) {
      mistakes.push(run([...args], offline).then((got) => expect([args.join(' '), got.code, got.stderr]).toEqual([args.join(' '), 2, expect.stringMatching(message)])));
    }
    // Side by side: each is a process of its own that opens nothing.
    await Promise.all(mistakes);
    await expect(fs.access(fresh)).rejects.toThrow();
    const bare = await run([], env);
    expect([bare.code, bare.stdout, bare.stderr]).toEqual([2, '', expect.stringMatching(/^usage: flood-archive <command>/)]);
    for (const command of ['export', 'verify', 'compact', 'reprocess']) {
      const backwards = await run([command, '--from', '2026-11-02', '--to', '2026-11-01', '--format', 'csv', '--out', path.join(env.DATA_DIR, 'out.csv')].slice(0, command === 'export' ? 9 : 5), env);
      expect([command, backwards.code, backwards.stderr]).toEqual([command, 2, expect.stringMatching(/--from is after --to/)]);
    }
    // A bad window is a usage error, never a run that "stopped" and should be run again.
    const backwardsReprocess = await run(['reprocess', '--from', '2026-13-01', '--to', '2026-11-01'], env);
    expect([backwardsReprocess.code, backwardsReprocess.stderr]).toEqual([2, expect.not.stringMatching(/stopped|run the same command again/)]);
    // An option given twice: refused, not the last one taken (a retraction cannot be undone).
    const twice = await run(['retract', '--post-id', '1', '--post-id', '2', '--reason', 'dpa'], env);
    expect([twice.code, twice.stderr]).toEqual([2, expect.stringMatching(/^--post-id given twice$/m)]);
    expect((await run(['keys', 'add', '--name', 'a', '--name', 'b'], env)).code).toBe(2);
    // What every object inherits is no command.
    for (const inherited of ['constructor', 'toString', '__proto__']) {
      const got = await run([inherited, '--help'], env);
      expect([inherited, got.code, got.stderr]).toEqual([inherited, 2, expect.stringMatching(/^unknown command/)]);
    }
    // Seconds are digits: an empty --older-than is not 0 (every pending report re-enqueued).
    expect((await run(['reconcile', '--older-than', ''], env)).code).toBe(2);
    const absent = await run(['import', '--file', path.join(env.DATA_DIR, 'nowhere.ndjson')], env);
    expect([absent.code, absent.stderr]).toEqual([2, expect.stringMatching(/nowhere\.ndjson: no such file/)]);
    const bad = await run(['verify'], { ...env, FLUSH_INTERVAL_SECONDS: '-1' });
    expect(bad.code).toBe(78);
    expect(bad.stderr).toMatch(/FLUSH_INTERVAL_SECONDS/);
  });

  it('import and export mistakes exit 2 with what to fix, never a hint to resume, and touch no input', async () => {
    const dataDir = await tempDir();
    const env = { DATA_DIR: dataDir, API_KEYS: 'alpha:alpha-key-0123456789abcdef' };
    const lines = [report(1), report(2)].map((r) => JSON.stringify(r)).join('\n');
    const file = path.join(dataDir, 'in.ndjson');
    await fs.writeFile(file, lines);
    const mistake = async (args: string[], message: RegExp) => {
      const got = await run(args, env);
      expect([args.join(' '), got.code, got.stderr]).toEqual([args.join(' '), 2, expect.stringMatching(message)]);
      expect(got.stderr).not.toMatch(/resume/);
    };
    // The rejects file is written over: naming the input would have emptied it.
    await mistake(['import', '--file', file, '--rejects', file], /--rejects .* is .*in\.ndjson: the rejects file is written over/);
    expect(await fs.readFile(file, 'utf8')).toBe(lines);
    await mistake(['import', '--file', file, '--rejects', path.join(dataDir, 'nowhere', 'r.ndjson')], /there is no folder .*nowhere to write it in/);
    const text = path.join(dataDir, 'in.txt');
    await fs.writeFile(text, lines);
    await mistake(['import', '--file', text], /cannot tell the format of .*in\.txt from its name: pass --format/);
    await mistake(['import', '--file', text, '--format', 'csv'], /in\.txt could not be read as CSV/);
    // A run stopped by such a mistake leaves the last run's rejects as they were.
    const oneBad = path.join(dataDir, 'one-bad.ndjson');
    await fs.writeFile(oneBad, `${JSON.stringify(report(3))}\n{"post_id":\n`);
    expect((await run(['import', '--file', oneBad, '--json'], env)).code).toBe(0);
    const kept = await fs.readFile(`${oneBad}.rejected.ndjson`, 'utf8');
    expect(kept).toMatch(/"record":2/);
    await mistake(['import', '--file', oneBad, '--format', 'csv'], /could not be read as CSV/);
    expect(await fs.readFile(`${oneBad}.rejected.ndjson`, 'utf8')).toBe(kept);
    await mistake(['import', '--file', dataDir], /is not a regular file \(a folder, a pipe, a device such as \/dev\/stdin\)/);
    // A compressed file: its bytes would make every line a reject, and an import that "finished".
    const gzipped = path.join(dataDir, 'in.ndjson.gz');
    await fs.writeFile(gzipped, zlib.gzipSync(lines));
    await mistake(['import', '--file', gzipped], /in\.ndjson\.gz is gzip-compressed: write out its text \(`gzip -dc \S+in\.ndjson\.gz > FILE`\) and import FILE/);
    // Whatever its name says.
    const named = path.join(dataDir, 'named.ndjson');
    await fs.writeFile(named, zlib.gzipSync(lines));
    await mistake(['import', '--file', named], /named\.ndjson is gzip-compressed/);
    expect(await fs.stat(`${gzipped}.rejected.ndjson`).catch(() => undefined)).toBeUndefined();
    await mistake(['import', '--file', file, '--rejects', dataDir], /--rejects .* is a folder: name the file/);
    // A CSV column named twice would be read as its last one: the file is refused.
    const twice = path.join(dataDir, 'twice.csv');
    await fs.writeFile(twice, 'post_id,created_at,disaster_type,the_geom,post_id\n11,2025-07-02T00:00:00Z,flood,POINT(121.0497 14.6516),22\n');
    await mistake(['import', '--file', twice], /its CSV header names post_id twice/);
    // Boundary files that cannot be read: named, exit 2, nothing published.
    const emptyFolder = await tempDir();
    await mistake(['cities', 'publish', '--from', emptyFolder], /\/cities\.geojson: no such file; \S+\/local-areas\.geojson: no such file/);
    await mistake(['cities', 'publish', '--from', file], /in\.ndjson is no folder/);
    const notJson = path.join(dataDir, 'bad.geojson');
    await fs.writeFile(notJson, '{"type":"FeatureCollection",');
    await mistake(['cities', 'publish', '--cities', notJson, '--local-areas', notJson], /bad\.geojson is not JSON/);
    // A file whose structure is wrong is the command's mistake, not a success that rejected every record.
    const semicolons = path.join(dataDir, 'semi.csv');
    await fs.writeFile(semicolons, 'post_id;created_at;lat;lng\n1;2026-11-21T00:00:00Z;14.65;121.05\n');
    await mistake(['import', '--file', semicolons], /semi\.csv: its CSV header \(post_id;created_at;lat;lng\) has no post_id column and no point column/);
    const shouting = path.join(dataDir, 'upper.csv');
    await fs.writeFile(shouting, 'POST_ID,CREATED_AT,LAT,LNG\n1,2026-11-21T00:00:00Z,14.65,121.05\n');
    await mistake(['import', '--file', shouting], /upper\.csv: its CSV header .* has no post_id column/);
    const noList = path.join(dataDir, 'nolist.geojson');
    await fs.writeFile(noList, '{"type":"FeatureCollection","features":{"type":"Feature"}}');
    await mistake(['import', '--file', noList], /nolist\.geojson is no FeatureCollection with a list of features/);
    // Too large to read whole (a sparse file: only its size is read): how to import it instead.
    const huge = path.join(dataDir, 'huge.geojson');
    await fs.writeFile(huge, '{"type":"FeatureCollection","features":[');
    await fs.truncate(huge, 129 * 2 ** 20);
    await mistake(['import', '--file', huge], /huge\.geojson is a GeoJSON document of 129 MiB; one over 128 MiB is not read whole: write it one feature a line \(ogr2ogr -f GeoJSONSeq /);
    // A quote never closed: refused once a record passes 16 MiB, not read to the end into memory.
    const unclosed = path.join(dataDir, 'unclosed.csv');
    await fs.writeFile(unclosed, `post_id,created_at,disaster_type,the_geom,text\n1,2025-07-02T00:00:00Z,flood,POINT(121.0497 14.6516),"${'x'.repeat(17 * 2 ** 20)}\n`);
    await mistake(['import', '--file', unclosed], /unclosed\.csv could not be read as CSV: Max Record Size.* at line 2 \(over 16 MiB: a quote never closed\?\)/);
    const truncated = path.join(dataDir, 'cut.geojson');
    await fs.writeFile(truncated, '{"type":"FeatureCollection","features":[{"type":"Feature",');
    await mistake(['import', '--file', truncated], /cut\.geojson is not one GeoJSON document/);
    // --out a pipe (or a device) is refused, not replaced by a file; a link is followed, and kept.
    const fifo = path.join(dataDir, 'out.fifo');
    await promisify(execFile)('mkfifo', [fifo]);
    await mistake(['export', '--from', '2026-11-01', '--to', '2026-11-02', '--format', 'csv', '--out', fifo], /out\.fifo is not a regular file/);
    expect((await fs.lstat(fifo)).isFIFO()).toBe(true);
    const target = path.join(dataDir, 'target.csv');
    await fs.writeFile(target, 'old');
    const link = path.join(dataDir, 'link.csv');
    await fs.symlink(target, link);
    expect((await run(['export', '--from', '2026-11-01', '--to', '2026-11-02', '--format', 'csv', '--out', link], env)).code).toBe(0);
    expect((await fs.lstat(link)).isSymbolicLink()).toBe(true);
    expect(await fs.readFile(target, 'utf8')).toMatch(/^pkey,created_at,/);
    // A link to no file yet: the file is made where it points, the link kept.
    const dangling = path.join(dataDir, 'dangling.csv');
    const notYet = path.join(dataDir, 'not-yet.csv');
    await fs.symlink(notYet, dangling);
    expect((await run(['export', '--from', '2026-11-01', '--to', '2026-11-02', '--format', 'csv', '--out', dangling], env)).code).toBe(0);
    expect((await fs.lstat(dangling)).isSymbolicLink()).toBe(true);
    expect(await fs.readFile(notYet, 'utf8')).toMatch(/^pkey,created_at,/);
    // A link read from the folder it really sits in (here through a linked folder), as the system reads it.
    await fs.mkdir(path.join(dataDir, 'real', 'sub'), { recursive: true });
    await fs.mkdir(path.join(dataDir, 'real', 'other'));
    await fs.writeFile(path.join(dataDir, 'real', 'other', 'out.csv'), 'old');
    await fs.symlink(path.join(dataDir, 'real', 'sub'), path.join(dataDir, 'linkdir'));
    await fs.symlink('../other/out.csv', path.join(dataDir, 'real', 'sub', 'out.csv'));
    expect((await run(['export', '--from', '2026-11-01', '--to', '2026-11-02', '--format', 'csv', '--out', path.join(dataDir, 'linkdir', 'out.csv')], env)).code).toBe(0);
    expect(await fs.readFile(path.join(dataDir, 'real', 'other', 'out.csv'), 'utf8')).toMatch(/^pkey,created_at,/);
    // Links that go round: refused, nothing replaced.
    await fs.symlink(path.join(dataDir, 'loop-b'), path.join(dataDir, 'loop-a'));
    await fs.symlink(path.join(dataDir, 'loop-a'), path.join(dataDir, 'loop-b'));
    await mistake(['export', '--from', '2026-11-01', '--to', '2026-11-02', '--format', 'csv', '--out', path.join(dataDir, 'loop-a')], /loop-a: its links go round in a loop/);
    expect((await fs.lstat(path.join(dataDir, 'loop-a'))).isSymbolicLink()).toBe(true);
    // The rejects through a link to no file yet: written where it points, the link kept.
    const rejectsLink = path.join(dataDir, 'rejects-link.ndjson');
    const rejectsTarget = path.join(dataDir, 'rejects-target.ndjson');
    await fs.symlink(rejectsTarget, rejectsLink);
    expect((await run(['import', '--file', oneBad, '--rejects', rejectsLink, '--restart', '--json'], env)).code).toBe(0);
    expect((await fs.lstat(rejectsLink)).isSymbolicLink()).toBe(true);
    expect(await fs.readFile(rejectsTarget, 'utf8')).toMatch(/"record":2/);
    // Nothing to resume is left behind: no checkpoint, no run folder.
    for (const f of [truncated, text]) await expect(fs.stat(`${f}.import-state.json`)).rejects.toMatchObject({ code: 'ENOENT' });
    // Nor an empty rejects file beside a file refused for its structure.
    for (const f of [truncated, text, semicolons, shouting, noList]) await expect(fs.stat(`${f}.rejected.ndjson`), f).rejects.toMatchObject({ code: 'ENOENT' });
    expect((await fs.readdir(path.join(dataDir, 'tmp', 'import'))).filter((n) => !n.startsWith('import.lock'))).toEqual([]);
    // An empty GeoJSON file holds no record, as an empty NDJSON file does.
    const empty = path.join(dataDir, 'empty.geojson');
    await fs.writeFile(empty, '\n');
    const none = await run(['import', '--file', empty, '--json'], env);
    expect([none.code, JSON.parse(none.stdout)]).toEqual([0, expect.objectContaining({ records: 0, accepted: 0 })]);
    // /dev/stdout on a pipe (as here) names a pipe, not a file.
    await mistake(['export', '--from', '2026-11-01', '--to', '2026-11-02', '--format', 'csv', '--out', '/dev/stdout'], /--out \/dev\/stdout is not a regular file/);
    // A folder no file can be made in (sysfs refuses root too): told before the data dir is made.
    const neverMade = path.join(dataDir, 'never-made');
    const unwritable = await run(['export', '--from', '2026-11-01', '--to', '2026-11-02', '--format', 'csv', '--out', '/sys/out.csv'], { ...env, DATA_DIR: neverMade });
    expect([unwritable.code, unwritable.stderr]).toEqual([2, expect.stringMatching(/--out \/sys\/out\.csv: files cannot be made in \/sys \(E[A-Z]+\): name a file in another folder/)]);
    await expect(fs.stat(neverMade)).rejects.toMatchObject({ code: 'ENOENT' });
    // A name as long as a file's may be (255 bytes): its partial's name is cut to fit.
    for (const format of ['csv', 'parquet']) {
      const longest = path.join(dataDir, `${'é'.repeat(120)}${'x'.repeat(255 - 240 - format.length - 1)}.${format}`);
      expect(Buffer.byteLength(path.basename(longest))).toBe(255);
      const got = await run(['export', '--from', '2026-11-01', '--to', '2026-11-02', '--format', format, '--out', longest, '--json'], env);
      expect([got.code, got.stderr]).toEqual([0, '']);
      expect((await fs.stat(longest)).size).toBeGreaterThan(0);
    }
    for (const format of ['csv', 'parquet']) {
      const out = path.join(dataDir, 'missing', `out.${format}`);
      await mistake(['export', '--from', '2026-11-01', '--to', '2026-11-02', '--format', format, '--out', out], /there is no folder .*missing to write it in/);
      await expect(fs.stat(path.dirname(out))).rejects.toMatchObject({ code: 'ENOENT' });
    }
    // A partner no key is named after is imported as asked (the service's API_KEYS may name it), with a warning.
    const ghost = await run(['import', '--file', file, '--partner', 'alhpa', '--json'], env);
    expect([ghost.code, ghost.stderr]).toEqual([0, expect.stringMatching(/warning: no API key named alhpa is known here/)]);
    expect((await run(['import', '--file', file, '--partner', 'alpha', '--restart', '--json'], env)).stderr).not.toMatch(/warning/);
    // The key generated for a data directory is known by its name too.
    const generatedDir = await tempDir();
    await fs.writeFile(path.join(generatedDir, 'api-key'), 'generated-key-0123456789abcdef\n', { mode: 0o600 });
    expect((await run(['import', '--file', file, '--partner', 'local', '--json'], { DATA_DIR: generatedDir })).stderr).not.toMatch(/warning/);
    expect((await run(['import', '--file', file, '--partner', 'lokal', '--json'], { DATA_DIR: generatedDir })).stderr).toMatch(/warning: no API key named lokal is known here/);
  }, 360_000); // some thirty commands, each a new process: over two minutes on a busy host

  it('refuses an option its subcommand does not read, and names what to give where a word is missing or wrong', async () => {
    const env = { DATA_DIR: await tempDir(), API_KEYS: 'alpha:alpha-key-0123456789abcdef' };
    const expectUsage = async (args: string[], message: RegExp) => {
      const got = await run(args, env);
      expect([args.join(' '), got.code, got.stderr]).toEqual([args.join(' '), 2, expect.stringMatching(message)]);
    };
    // Listed every key, as if the name narrowed the list.
    await expectUsage(['keys', 'list', '--name', 'alpha'], /--name is not an option of keys list/);
    await expectUsage(['subscriptions', 'failed', '--url', 'https://x.example'], /--url is not an option of subscriptions failed/);
    await expectUsage(['subscriptions', 'add', '--id', 'x', '--url', 'https://x.example', '--secret-file', '-'], /--id is not an option of subscriptions add \(it takes --url, /);
    await expectUsage(['retract', '--reason', 'r'], /give the report: --pkey KEY, or --post-id N/);
    await expectUsage(['cities', 'publish'], /publish takes --from DIR, or --cities F with --local-areas F/);
    await expectUsage(['cities', 'publish', '--from', path.join(env.DATA_DIR, 'nowhere')], /--from .*nowhere: no such folder/);
    await expectUsage(['cities', 'rollback', '--to', 'nope'], /--to nope: no such version/);
    await expectUsage(['verify', '--from', '2099-01-01'], /--from is after --to \(20\d\d-.*Z when not given\)/);
    const absent = await run(['retract', '--post-id', '404', '--reason', 'r'], env);
    expect([absent.code, absent.stdout, absent.stderr]).toEqual([1, '', expect.stringMatching(/no such report was accepted: post_id 404 of no partner/)]);
  });

  it('Ctrl-C while a command opens its store stops it before any work, and says so', async () => {
    // A store that takes connections and never answers: the command waits there, opening.
    const connected: net.Socket[] = [];
    const silent = net.createServer((socket) => connected.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const endpoint = `http://127.0.0.1:${(silent.address() as net.AddressInfo).port}`;
    try {
      const child = spawn(process.execPath, [CLI, 'compact'], {
        env: { PATH: process.env.PATH ?? '', TZ: 'UTC', DATA_DIR: await tempDir(), STORAGE_URL: 's3://bucket/', QUEUE_URL: `${endpoint}/000000000000/q`, AWS_ENDPOINT_URL: endpoint, AWS_ACCESS_KEY_ID: 'x', AWS_SECRET_ACCESS_KEY: 'x' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (d) => (stderr += d));
      child.stdout.resume();
      const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
      while (connected.length === 0 && child.exitCode === null) await new Promise((r) => setTimeout(r, 10));
      child.kill('SIGINT');
      expect(await exited).toBe(130);
      expect(stderr).toMatch(/^interrupted \(SIGINT\) while opening the data directory and the store, before any of the command's work: run it again$/m);
    } finally {
      connected.forEach((s) => s.destroy());
      silent.close();
    }
  });

  it('import stopped by Ctrl-C says how to go on and gives its locks back: run again at once, it finishes with every record once', async () => {
    const dataDir = await tempDir();
    const env = { DATA_DIR: dataDir, API_KEYS: 'alpha:alpha-key-0123456789abcdef' };
    const file = path.join(dataDir, 'many.ndjson');
    const n = 30_000;
    const at = Date.UTC(2026, 9, 1);
    await fs.writeFile(file, Array.from({ length: n }, (_, i) => JSON.stringify(report(i + 1, { created_at: new Date(at + i * 60_000).toISOString() }))).join('\n'));
    // Once it has begun (its locks taken), interrupted as a person at a terminal would.
    const importing = await startedCli(['import', '--file', file], env);
    importing.child.kill('SIGINT');
    expect(await importing.exited).toBe(130);
    expect(importing.stderr()).toMatch(/import interrupted \(SIGINT\); run the same command again to resume from its checkpoint \(.*many\.ndjson\.import-state\.json\)/);
    // Both locks given back on the way out, not left to go stale.
    await expect(fs.stat(path.join(dataDir, 'tmp', 'import', 'import.lock'))).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(fs.stat(path.join(dataDir, 'store', 'ingest', 'import-lock.json'))).rejects.toMatchObject({ code: 'ENOENT' });
    const again = await run(['import', '--file', file, '--json'], env);
    expect([again.code, again.stderr]).toEqual([0, expect.not.stringMatching(/another import/)]);
    const out = path.join(dataDir, 'out.csv');
    expect((await run(['export', '--from', '2026-10-01', '--to', '2026-11-30', '--format', 'csv', '--out', out, '--json'], env)).code).toBe(0);
    const rows = (await fs.readFile(out, 'utf8')).trim().split('\n').slice(1);
    expect(rows).toHaveLength(n);
    expect(new Set(rows.map((r) => r.split(',')[0])).size).toBe(n);
    expect((await fs.readdir(dataDir)).filter((f) => f.endsWith('.tmp'))).toEqual([]);

    // An export stopped by Ctrl-C leaves nothing: neither a file under --out nor its partial beside it.
    const geo = path.join(dataDir, 'stopped.geojson');
    const exporting = await startedCli(['export', '--from', '2026-10-01', '--to', '2026-11-30', '--format', 'geojson', '--out', geo], env);
    // Stopped while it reads its first days, interrupted, then let go: the signal is its next event.
    exporting.child.kill('SIGSTOP');
    exporting.child.kill('SIGINT');
    exporting.child.kill('SIGCONT');
    expect(await exporting.exited).toBe(130);
    expect(exporting.stderr()).toMatch(/export interrupted \(SIGINT\); nothing was written under --out/);
    expect((await fs.readdir(dataDir)).filter((f) => f.startsWith('stopped.geojson'))).toEqual([]);

    // Killed outright, an export cannot clean up: the next one to the same file removes what it
    // left, and keeps the file of one still running (here, this process's pid).
    const killed = await startedCli(['export', '--from', '2026-10-01', '--to', '2026-11-30', '--format', 'geojson', '--out', geo], env);
    killed.child.kill('SIGKILL');
    await killed.exited;
    await fs.writeFile(`${geo}.partial-${killed.child.pid}`, '{"type":"FeatureCollection","features":[');
    await fs.writeFile(`${geo}.partial-${process.pid}`, 'another export under way');
    expect((await run(['export', '--from', '2026-10-01', '--to', '2026-11-30', '--format', 'geojson', '--out', geo, '--json'], env)).code).toBe(0);
    expect((await fs.readdir(dataDir)).filter((f) => f.startsWith('stopped.geojson')).sort()).toEqual(['stopped.geojson', `stopped.geojson.partial-${process.pid}`]);
    expect(JSON.parse(await fs.readFile(geo, 'utf8')).features).toHaveLength(n);

    // A Parquet export writes pieces in a folder beside --out (a filtered window is DuckDB's to
    // write). Stopped by Ctrl-C while the folder is there (let run a millisecond at a time until
    // it is), it leaves neither the folder nor a file.
    const parquet = path.join(dataDir, 'stopped.parquet');
    const stepped = await startedCli(['export', '--from', '2026-10-01', '--to', '2026-11-30', '--format', 'parquet', '--admin', 'PH-QC', '--out', parquet], env);
    let running = true;
    void stepped.exited.then(() => (running = false));
    const workDir = `${parquet}.partial-${stepped.child.pid}.d`;
    stepped.child.kill('SIGSTOP');
    while (running && !(await fs.stat(workDir).catch(() => undefined))) {
      stepped.child.kill('SIGCONT');
      await new Promise((r) => setTimeout(r, 1));
      stepped.child.kill('SIGSTOP');
    }
    expect(running, 'the export ended before its working folder was seen').toBe(true);
    stepped.child.kill('SIGINT');
    stepped.child.kill('SIGCONT');
    expect(await stepped.exited).toBe(130);
    expect(stepped.stderr()).toMatch(/export interrupted \(SIGINT\); nothing was written under --out/);
    expect((await fs.readdir(dataDir)).filter((f) => f.startsWith('stopped.parquet'))).toEqual([]);
    // Killed outright: the next export removes its working folder with its partial.
    await fs.mkdir(path.join(`${parquet}.partial-${killed.child.pid}.d`, 'parquet-x'), { recursive: true });
    await fs.writeFile(path.join(`${parquet}.partial-${killed.child.pid}.d`, 'parquet-x', '0.parquet'), 'a piece');
    expect((await run(['export', '--from', '2026-10-01', '--to', '2026-11-30', '--format', 'parquet', '--out', parquet, '--json'], env)).code).toBe(0);
    expect((await fs.readdir(dataDir)).filter((f) => f.startsWith('stopped.parquet'))).toEqual(['stopped.parquet']);
  }, 120_000);

  it('exits 69 (unavailable) naming the store or the queue it cannot reach, whichever the command needs first', async () => {
    // A port nothing listens on: every connection is refused.
    const closed = `http://127.0.0.1:${await freePort()}`;
    const aws = { AWS_ENDPOINT_URL: closed, AWS_ACCESS_KEY_ID: 'test', AWS_SECRET_ACCESS_KEY: 'test', AWS_REGION: 'us-east-1' };
    for (const command of [['keys', 'list'], ['verify', '--from', '2026-11-01', '--to', '2026-11-02'], ['bootstrap']]) {
      const onS3 = await run(command, { DATA_DIR: await tempDir(), STORAGE_URL: 's3://flood-archive/x', ...aws });
      expect(onS3.code, command.join(' ')).toBe(69);
      expect(onS3.stderr).toMatch(/object store .*\(ECONNREFUSED\): is the object store reachable\?/);
    }
    // Not a directory: the data dir is named, not the object store.
    const file = path.join(await tempDir(), 'a-file');
    await fs.writeFile(file, '');
    const notADirectory = await run(['keys', 'list'], { DATA_DIR: path.join(file, 'data') });
    expect(notADirectory.code).toBe(69);
    expect(notADirectory.stderr).toMatch(/data directory unavailable \(ENO\w+\).*set DATA_DIR to a folder/);
    // A folder a pseudo-filesystem refuses: Node's own recursive mkdir spun there forever, deaf to signals.
    const underProc = await run(['keys', 'list'], { DATA_DIR: '/proc/no-such-folder/data' });
    expect(underProc.code).toBe(69);
    expect(underProc.stderr).toMatch(/data directory unavailable \(ENOENT\).*set DATA_DIR to a folder/);
    const cacheUnderFile = await run(['keys', 'list'], { DATA_DIR: await tempDir(), CACHE_DIR: path.join(file, 'cache') });
    expect(cacheUnderFile.code).toBe(69);
    expect(cacheUnderFile.stderr).toMatch(/cache folder unavailable \(ENOTDIR\).*set CACHE_DIR to a folder/);
    const onSqs = await run(['bootstrap'], { DATA_DIR: await tempDir(), QUEUE_URL: `${closed}/000000000000/flood-reports`, ...aws });
    expect(onSqs.code).toBe(69);
    expect(onSqs.stderr).toMatch(/queue .*\(ECONNREFUSED\): is the queue reachable\?/);
  });

  it('refuses a ledger or event log a later release migrated further (exit 69), and leaves it as it was', async () => {
    for (const [file, name] of [['ledger.sqlite', 'ledger'], ['events.sqlite', 'event log']] as const) {
      const dataDir = await tempDir();
      expect((await run(['keys', 'list'], { DATA_DIR: dataDir })).code).toBe(0);
      const raw = new Database(path.join(dataDir, file));
      const ours = raw.pragma('user_version', { simple: true }) as number;
      // A later release's change this build cannot know: a table of its own and a version past this build's.
      raw.exec('CREATE TABLE later_release (note TEXT)');
      raw.pragma(`user_version = ${ours + 1}`);
      raw.close();
      for (const command of [['keys', 'list'], ['all']]) {
        const refused = await run(command, { DATA_DIR: dataDir, PORT: String(await freePort()) });
        expect(refused.code, `${file}: ${command[0]}`).toBe(69);
        expect(refused.stderr).toContain(`the ${name} (${file}) has schema ${ours + 1}, newer than this build's ${ours}`);
        expect(refused.stderr).toContain('this build does not downgrade it');
      }
      const after = new Database(path.join(dataDir, file), { readonly: true });
      expect(after.pragma('user_version', { simple: true })).toBe(ours + 1);
      after.close();
    }
  });

  it('a port another process listens on is told, with the setting that moves it', async () => {
    const holder = net.createServer();
    await new Promise<void>((resolve) => holder.listen(0, resolve));
    try {
      const port = String((holder.address() as net.AddressInfo).port);
      const started = await run(['serve'], { DATA_DIR: await tempDir(), PORT: port });
      expect(started.code).toBe(1);
      expect(started.stderr).toMatch(/EADDRINUSE.*another process listens there: stop it, or set PORT \(and METRICS_PORT, if set\) to a free port/);
    } finally {
      holder.close();
    }
  });

  it('a store that refuses (AccessDenied) is told as a question of rights, not of reach: a refused delete too', async () => {
    // S3 as a role without the right answers: 403 AccessDenied, and a batch delete's keys each refused in a 200.
    const refusing = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const deleting = req.method === 'POST' && (req.url ?? '').includes('delete');
        res.writeHead(deleting ? 200 : 403, { 'content-type': 'application/xml' });
        res.end(
          deleting
            ? '<?xml version="1.0" encoding="UTF-8"?><DeleteResult><Error><Key>x/releases/2025-04-r1/reports-2025-04.parquet</Key><Code>AccessDenied</Code><Message>Access Denied</Message></Error></DeleteResult>'
            : '<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>',
        );
      });
    });
    await new Promise<void>((resolve) => refusing.listen(0, '127.0.0.1', resolve));
    const endpoint = `http://127.0.0.1:${(refusing.address() as net.AddressInfo).port}`;
    try {
      const aws = { AWS_ENDPOINT_URL: endpoint, AWS_ACCESS_KEY_ID: 'test', AWS_SECRET_ACCESS_KEY: 'test', AWS_REGION: 'us-east-1' };
      const listed = await run(['keys', 'list'], { DATA_DIR: await tempDir(), STORAGE_URL: 's3://flood-archive/x', ...aws });
      expect(listed.code).toBe(69);
      expect(listed.stderr).toMatch(/^keys stopped: .*\((AccessDenied|Forbidden)\): the object store refused the request: does this process's role allow it/m);
      const client = new S3Client({ endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: 'test', secretAccessKey: 'test' }, maxAttempts: 1 });
      const store = new S3ObjectStore(client, { bucket: 'flood-archive', prefix: 'x/' });
      await expect(store.delete(['releases/2025-04-r1/reports-2025-04.parquet'])).rejects.toThrow(/\(AccessDenied\): 1 of 1 objects not deleted, x\/releases\/2025-04-r1\/reports-2025-04.parquet the first/);
      // A HEAD's refusal has no body to name it by: its status does.
      await expect(store.head('releases/catalog.json')).rejects.toThrow(/\(HTTP 403\)/);
      client.destroy();
    } finally {
      refusing.close();
    }
  });

  it('lists the key a data dir generated for itself when no key is configured or kept, without the key', async () => {
    const dataDir = await tempDir();
    expect((await run(['keys', 'list'], { DATA_DIR: dataDir })).stdout.trim()).toBe('no keys');
    // As the service does on its first start without keys.
    const { generated } = await resolveApiKeys([], dataDir);
    const listed = JSON.parse((await run(['keys', 'list', '--json'], { DATA_DIR: dataDir })).stdout);
    expect(listed).toEqual([{ name: 'local', from: `generated (${path.join(dataDir, 'api-key')})` }]);
    expect(JSON.stringify(listed)).not.toContain(generated!.key);
  });

  it('retracts any report by post_id with a reason, once; keeps keys hashed: add, list, rotate, revoke', async () => {
    const dataDir = await tempDir();
    const env = { DATA_DIR: dataDir, API_KEYS: 'alpha:alpha-key-0123456789abcdef' };
    const file = path.join(dataDir, 'in.ndjson');
    await fs.writeFile(file, [report(1), report(2)].map((r) => JSON.stringify(r)).join('\n'));
    expect((await run(['import', '--file', file, '--json'], env)).code).toBe(0);
    const retracted = await run(['retract', '--post-id', '1', '--reason', 'exposes a person (DPA request)', '--json'], env);
    expect(retracted.code).toBe(0);
    expect(JSON.parse(retracted.stdout)).toMatchObject({ post_id: 1, pkey: 'partner-1', retracted: true, first: true, by: 'ops', reason: 'exposes a person (DPA request)' });
    const again = await run(['retract', '--post-id', '1', '--reason', 'again', '--json'], env);
    expect(JSON.parse(again.stdout)).toMatchObject({ first: false, reason: 'exposes a person (DPA request)' });
    expect((await run(['retract', '--post-id', '404', '--reason', 'x'], env)).code).toBe(1);
    for (const bad of [['--post-id', 'x', '--reason', 'r'], ['--post-id', '1'], ['--reason', 'r']]) expect((await run(['retract', ...bad], env)).code).toBe(2);
    const db = new Database(path.join(dataDir, 'ledger.sqlite'), { readonly: true });
    expect(db.prepare("SELECT pkey, retracted_by FROM reports WHERE retracted_at_ms IS NOT NULL").all()).toEqual([{ pkey: 'partner-1', retracted_by: 'ops' }]);
    // An import as a partner: its post_ids are that partner's own, beside the operators' same ones.
    const asAlpha = await run(['import', '--file', file, '--partner', 'alpha', '--restart', '--json'], env);
    expect([asAlpha.code, JSON.parse(asAlpha.stdout)]).toEqual([0, expect.objectContaining({ records: 2, accepted: 2, duplicate: 0 })]);
    const byPartner = await run(['retract', '--post-id', '2', '--partner', 'alpha', '--reason', 'r', '--json'], env);
    expect(JSON.parse(byPartner.stdout)).toMatchObject({ post_id: 2, pkey: 'partner-alpha-2', first: true });
    const byPkey = await run(['retract', '--pkey', 'partner-2', '--reason', 'r', '--json'], env);
    expect(JSON.parse(byPkey.stdout)).toMatchObject({ post_id: 2, pkey: 'partner-2', first: true });
    for (const bad of [['import', '--file', file, '--partner', 'Not A Name'], ['retract', '--pkey', 'partner-02', '--reason', 'r'], ['retract', '--pkey', 'partner-2', '--post-id', '2', '--reason', 'r']]) {
      expect((await run(bad, env)).code).toBe(2);
    }
    expect(db.prepare('SELECT partner, pkey FROM reports ORDER BY pkey').all()).toEqual([
      { partner: '', pkey: 'partner-1' },
      { partner: '', pkey: 'partner-2' },
      { partner: 'alpha', pkey: 'partner-alpha-1' },
      { partner: 'alpha', pkey: 'partner-alpha-2' },
    ]);

    const added = JSON.parse((await run(['keys', 'add', '--name', 'beta', '--json'], env)).stdout);
    expect(added).toMatchObject({ name: 'beta', key: expect.stringMatching(/^[A-Za-z0-9_-]{32}$/) });
    // Only the digest is kept.
    const kept = db.prepare('SELECT name, digest FROM api_keys').all() as { name: string; digest: string }[];
    expect(kept).toEqual([{ name: 'beta', digest: createHash('sha256').update(added.key).digest('hex') }]);
    expect(JSON.stringify(db.prepare('SELECT * FROM api_keys').all())).not.toContain(added.key);
    const rotated = JSON.parse((await run(['keys', 'rotate', '--name', 'beta', '--json'], env)).stdout);
    expect(rotated).toMatchObject({ name: 'beta', revoked: 1 });
    const listed = JSON.parse((await run(['keys', 'list', '--json'], env)).stdout);
    expect(listed.map((k: any) => [k.name, k.from, Boolean(k.revoked_at)])).toEqual([['alpha', 'API_KEYS', false], ['beta', 'ledger', true], ['beta', 'ledger', false]]);
    expect(JSON.stringify(listed)).not.toContain('alpha-key-0123456789abcdef');
    expect(JSON.parse((await run(['keys', 'revoke', '--name', 'beta', '--json'], env)).stdout)).toEqual({ name: 'beta', revoked: 1 });
    expect((await run(['keys', 'add', '--name', 'Bad Name!'], env)).code).toBe(2);
    // A partner's reports and rights follow its key's name: a new key may not take one in use,
    // revoked or configured; only a rotation keeps a name.
    for (const name of ['beta', 'alpha']) {
      const refused = await run(['keys', 'add', '--name', name], env);
      expect([name, refused.code, refused.stdout]).toEqual([name, 1, '']);
      expect(refused.stderr).toMatch(name === 'beta' ? /beta already has a key.*keys rotate --name beta/ : /alpha is a key in API_KEYS/);
    }
    // A name no key has (a typo) is a mistake in the options: exit 2, nothing written.
    const unknown = await run(['keys', 'rotate', '--name', 'gamma'], env);
    expect([unknown.code, unknown.stderr.split('\n')[0]]).toEqual([2, '--name gamma: no key is named so, and no report is: add one with keys add --name gamma']);
    const typo = await run(['keys', 'revoke', '--name', 'betta'], env);
    expect([typo.code, typo.stdout, typo.stderr.split('\n')[0]]).toEqual([2, '', '--name betta: no key is named so (keys list shows them)']);
    // A key in API_KEYS is not the ledger's to revoke: the command says it still works.
    const configuredStays = await run(['keys', 'revoke', '--name', 'alpha'], env);
    expect([configuredStays.code, configuredStays.stdout, configuredStays.stderr]).toEqual([1, 'revoked 0 key(s) named alpha\n', 'the key of API_KEYS named alpha still works: remove it from API_KEYS and restart the service to stop it\n']);
    // alpha dropped from API_KEYS: its name still holds its reports. A new partner cannot take it
    // (it would answer and retract alpha's post_ids); a rotation gives alpha a key again.
    const withoutAlpha = { DATA_DIR: env.DATA_DIR };
    const taken = await run(['keys', 'add', '--name', 'alpha'], withoutAlpha);
    expect([taken.code, taken.stdout, taken.stderr]).toEqual([1, '', expect.stringMatching(/^the name alpha has reports, .*keys rotate --name alpha/)]);
    expect(JSON.parse((await run(['keys', 'rotate', '--name', 'alpha', '--json'], withoutAlpha)).stdout)).toMatchObject({ name: 'alpha', revoked: 0 });
    expect(JSON.parse((await run(['keys', 'rotate', '--name', 'beta', '--json'], env)).stdout)).toMatchObject({ name: 'beta', revoked: 0 });
    expect(db.prepare('SELECT count(*) AS n FROM api_keys').get()).toEqual({ n: 4 });
    db.close();
  });

  it('keys revoke of the generated key says how it is switched off, rather than that no key has the name', async () => {
    const dir = await tempDir();
    // As the service writes it on its first start with no key configured.
    await fs.writeFile(path.join(dir, 'api-key'), `${'k'.repeat(32)}\n`, { mode: 0o600 });
    expect(JSON.parse((await run(['keys', 'list', '--json'], { DATA_DIR: dir })).stdout)).toEqual([{ name: 'local', from: `generated (${path.join(dir, 'api-key')})` }]);
    const revoked = await run(['keys', 'revoke', '--name', 'local'], { DATA_DIR: dir });
    expect([revoked.code, revoked.stderr.split('\n')[0]]).toEqual([2, '--name local: the generated key is not the ledger\'s to revoke: it stops working once a key is added (keys add) or API_KEYS is set']);
  });

  it('publishing the same folder again without a label changes nothing: the default label holds no time', async () => {
    const env = { DATA_DIR: await tempDir() };
    const first = JSON.parse((await run(['cities', 'publish', '--from', SHARED_PH, '--json'], env)).stdout);
    expect(first).toMatchObject({ changed: true, label: 'published from ph' });
    const again = await run(['cities', 'publish', '--from', SHARED_PH, '--json'], env);
    expect([again.code, JSON.parse(again.stdout)]).toEqual([0, expect.objectContaining({ version: first.version, changed: false })]);
  });

  it('keys add refuses the name of the key generated for the data directory: its reports and rights follow the name', async () => {
    const dataDir = await tempDir();
    await fs.writeFile(path.join(dataDir, GENERATED_KEY_FILE), 'a-generated-key-0123456789abcdef\n');
    const refused = await run(['keys', 'add', '--name', GENERATED_KEY_NAME], { DATA_DIR: dataDir });
    expect([refused.code, refused.stdout]).toEqual([1, '']);
    expect(refused.stderr).toMatch(/local is the key generated for this data directory/);
    expect(JSON.parse((await run(['keys', 'add', '--name', 'gamma', '--json'], { DATA_DIR: dataDir })).stdout)).toMatchObject({ name: 'gamma' });
  });

  it('publishes the whole country from a folder in one command, validated, and lists its levels', async () => {
    const dataDir = await tempDir();
    const env = { DATA_DIR: dataDir };
    const published = await run(['cities', 'publish', '--from', SHARED_PH_NATIONAL, '--label', 'PSA/NAMRIA 2023, the Philippines', '--json'], env);
    expect(published.code).toBe(0);
    expect(JSON.parse(published.stdout)).toMatchObject({ changed: true, levels: '17 regions, 88 provinces, 1642 cities, 41096 local areas' });
    const versions = JSON.parse((await run(['cities', 'list', '--json'], env)).stdout) as { label: string; regions: number; provinces: number; cities: number; localAreas: number; current: boolean }[];
    expect(versions.find((v) => v.current)).toMatchObject({ label: 'PSA/NAMRIA 2023, the Philippines', regions: 17, provinces: 88, cities: 1642, localAreas: 41096 });
    expect(versions).toHaveLength(2);
    // A folder whose provinces name a region it lacks is refused, and the current version stays.
    const broken = await tempDir();
    for (const f of ['cities.geojson', 'local-areas.geojson', 'provinces.geojson']) await fs.copyFile(path.join(SHARED_PH_NATIONAL, f), path.join(broken, f));
    const regions = JSON.parse(await fs.readFile(path.join(SHARED_PH_NATIONAL, 'regions.geojson'), 'utf8'));
    regions.features = regions.features.slice(1);
    await fs.writeFile(path.join(broken, 'regions.geojson'), JSON.stringify(regions));
    const refused = await run(['cities', 'publish', '--from', broken], env);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/region_psgc must name a region of this set/);
    expect(JSON.parse((await run(['cities', 'list', '--json'], env)).stdout).find((v: { current: boolean }) => v.current).label).toBe('PSA/NAMRIA 2023, the Philippines');
  }, 120_000);

  it('leaves no write-ahead log beside the ledger once an import exits: its commit thread closes its connection first', async () => {
    const dataDir = await tempDir();
    const file = path.join(dataDir, 'in.ndjson');
    // Over a year, a part a day, as a backfill is.
    const created = (i: number) => new Date(Date.UTC(2025, 0, 1) + (i % 365) * 86_400_000 + (i % 24) * 3_600_000).toISOString();
    await fs.writeFile(file, Array.from({ length: 20_000 }, (_, i) => JSON.stringify(report(i + 1, { created_at: created(i) }))).join('\n'));
    const imported = await run(['import', '--file', file, '--json'], { DATA_DIR: dataDir });
    expect([imported.code, JSON.parse(imported.stdout)]).toEqual([0, expect.objectContaining({ accepted: 20_000 })]);
    // The last connection to close checkpoints the log and deletes it; a thread stopped with its
    // connection open as the process ended left megabytes of it.
    await expect(fs.stat(path.join(dataDir, 'ledger.sqlite-wal'))).rejects.toMatchObject({ code: 'ENOENT' });
    const db = new Database(path.join(dataDir, 'ledger.sqlite'), { readonly: true });
    try {
      expect(db.prepare("SELECT count(*) AS n FROM reports WHERE state = 'archived'").get()).toEqual({ n: 20_000 });
      // Each row's key derived from its identity, none stored (see the migrations).
      expect(db.prepare('SELECT count(*) AS n, count(kept_pkey) AS kept, min(pkey) AS first FROM reports').get()).toEqual({ n: 20_000, kept: 0, first: 'partner-1' });
    } finally {
      db.close();
    }
  }, 60_000);

  it('--json prints the result alone on stdout: log lines go to stderr', async () => {
    // A report accepted, its queue message lost: reconciliation queues it again, and logs so.
    const svc = await startTestService(await testRuntime(await testConfig('embedded')), { worker: false, reconcile: false });
    const dataDir = svc.rt.config.dataDir;
    try {
      expect((await postReport(svc.url, report(1))).status).toBe(201);
    } finally {
      await svc.stop();
    }
    const db = new Database(path.join(dataDir, 'ledger.sqlite'));
    expect(db.prepare('DELETE FROM queue').run().changes).toBe(1);
    db.close();
    const reconciled = await run(['reconcile', '--older-than', '0', '--json'], { DATA_DIR: dataDir, LOG_LEVEL: 'info' });
    expect([reconciled.code, JSON.parse(reconciled.stdout)]).toEqual([0, { requeued: 1 }]);
    expect(reconciled.stderr).toMatch(/"msg":"reconciled pending reports"/);
  });

  it("import names the fields its valid records gave that it did not read (a misspelt one), and how many gave each", async () => {
    const dataDir = await tempDir();
    const file = path.join(dataDir, 'in.ndjson');
    await fs.writeFile(file, [{ ...report(1), titel: 'Baha' }, { ...report(2), titel: 'Baha', extra: 1 }, { ...report(3), hello: 1, chimney: 1 }].map((r) => JSON.stringify(r)).join('\n'));
    // The same order on a host of any locale (Czech sorts "ch" after "h").
    const imported = await run(['import', '--file', file], { DATA_DIR: dataDir, LC_ALL: 'cs_CZ.UTF-8' });
    expect(imported.code).toBe(0);
    expect(imported.stdout).toMatch(/^records: 3; accepted: 3;/);
    expect(imported.stdout).toContain('\nfields not read (imported without them; see docs/operations.md): "titel" in 2, "chimney" in 1, "extra" in 1, "hello" in 1\n');
  });

  it('a reader that goes away (| head, | true) ends what the command prints, not the command: no crash on EPIPE', async () => {
    const dataDir = await tempDir();
    const file = path.join(dataDir, 'in.ndjson');
    await fs.writeFile(file, [report(1), report(2)].map((r) => JSON.stringify(r)).join('\n'));
    const child = spawn(process.execPath, [CLI, 'import', '--file', file, '--json'], { env: { PATH: process.env.PATH ?? '', DATA_DIR: dataDir }, stdio: ['ignore', 'pipe', 'pipe'] });
    // The reading end closed before the command writes its answer.
    child.stdout.destroy();
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect([code, stderr]).toEqual([0, '']);
    const verified = await run(['verify', '--from', '2026-11-21', '--to', '2026-11-21', '--json'], { DATA_DIR: dataDir });
    expect(JSON.parse(verified.stdout)).toMatchObject({ ok: true, days: [{ accepted: 2, archived: 2 }] });
  });

  it('imports with --json, lists boundary versions, and verify exits 1 on a loss', async () => {
    const dataDir = await tempDir();
    const env = { DATA_DIR: dataDir };
    const file = path.join(dataDir, 'in.ndjson');
    await fs.writeFile(file, [report(1), report(2), { ...report(3), disaster_type: 'fire' }].map((r) => JSON.stringify(r)).join('\n'));
    const imported = await run(['import', '--file', file, '--json'], env);
    expect(imported.code).toBe(0);
    expect(JSON.parse(imported.stdout)).toMatchObject({ records: 3, accepted: 2, duplicate: 0, rejected: 1 });

    const cities = await run(['cities', 'list', '--json'], env);
    const versions = JSON.parse(cities.stdout);
    expect(versions).toHaveLength(1);
    expect(versions[0]).toMatchObject({ label: 'PSA/NAMRIA 2023: Quezon City and Pampanga, 680 barangays', regions: 0, provinces: 0, cities: 2, localAreas: 680, current: true });

    // The import archived what it accepted itself (no worker runs here).
    const checked = await run(['verify', '--json'], env);
    expect(checked.code).toBe(0);
    expect(JSON.parse(checked.stdout).days).toEqual([{ day: '2026-11-21', accepted: 2, archived: 2, pending: 0, missing: 0 }]);
    // The archive's parts gone behind the system's back, the ledger saying archived: a loss.
    await fs.rm(path.join(dataDir, 'store', 'reports'), { recursive: true, force: true });
    // And one report still pending: not lost, on its way.
    const db = new Database(path.join(dataDir, 'ledger.sqlite'));
    db.prepare("UPDATE reports SET state = 'pending' WHERE pkey = 'partner-2'").run();
    db.close();
    const lost = await run(['verify', '--json'], env);
    expect(lost.code).toBe(1);
    expect(JSON.parse(lost.stdout).days).toEqual([{ day: '2026-11-21', accepted: 2, archived: 0, pending: 1, missing: 1 }]);
    expect(JSON.parse(lost.stdout).missing).toEqual(['partner-1']);
  });
});
