#!/usr/bin/env node
// The one command line: the service's processes and every ops command.
//   flood-archive <command> [options]      (npm run cli -- <command> …)
// Exit codes: 0 done, 1 failed or found a loss, 2 usage, 69 storage/queue
// unavailable, 78 bad configuration.
import { parseArgs } from 'node:util';
import type { Config } from '../shared/config.js';
import { dependencyName, FolderUnavailableError, isDiskFull, NewerSchemaError, UnavailableError } from '../shared/errors.js';
import { compact, exportCommand, importCommand, reconcile, reprocess, verify } from './cli/archiveCommands.js';
import { cities } from './cli/citiesCommand.js';
import { dlq } from './cli/dlqCommand.js';
import { keys } from './cli/keysCommand.js';
import { UsageError, type Command, type Values } from './cli/options.js';
import { release } from './cli/releaseCommand.js';
import { retract } from './cli/retractCommand.js';
import { all, bootstrapCommand, scheduler, serve, worker } from './cli/serviceCommands.js';
import { subscriptions } from './cli/subscriptionsCommand.js';

/** Every command, in the order the help lists them. */
const COMMANDS: Record<string, Command> = {
  all,
  serve,
  worker,
  scheduler,
  bootstrap: bootstrapCommand,
  compact,
  reconcile,
  reprocess,
  import: importCommand,
  export: exportCommand,
  release,
  cities,
  dlq,
  retract,
  keys,
  verify,
  subscriptions,
};

function help(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((c) => c.length));
  return [
    'usage: flood-archive <command> [options]   (npm run cli -- <command> …)',
    '',
    ...Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`),
    '',
    'Every command takes --help; ops commands take --json. Configuration comes from the environment (docs/operations.md, Configuration).',
  ].join('\n');
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    // Asked for, help is the answer (stdout); without a command, it is a usage error (stderr).
    (name === undefined ? process.stderr : process.stdout).write(`${help()}\n`);
    return name === undefined ? 2 : 0;
  }
  // Own commands only: `constructor` or `toString` are no commands, whatever an object inherits.
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!command) {
    process.stderr.write(`unknown command "${name}"\n\n${help()}\n`);
    return 2;
  }
  let parsed;
  try {
    parsed = parseArgs({ args: rest, options: { ...command.options, help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: true, tokens: true });
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\nusage: flood-archive ${command.usage}\n`);
    return 2;
  }
  // An option given twice is refused: the last one would win unsaid (`retract --post-id 1
  // --post-id 2` retracted 2, which cannot be undone).
  const seen = new Set<string>();
  const twice = parsed.tokens.find((t) => t.kind === 'option' && (seen.has(t.name) || (seen.add(t.name), false)));
  if (twice?.kind === 'option') {
    process.stderr.write(`--${twice.name} given twice\nusage: flood-archive ${command.usage}\n`);
    return 2;
  }
  if (parsed.values.help) {
    process.stdout.write(`${command.summary}\nusage: flood-archive ${command.usage}\n`);
    return 0;
  }
  // A word the command does not read (`reprocess … dry-run` for `--dry-run`) is refused, not
  // passed over: run without it, the command would do what it was not asked to.
  const extra = parsed.positionals.slice(command.subcommand ? 1 : 0);
  if (extra.length > 0) {
    process.stderr.write(`unexpected argument ${JSON.stringify(extra[0])}\nusage: flood-archive ${command.usage}\n`);
    return 2;
  }
  const sub = parsed.positionals[0];
  // A subcommand missing or misspelt is told before anything is opened or created (the data
  // directory, the store), and whatever the store's state.
  const subs = command.subcommandOptions && Object.keys(command.subcommandOptions);
  if (subs && (sub === undefined || !subs.includes(sub))) {
    process.stderr.write(`${sub === undefined ? `${name} needs a subcommand` : `unknown subcommand ${JSON.stringify(sub)} of ${name}`}: one of ${subs.join(', ')}\nusage: flood-archive ${command.usage}\n`);
    return 2;
  }
  const reads = sub === undefined ? undefined : command.subcommandOptions?.[sub];
  const unread = reads && Object.keys(parsed.values).find((option) => option !== 'json' && option !== 'help' && !reads.includes(option));
  if (unread) {
    process.stderr.write(`--${unread} is not an option of ${name} ${sub}${reads.length > 0 ? ` (it takes ${reads.map((o) => `--${o}`).join(', ')})` : ''}\nusage: flood-archive ${command.usage}\n`);
    return 2;
  }
  // Configuration alone: the command loads what it runs when it opens its runtime.
  const { loadConfig, ConfigError } = await import('../shared/config.js');
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      return 78;
    }
    throw err;
  }
  try {
    return await command.run({ config, values: parsed.values as Values, positionals: parsed.positionals });
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`${err.message}\nusage: flood-archive ${command.usage}\n`);
      return 2;
    }
    if (err instanceof UnavailableError) {
      process.stderr.write(`${name} stopped: ${err.message}: ${unavailableHint(err)}\n`);
      return 69;
    }
    // A full disk under DuckDB (a bulk job's temporary files) is no failure of the job's own.
    if (isDiskFull(err)) {
      process.stderr.write(`${name} stopped: ${err instanceof Error ? err.message : String(err)}: the disk is full: free space on ${command.diskFull ?? 'the disk holding DATA_DIR (and TMP_DIR)'}, then run the same command again\n`);
      return 69;
    }
    // Another process (a second `npm start`, say) listens where this one would.
    const taken = (err as { code?: unknown }).code === 'EADDRINUSE' ? ': another process listens there: stop it, or set PORT (and METRICS_PORT, if set) to a free port' : '';
    process.stderr.write(`${name} failed: ${err instanceof Error ? err.message : String(err)}${taken}\n`);
    return 1;
  }
}

