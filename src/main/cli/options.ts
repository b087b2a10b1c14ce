// What the command line's commands share: their shape, the option sets, the checks of option
// values, printing, and the runtime an ops command runs with.
import fs from 'node:fs/promises';
import type { ParseArgsConfig } from 'node:util';
import { isKeyName } from '../../partners/apiKeys.js';
import { parseOffsetDateTime } from '../../shared/offsetDateTime.js';
import type { Config } from '../../shared/config.js';
import { bootstrap } from '../bootstrap.js';
import type { Runtime, RuntimeOverrides } from '../runtime.js';
import { BoundaryPointerError } from '../../shared/errors.js';

/** A mistake in the command's options: exit 2, with the command's usage. */
export class UsageError extends Error {}

export type Options = ParseArgsConfig['options'];
export type Values = Record<string, string | boolean | undefined>;

export interface Command {
  summary: string;
  usage: string;
  options: Options;
  /** Takes a subcommand (`keys add`): one word before its options. Others take none. */
  subcommand?: true;
  /**
   * The options each subcommand reads, beside --json and --help: any other given is refused (a
   * `keys list --name x` would otherwise list every key, as if the name narrowed it).
   */
  subcommandOptions?: Record<string, readonly string[]>;
  /** Where to free space when the disk fills under the command (default: DATA_DIR's disk, and TMP_DIR's). */
  diskFull?: string;
  run(ctx: { config: Config; values: Values; positionals: string[] }): Promise<number>;
}

export const common: Options = { json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } };
export const window: Options = { from: { type: 'string' }, to: { type: 'string' } };

/**
 * What the commands run, loaded once a command opens its runtime (withRuntime, or a process's
 * start): `--help`, usage errors and bad configuration answer without loading DuckDB, the SDK
 * adapters and the schemas (over a second of CPU; seconds on a busy host). A live binding: the
 * command modules see it once `loadCommandModules` has run.
 */
export let deps: typeof import('../commandModules.js');

export async function loadCommandModules(): Promise<typeof deps> {
  deps ??= await import('../commandModules.js');
  return deps;
}

/**
 * Creates the bucket and queues where this process owns them: the embedded store, or an
 * emulator endpoint (LocalStack, moto). On AWS proper the stack creates them, and the task's
 * role may not.
 */
export async function bootstrapIfLocal(config: Config, rt: Runtime): Promise<void> {
  if (config.storageUrl.startsWith('file://') || config.awsEndpointUrl) {
    await bootstrap(config, { ...(rt.s3 && { s3: rt.s3 }), ...(rt.sqs && { sqs: rt.sqs }) });
  }
}

/** Runs `fn` with a runtime (made with `overrides`), closing it after. */
export async function withRuntime<T>(config: Config, fn: (rt: Runtime) => Promise<T>, overrides: RuntimeOverrides = {}): Promise<T> {
  const opened = toldWhileOpening();
  let rt: Runtime | undefined;
  try {
    await loadCommandModules();
    rt = await deps.createRuntime(config, { log: deps.createCommandLogger(config.logLevel), ...overrides });
    await bootstrapIfLocal(config, rt);
    await rt.boundaries.seedIfEmpty().catch((err: unknown) => {
      // Told, not fatal: `cities rollback` is how it is mended, and commands that need no boundaries still run.
      if (!(err instanceof BoundaryPointerError)) throw err;
      process.stderr.write(`warning: ${err.message}\n`);
    });
    opened();
    return await fn(rt);
  } finally {
    opened();
    await rt?.close();
  }
}

/**
 * Ctrl-C (or SIGTERM) while a command opens its runtime (seconds: the engine loads, the store is
 * reached) stops it before any of its work, and says so (exit 130, 143); without this it ended in
 * silence. Returns what takes the handlers off, once the command's own work begins.
 */
function toldWhileOpening(): () => void {
  const onSignal = (signal: NodeJS.Signals) => {
    process.stderr.write(`interrupted (${signal}) while opening the data directory and the store, before any of the command's work: run it again\n`);
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  return () => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  };
}

/**
 * Runs a job that holds locks in the store, ready for Ctrl-C (or SIGTERM): `advice` says how to go
 * on, the job stops at its next step (within five seconds, or it is left to its locks' going
 * stale) and gives its locks back, so the next run need not wait for them; it is left where it
 * stopped, as a crash would leave it. Exits 130 (143); once signalled, the job's own end (its
 * "lock given back" failure, or a last step's success) is not what the command reports.
 */