/** What to check when a dependency is unavailable: the embedded ledger is a file, not a service. */
function unavailableHint(err: UnavailableError): string {
  const embedded = err.dependency === 'ledger' || err.dependency === 'events';
  if (isDiskFull(err)) return `the disk is full: free space on the disk holding ${embedded ? 'DATA_DIR' : 'the object store'}, then run the same command again`;
  if (err instanceof NewerSchemaError) return 'run that release (or a later one) on this DATA_DIR; this build does not downgrade it';
  if (err instanceof FolderUnavailableError) return `set ${err.setting} to a folder this process can create and write`;
  // A damaged file is no lock to wait for: a backup and a repair mend it.
  if (embedded && (/SQLITE_(CORRUPT|NOTADB)/.test(`${err.message} ${(err.cause as { code?: unknown } | undefined)?.code ?? ''}`) || err.message.startsWith('event log damaged'))) {
    return `${err.dependency === 'ledger' ? 'ledger' : 'events'}.sqlite in DATA_DIR is damaged: restore it from a backup, then run verify --repair (docs/operations.md, "Backups")`;
  }
  if (embedded) return `is the ${dependencyName(err.dependency)} (${err.dependency === 'ledger' ? 'ledger' : 'events'}.sqlite in DATA_DIR) locked by a long write, on a full disk or read-only?`;
  // Reached, and refused: a question of rights, not of the network.
  if (/\((AccessDenied|Forbidden|AllAccessDisabled|HTTP 403)\)/.test(err.message)) return `the ${dependencyName(err.dependency)} refused the request: does this process's role allow it (docs/aws.md)?`;
  return `is the ${dependencyName(err.dependency)} reachable?`;
}

/**
 * Exits once what was written to stdout and stderr has gone out: a pipe takes 64 KiB at once, and
 * an exit before the rest left cut a long `--json` answer there.
 */
function exitWhenWritten(code: number): void {
  let pending = 2;
  const written = () => {
    if (--pending === 0) process.exit(code);
  };
  process.stdout.write('', written);
  process.stderr.write('', written);
}

// A reader that went away (`| head`, `| true`, a closed terminal) ends what the command prints,
// not the command: its work goes on to its end and its exit code, with no crash on EPIPE.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
  });
}

main(process.argv.slice(2)).then(
  (code) => exitWhenWritten(code),
  (err: unknown) => {
    process.stderr.write(`fatal: ${err instanceof Error ? err.message : String(err)}\n`);
    exitWhenWritten(1);
  },
);