export async function interruptible<T>(what: string, advice: string | (() => string), job: () => Promise<T>, cleanUp?: () => void): Promise<T> {
  let stopping: Promise<never> | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    process.stderr.write(`${what} interrupted (${signal}); ${typeof advice === 'string' ? advice : advice()}\n`);
    cleanUp?.();
    stopping = new Promise<never>(() => undefined);
    void deps.giveBackLocks().finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    const result = await job();
    if (stopping) await stopping;
    return result;
  } catch (err) {
    if (stopping) await stopping;
    throw err;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

/**
 * A webhook secret: from --secret-file (a file, or - for standard input; one trailing newline
 * dropped), or from --secret, which leaves it in the process list and the shell's history.
 */
export async function secretOption(values: Values): Promise<string> {
  const file = values['secret-file'];
  if (typeof values.secret === 'string') {
    if (file !== undefined) throw new UsageError('give --secret-file or --secret, not both');
    process.stderr.write('warning: --secret leaves the secret in the process list and the shell history; use --secret-file F (- for standard input)\n');
    return values.secret;
  }
  if (typeof file !== 'string' || file === '') throw new UsageError('--secret-file is required (a file holding the secret, or - to read it from standard input)');
  let text = '';
  try {
    if (file === '-' && process.stdin.isTTY) return await typedSecret();
    if (file === '-') for await (const chunk of process.stdin) text += String(chunk);
    else text = await fs.readFile(file, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read --secret-file ${file}: ${(err as Error).message}`);
  }
  return text.replace(/\r?\n$/, '');
}

/**
 * The secret typed at a terminal (--secret-file - with nothing piped in): asked for, not echoed,
 * ended by Enter. Ctrl-C stops the command as it would anywhere else.
 */
async function typedSecret(): Promise<string> {
  const stdin = process.stdin;
  // Raw (no echo) before asking: what is typed or pasted at once is not shown either.
  stdin.setRawMode(true);
  stdin.setEncoding('utf8');
  process.stderr.write('Secret (not shown; Enter to end): ');
  const typed = await new Promise<string | undefined>((resolve) => {
    let text = '';
    const done = (value: string | undefined) => {
      stdin.off('data', onData);
      stdin.off('end', ended);
      stdin.off('error', ended);
      stdin.setRawMode(false);
      stdin.pause();
      process.stderr.write('\n');
      resolve(value);
    };
    const onData = (chunk: string) => {
      for (const ch of chunk) {
        if (ch === '\r' || ch === '\n' || ch === '\u0004') return done(text);
        if (ch === '\u0003') return done(undefined);
        // Backspace (DEL at most terminals) takes back the last character.
        if (ch === '\u007f' || ch === '\b') text = [...text].slice(0, -1).join('');
        else text += ch;
      }
    };
    // The terminal gone before Enter: nothing typed to keep.
    const ended = () => done(undefined);
    stdin.on('data', onData);
    stdin.once('end', ended);
    stdin.once('error', ended);
    stdin.resume();
  });
  if (typed !== undefined) return typed;
  // Ctrl-C, which the terminal did not turn into a signal while it was raw.
  process.kill(process.pid, 'SIGINT');
  throw new UsageError('no secret typed');
}

export function print(values: Values, result: unknown, human: () => string): void {
  process.stdout.write(values.json ? `${JSON.stringify(result, null, 2)}\n` : `${human()}\n`);
}

/**
 * `2026-11-21` (a whole UTC day) or an ISO date-time with offset. `end`: the window's end, so a
 * date is its last millisecond and a time to the second all of that second.
 */
export function instant(value: string | boolean | undefined, name: string, fallback: number, end = false): number {
  if (value === undefined) return fallback;
  const text = String(value);
  if (/^\d{4}-\d{2}-\d{2}$/.test(text)) {
    const ms = parseOffsetDateTime(`${text}T00:00:00Z`);
    if (ms !== undefined) return end ? ms + 86_400_000 - 1 : ms;
  }
  // A start between two milliseconds is the later (reports keep milliseconds).
  const ms = parseOffsetDateTime(text, !end);
  if (ms === undefined) throw new UsageError(`--${name} must be a date (2026-11-21) or an ISO date-time with offset`);
  // An end to the second covers the whole of it, as the archive's `end` does: reports keep milliseconds.
  return end && !/:\d{2}\.\d/.test(text) ? ms + 999 : ms;
}

/** A window's `--from` and `--to` instants (instant), refused when they are the wrong way round. */
export function windowOf(values: Values, fallback: { fromMs?: number; toMs?: number } = {}): { fromMs: number; toMs: number } {
  const fromMs = instant(fallback.fromMs === undefined ? required(values, 'from') : values.from, 'from', fallback.fromMs ?? 0);
  const toMs = instant(fallback.toMs === undefined ? required(values, 'to') : values.to, 'to', fallback.toMs ?? 0, true);
  const unless = (name: 'from' | 'to', ms: number) => (values[name] === undefined ? ` (${new Date(ms).toISOString()} when not given)` : '');
  if (fromMs > toMs) throw new UsageError(`--from${unless('from', fromMs)} is after --to${unless('to', toMs)}`);
  return { fromMs, toMs };
}

/** `--partner NAME`, checked as a key name; undefined when not given. */
export function partnerOption(values: Values): string | undefined {
  const name = values.partner;
  if (name === undefined) return undefined;
  if (typeof name !== 'string' || !isKeyName(name)) throw new UsageError('--partner must be a key name: 1 to 64 characters of a-z 0-9 . _ - starting with a letter or digit');
  return name;
}

export function required(values: Values, name: string): string {
  const v = values[name];
  if (typeof v !== 'string' || v === '') throw new UsageError(`--${name} is required`);
  return v;
}
