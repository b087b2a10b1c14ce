#!/usr/bin/env node
// The one command line: the service's processes and every ops command.
//   flood-archive <command> [options]      (npm run cli -- <command> …)
// Exit codes: 0 done, 1 failed or found a loss, 2 usage, 69 storage/queue
// unavailable, 78 bad configuration.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { isKeyName, keyDigest, newKey, resolveApiKeys } from '../partners/apiKeys.js';
import { bootstrap } from './bootstrap.js';
import type { BoundarySet } from '../boundaries/types.js';
import type { Config } from '../shared/config.js';
import { UnavailableError } from '../shared/errors.js';
import type { ExportFormat } from '../ops/exportWindow.js';
import type { ImportFormat } from '../ops/importFile.js';
import { createProgress } from '../ops/progress.js';
import { listOption, SubscriptionError } from '../events/subscriptions.js';
import { parsePkey, SOURCE } from '../store/layout.js';
import type { Runtime } from './runtime.js';

class UsageError extends Error {}

/**
 * What the commands run, loaded once a command is to run: `--help` and usage errors answer
 * without loading DuckDB, the SDK adapters and the schemas (most of a second; seconds on a busy host).
 */
let deps: typeof import('./commandModules.js');

type Options = ParseArgsConfig['options'];
type Values = Record<string, string | boolean | undefined>;

interface Command {
  summary: string;
  usage: string;
  options: Options;
  run(ctx: { config: Config; values: Values; positionals: string[] }): Promise<number>;
}

const common: Options = { json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } };
const window: Options = { from: { type: 'string' }, to: { type: 'string' } };

/**
 * Creates the bucket and queues where this process owns them: the embedded store, or an
 * emulator endpoint (LocalStack, moto). On AWS proper the stack creates them, and the task's
 * role may not.
 */
async function bootstrapIfLocal(config: Config, rt: Runtime): Promise<void> {
  if (config.storageUrl.startsWith('file://') || config.awsEndpointUrl) {
    await bootstrap(config, { ...(rt.s3 && { s3: rt.s3 }), ...(rt.sqs && { sqs: rt.sqs }) });
  }
}

/** Runs `fn` with a runtime, closing it after. */
async function withRuntime<T>(config: Config, fn: (rt: Runtime) => Promise<T>): Promise<T> {
  const rt = await deps.createRuntime(config);
  try {
    await bootstrapIfLocal(config, rt);
    await rt.boundaries.seedIfEmpty();
    return await fn(rt);
  } finally {
    await rt.close();
  }
}

/**
 * A webhook secret: from --secret-file (a file, or - for standard input; one trailing newline
 * dropped), or from --secret, which leaves it in the process list and the shell's history.
 */
async function secretOption(values: Values): Promise<string> {
  const file = values['secret-file'];
  if (typeof values.secret === 'string') {
    if (file !== undefined) throw new UsageError('give --secret-file or --secret, not both');
    process.stderr.write('warning: --secret leaves the secret in the process list and the shell history; use --secret-file F (- for standard input)\n');
    return values.secret;
  }
  if (typeof file !== 'string' || file === '') throw new UsageError('--secret-file is required (a file holding the secret, or - to read it from standard input)');
  let text = '';
  try {
    if (file === '-') for await (const chunk of process.stdin) text += String(chunk);
    else text = await fs.readFile(file, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read --secret-file ${file}: ${(err as Error).message}`);
  }
  return text.replace(/\r?\n$/, '');
}

function print(values: Values, result: unknown, human: () => string): void {
  process.stdout.write(values.json ? `${JSON.stringify(result, null, 2)}\n` : `${human()}\n`);
}

/** `2026-11-21` (a whole UTC day) or an ISO date-time with offset. */
function instant(value: string | boolean | undefined, name: string, fallback: number, endOfDay = false): number {
  if (value === undefined) return fallback;
  const text = String(value);
  if (/^\d{4}-\d{2}-\d{2}$/.test(text)) {
    const ms = deps.parseOffsetDateTime(`${text}T00:00:00Z`);
    if (ms !== undefined) return endOfDay ? ms + 86_400_000 - 1 : ms;
  }
  const ms = deps.parseOffsetDateTime(text);
  if (ms === undefined) throw new UsageError(`--${name} must be a date (2026-11-21) or an ISO date-time with offset`);
  return ms;
}

/** `--partner NAME`, checked as a key name; undefined when not given. */
function partnerOption(values: Values): string | undefined {
  const name = values.partner;
  if (name === undefined) return undefined;
  if (typeof name !== 'string' || !isKeyName(name)) throw new UsageError('--partner must be a key name: 1 to 64 characters of a-z 0-9 . _ - starting with a letter or digit');
  return name;
}

function required(values: Values, name: string): string {
  const v = values[name];
  if (typeof v !== 'string' || v === '') throw new UsageError(`--${name} is required`);
  return v;
}

function serviceCommand(role: 'all' | 'serve' | 'worker', summary: string): Command {
  const roles = {
    serve: { api: true, worker: false, reconcile: false },
    worker: { api: false, worker: true, reconcile: true },
  } as const;
  return {
    summary,
    usage: role,
    options: {},
    async run({ config }) {
      const rt = await deps.createRuntime(config, { log: deps.createServiceLogger(config.logLevel) });
      await bootstrapIfLocal(config, rt);
      const api = role !== 'worker';
      const kept = api ? (await rt.ledger.listKeys()).some((k) => !k.revoked_at) : false;
      const keys = api ? await resolveApiKeys(config.apiKeys, config.dataDir, kept) : { keys: [] };
      // `all` is `serve` on this thread and `worker` on another (src/worker/thread.ts).
      const thread = role === 'all' ? await deps.startWorkerThread(config) : undefined;
      if (thread) rt.metrics.include(() => thread.metrics());
      let service;
      try {
        service = await deps.startService(rt, { ...roles[role === 'all' ? 'serve' : role], apiKeys: keys.keys });
      } catch (err) {
        await thread?.stop();
        throw err;
      }
      rt.log.info({ role, storage: rt.store.description, queue: rt.queue.description, url: service.url }, 'started');
      if (service.url) process.stdout.write(`\nFlood report archive listening on ${service.url}\n`);
      if (service.metricsUrl) process.stdout.write(`Prometheus metrics on ${service.metricsUrl}\n`);
      // The key itself only when it is created: output is kept in logs, and every start would copy it there.
      if ('generated' in keys && keys.generated) {
        process.stdout.write(
          (keys.generated.created ? `Partner API key (created ${keys.generated.file}): ${keys.generated.key}\n` : `Partner API key: in ${keys.generated.file}\n`) +
            'Set API_KEYS to use your own keys.\n\n',
        );
      }
      const running = service;
      const failure = await untilSignal(
        rt,
        async () => {
          await running.stop();
          await thread?.stop();
        },
        thread?.failed,
      );
      if (failure) throw new Error(`the worker thread stopped: ${failure.message}`);
      return 0;
    },
  };
}

/**
 * Waits for SIGTERM/SIGINT, then stops gracefully (the worker flushes); or for `failed` (a
 * part of the process that ended on its own), then stops what remains and resolves with why.
 */
function untilSignal(rt: Runtime, stop: () => Promise<void>, failed?: Promise<Error>): Promise<Error | undefined> {
  return new Promise((resolve, reject) => {
    let stopping = false;
    const onStop = (reason: { signal: string } | { failure: Error }) => {
      if (stopping) return;
      stopping = true;
      if ('signal' in reason) rt.log.info(reason, 'stopping');
      else rt.log.fatal({ err: reason.failure.message }, 'stopping: the worker thread ended unexpectedly');
      stop()
        .then(() => rt.close())
        .then(() => resolve('failure' in reason ? reason.failure : undefined), reject);
    };
    process.once('SIGTERM', () => onStop({ signal: 'SIGTERM' }));
    process.once('SIGINT', () => onStop({ signal: 'SIGINT' }));
    void failed?.then((failure) => onStop({ failure }));
  });
}

const COMMANDS: Record<string, Command> = {
  all: serviceCommand('all', 'API + worker + reconciliation in one process (what npm start runs)'),
  serve: serviceCommand('serve', 'the HTTP API alone'),
  worker: serviceCommand('worker', 'the archive worker and reconciliation alone'),
  scheduler: {
    summary: 'run the scheduled jobs (compaction, reconciliation, verify) with node-cron',
    usage: 'scheduler',
    options: {},
    async run({ config }) {
      const rt = await deps.createRuntime(config);
      await rt.boundaries.seedIfEmpty();
      const scheduler = deps.startScheduler(rt, deps.JOBS, `scheduler-${randomUUID()}`);
      rt.log.info({ jobs: deps.JOBS.map((j) => `${j.name} "${j.schedule(config)}"`) }, 'scheduler started');
      await untilSignal(rt, () => scheduler.stop());
      return 0;
    },
  },
  bootstrap: {
    summary: 'create the bucket, the queue and its dead-letter queue (idempotent)',
    usage: 'bootstrap [--json]',
    options: common,
    async run({ config, values }) {
      const rt = await deps.createRuntime(config);
      try {
        const result = await bootstrap(config, { ...(rt.s3 && { s3: rt.s3 }), ...(rt.sqs && { sqs: rt.sqs }) });
        await rt.boundaries.seedIfEmpty();
        print(values, result, () => Object.entries(result).map(([k, v]) => `${k}: ${v}`).join('\n'));
      } finally {
        await rt.close();
      }
      return 0;
    },
  },
  compact: {
    summary: 'merge each closed day (and each closed hour of today) into one de-duplicated part (idempotent)',
    usage: 'compact [--from DATE] [--to DATE] [--json]',
    options: { ...common, ...window },
    run: ({ config, values }) =>
      withRuntime(config, async (rt) => {
        const now = Date.now();
        const result = await deps.compact(
          rt,
          { fromMs: instant(values.from, 'from', 0), toMs: instant(values.to, 'to', now, true), closedBeforeMs: deps.closedBefore(rt, now) },
          values.json ? undefined : createProgress('compact'),
        );
        const purge = await deps.purgeRetracted(rt);
        print(values, { ...result, purge }, () =>
          `compacted ${result.daysCompacted} days and ${result.hoursCompacted} of ${result.hoursSeen} hours; removed ${result.partsRemoved} parts; ${result.rows} rows\n` +
          `purged ${purge.purged} retracted reports (${purge.partsRewritten} parts rewritten; ${purge.waiting} still waiting to be archived)`,
        );
        return 0;
      }),
  },
  reconcile: {
    summary: 're-enqueue accepted reports still pending',
    usage: 'reconcile [--older-than SECONDS] [--json]',
    options: { ...common, 'older-than': { type: 'string' } },
    run: ({ config, values }) =>
      withRuntime(config, async (rt) => {
        const seconds = values['older-than'] === undefined ? config.reconcileAfterSeconds : Number(values['older-than']);
        if (!Number.isFinite(seconds) || seconds < 0) throw new UsageError('--older-than must be a number of seconds');
        const result = await rt.reconciler.run(seconds * 1000);
        print(values, result, () => `re-enqueued: ${result.requeued}`);
        return 0;
      }),
  },
  reprocess: {
    summary: 're-tag reports with the current boundaries and rewrite their hours',
    usage: 'reprocess --from DATE --to DATE [--dry-run] [--json]',
    options: { ...common, ...window, 'dry-run': { type: 'boolean' } },
    run: ({ config, values }) =>
      withRuntime(config, async (rt) => {
        const result = await deps.reprocess(
          rt,
          {
            fromMs: instant(required(values, 'from'), 'from', 0),
            toMs: instant(required(values, 'to'), 'to', 0, true),
            dryRun: values['dry-run'] === true,
          },
          values.json ? undefined : createProgress('reprocess'),
        );
        print(values, result, () =>
          [
            `${result.dryRun ? 'would re-tag' : 're-tagged'} ${result.reports} reports with boundary version ${result.boundaryVersion}`,
            `city changes: ${result.cityChanges}; barangay changes: ${result.localAreaChanges}; hours rewritten: ${result.hoursRewritten}`,
            ...Object.entries(result.moves).map(([move, n]) => `  ${move}: ${n}`),
          ].join('\n'),
        );
        return 0;
      }),
  },
  import: {
    summary: 'backfill from NDJSON, GeoJSON or CSV (partner bodies or CogniCity rows); idempotent, resumable',
    usage: 'import --file F [--partner NAME] [--format ndjson|geojson|csv] [--rejects F] [--restart] [--json]',
    options: { ...common, file: { type: 'string' }, partner: { type: 'string' }, format: { type: 'string' }, rejects: { type: 'string' }, restart: { type: 'boolean' } },
    run: ({ config, values }) =>
      withRuntime(config, async (rt) => {
        const format = values.format as ImportFormat | undefined;
        if (format && !['ndjson', 'geojson', 'csv'].includes(format)) throw new UsageError('--format must be ndjson, geojson or csv');
        const partner = partnerOption(values);
        const result = await deps.importFile(
          rt,
          {
            file: required(values, 'file'),
            ...(format && { format }),
            ...(typeof values.rejects === 'string' && { rejectsFile: values.rejects }),
            ...(partner !== undefined && { partner }),
            restart: values.restart === true,
          },
          values.json ? undefined : createProgress('import'),
        );
        print(values, result, () =>
          `records: ${result.records}; accepted: ${result.accepted}; duplicate: ${result.duplicate}; rejected: ${result.rejected}` +
            (result.rejected > 0 ? ` (reasons in ${result.rejectsFile})` : '') +
            (result.resumedFrom > 0 ? `; resumed after record ${result.resumedFrom}` : ''),
        );
        return 0;
      }),
  },
  export: {
    summary: 'write an archive window to a file (parquet, csv or geojson)',
    usage: 'export --from DATE --to DATE --format parquet|csv|geojson --out F [--admin CODE] [--json]',
    options: { ...common, ...window, format: { type: 'string' }, out: { type: 'string' }, admin: { type: 'string' } },
    run: ({ config, values }) =>
      withRuntime(config, async (rt) => {
        const format = required(values, 'format') as ExportFormat;
        if (!['parquet', 'csv', 'geojson'].includes(format)) throw new UsageError('--format must be parquet, csv or geojson');
        const query = {
          startMs: instant(required(values, 'from'), 'from', 0),
          endMs: instant(required(values, 'to'), 'to', 0, true),
          admin: typeof values.admin === 'string' ? values.admin : undefined,
        };
        const result = await deps.exportWindow(rt, query, format, required(values, 'out'));
        print(values, result, () => `wrote ${result.bytes} bytes to ${String(values.out)}`);
        return 0;
      }),
  },
  cities: {
    summary: 'boundary versions: publish, list, rollback',
    usage: 'cities publish --cities F --local-areas F [--label TEXT] | cities list | cities rollback --to VERSION  [--json]',
    options: { ...common, cities: { type: 'string' }, 'local-areas': { type: 'string' }, label: { type: 'string' }, to: { type: 'string' } },
    run: ({ config, values, positionals }) =>
      withRuntime(config, async (rt) => {
        const sub = positionals[0];
        if (sub === 'publish') {
          const read = async (f: string) => JSON.parse(await fs.readFile(f, 'utf8')) as unknown;
          const set = {
            label: typeof values.label === 'string' ? values.label : `published ${new Date().toISOString()}`,
            cities: await read(required(values, 'cities')),
            localAreas: await read(required(values, 'local-areas')),
          } as BoundarySet;
          const result = await rt.boundaries.publish(set);
          print(values, result, () => (result.changed ? `published version ${result.version}` : `version ${result.version} is already current`));
          return 0;
        }
        if (sub === 'list') {
          const current = (await rt.boundaries.current()).version;
          const versions = await Promise.all(
            (await rt.boundaries.versions()).map(async (id) => {
              const v = await rt.boundaries.load(id);
              return { version: id, label: v.label, cities: v.set.cities.features.length, localAreas: v.set.localAreas.features.length, current: id === current };
            }),
          );
          print(values, versions, () =>
            versions.map((v) => `${v.current ? '*' : ' '} ${v.version}  ${v.cities} cities, ${v.localAreas} local areas  ${v.label}`).join('\n'),
          );
          return 0;
        }
        if (sub === 'rollback') {
          const to = required(values, 'to');
          await rt.boundaries.rollback(to);
          print(values, { version: to }, () => `current version is now ${to}`);
          return 0;
        }
        throw new UsageError('cities needs one of: publish, list, rollback');
      }),
  },
  dlq: {
    summary: 'the dead-letter queue: list, redrive',
    usage: 'dlq list | dlq redrive  [--json]',
    options: common,
    run: ({ config, values, positionals }) =>
      withRuntime(config, async (rt) => {
        // Loads the SQS SDK: only here.
        const dlq = (await import('../ops/deadLetters.js')).deadLettersFor(rt);
        if (positionals[0] === 'list') {
          const letters = await dlq.list();
          print(values, letters, () => (letters.length === 0 ? 'the dead-letter queue is empty' : letters.map((l) => `${l.id}  ${l.body.slice(0, 120)}`).join('\n')));
          return 0;
        }
        if (positionals[0] === 'redrive') {
          const n = await dlq.redrive();
          print(values, { redriven: n }, () => `sent ${n} messages back to the queue`);
          return 0;
        }
        throw new UsageError('dlq needs one of: list, redrive');
      }),
  },
  retract: {
    summary: "retract a report (any partner's): hidden at once, its personal fields purged from the parts by the next compaction",
    usage: 'retract (--pkey PKEY | --post-id N [--partner NAME]) --reason TEXT [--json]',
    options: { ...common, pkey: { type: 'string' }, 'post-id': { type: 'string' }, partner: { type: 'string' }, reason: { type: 'string' } },
    run: ({ config, values }) =>
      withRuntime(config, async (rt) => {
        const reason = required(values, 'reason');
        if (reason.length > 500) throw new UsageError('--reason must be at most 500 characters');
        let pkey: string | undefined;
        let postId: number;
        if (typeof values.pkey === 'string') {
          if (values['post-id'] !== undefined || values.partner !== undefined) throw new UsageError('give --pkey, or --post-id with --partner, not both');
          const parts = parsePkey(values.pkey);
          if (!parts) throw new UsageError('--pkey must be a report key such as partner-123 or partner-alpha-123');
          pkey = values.pkey;
          postId = parts.post_id;
        } else {
          const raw = required(values, 'post-id');
          if (!/^(0|[1-9]\d{0,15})$/.test(raw) || !Number.isSafeInteger(Number(raw))) throw new UsageError('--post-id must be a non-negative integer');
          postId = Number(raw);
          // A post_id is a partner's own; without --partner, the report of no partner (partner-N).
          const partner = partnerOption(values);
          pkey = (await rt.ledger.get({ source: SOURCE, post_id: postId, ...(partner !== undefined && { partner }) }))?.pkey;
        }
        const result = pkey === undefined ? ({ found: false } as const) : await rt.ledger.retract(pkey, 'ops', reason);
        if (!result.found) {
          print(values, { post_id: postId, found: false }, () => `no such report was accepted`);
          return 1;
        }
        const answer = { post_id: postId, retracted: true, first: result.first, ...result.retraction };
        print(values, answer, () => (result.first ? `retracted ${pkey} at ${result.retraction.retracted_at}` : `${pkey} was already retracted at ${result.retraction.retracted_at} (by ${result.retraction.by}: ${result.retraction.reason})`));
        return 0;
      }),
  },
  keys: {
    summary: 'partner API keys kept in the ledger (hashed): list, add, rotate, revoke',
    usage: 'keys list | keys add --name NAME (a name no key has had) | keys rotate --name NAME | keys revoke --name NAME  [--json]',
    options: { ...common, name: { type: 'string' } },
    run: ({ config, values, positionals }) =>
      withRuntime(config, async (rt) => {
        const sub = positionals[0];
        if (sub === 'list') {
          const kept = (await rt.ledger.listKeys()).map((k) => ({ name: k.name, from: 'ledger', created_at: k.created_at, ...(k.revoked_at && { revoked_at: k.revoked_at }) }));
          const listed = [...config.apiKeys.map((k) => ({ name: k.name, from: 'API_KEYS' })), ...kept];
          print(values, listed, () => listed.map((k) => `${k.name}  ${k.from}${'revoked_at' in k && k.revoked_at ? `  revoked ${k.revoked_at}` : ''}`).join('\n') || 'no keys');
          return 0;
        }
        if (sub !== 'add' && sub !== 'rotate' && sub !== 'revoke') throw new UsageError('keys needs one of: list, add, rotate, revoke');
        const name = required(values, 'name');
        if (!isKeyName(name)) throw new UsageError('--name must be 1 to 64 characters of a-z 0-9 . _ - starting with a letter or digit');
        if (sub === 'revoke') {
          const n = await rt.ledger.revokeKeys(name);
          print(values, { name, revoked: n }, () => `revoked ${n} key(s) named ${name}`);
          return n > 0 ? 0 : 1;
        }
        // A partner's reports and rights follow its key's name: a new key takes a name of its own.
        const configured = config.apiKeys.some((k) => k.name === name);
        if (sub === 'add' && configured) {
          process.stderr.write(`the name ${name} is a key in API_KEYS, and its reports and rights follow the name: choose another name\n`);
          return 1;
        }
        if (sub === 'rotate' && !configured && !(await rt.ledger.listKeys()).some((k) => k.name === name)) {
          process.stderr.write(`no key is named ${name}: add one with keys add --name ${name}\n`);
          return 1;
        }
        // The key is shown once; the ledger keeps only its digest.
        const key = newKey();
        try {
          await rt.ledger.addKey(name, keyDigest(key), sub === 'rotate');
        } catch (err) {
          if (!(err instanceof deps.KeyNameInUseError)) throw err;
          process.stderr.write(`${err.message}\n`);
          return 1;
        }
        const revoked = sub === 'rotate' ? await rt.ledger.revokeKeys(name, keyDigest(key)) : 0;
        print(values, { name, key, revoked }, () => `${name}: ${key}${sub === 'rotate' ? `\n(revoked ${revoked} earlier key(s) of ${name})` : ''}\nKeep it now: it is not shown again.`);
        return 0;
      }),
  },
  verify: {
    summary: 'accepted versus archived, per day; exits 1 on any loss',
    usage: 'verify [--from DATE] [--to DATE] [--json]',
    options: { ...common, ...window },
    run: ({ config, values }) =>
      withRuntime(config, async (rt) => {
        const result = await deps.verify(
          rt,
          { fromMs: instant(values.from, 'from', 0), toMs: instant(values.to, 'to', Date.now(), true) },
          values.json ? undefined : createProgress('verify'),
        );
        print(values, result, () =>
          [
            ...result.days.map((d) => `${d.day}  accepted ${d.accepted}  archived ${d.archived}  pending ${d.pending}  missing ${d.missing}`),
            `missing: ${result.missing.length}${result.missing.length ? ` (${result.missing.slice(0, 20).join(', ')}${result.missing.length > 20 ? ', …' : ''})` : ''}`,
            `archived without an acceptance record: ${result.unexpected.length}`,
            `reports stored in more than one part (until compaction): ${result.duplicatedInStorage}`,
            result.ok ? 'OK' : 'LOSS FOUND',
          ].join('\n'),
        );
        return result.ok ? 0 : 1;
      }),
  },
  subscriptions: {
    summary: 'webhook subscriptions: add, list, remove, test; deliveries set aside: failed, redrive',
    usage:
      'subscriptions add --url URL --secret-file F|- [--admin CODES] [--local-area PSGCS] [--events archived,retracted] | rotate-secret --id ID --secret-file F|- | list | remove --id ID | test --id ID | failed | redrive [--id ID]  [--json]',
    options: {
      ...common,
      url: { type: 'string' },
      'secret-file': { type: 'string' },
      secret: { type: 'string' },
      admin: { type: 'string' },
      'local-area': { type: 'string' },
      events: { type: 'string' },
      id: { type: 'string' },
    },
    run: ({ config, values, positionals }) =>
      withRuntime(config, async (rt) => {
        try {
          const sub = positionals[0];
          if (sub === 'add') {
            const url = required(values, 'url');
            const s = await deps.addSubscription(rt, {
              url,
              secret: await secretOption(values),
              admins: listOption(values.admin),
              localAreas: listOption(values['local-area']),
              events: listOption(values.events),
            });
            print(values, deps.shown(s), () => `added ${s.id} → ${s.url} (${s.events.join(', ')})`);
            return 0;
          }
          if (sub === 'rotate-secret') {
            const id = required(values, 'id');
            await deps.rotateSecret(rt, id, await secretOption(values));
            print(values, { rotated: id }, () => `${id} signs with the new secret from now on, its undelivered events included`);
            return 0;
          }
          if (sub === 'list') {
            const admin = deps.adminOf(rt);
            const all = await admin.list();
            const backlog = await admin.backlog(all);
            const subs = all.map((s) => deps.shown(s, backlog.get(s.id)));
            print(values, subs, () =>
              subs.length === 0
                ? 'no subscriptions'
                : subs.map((s) => `${s.id}  ${s.url}  events=${s.events.join(',')}  admin=${s.admins.join(',') || '*'}  local-area=${s.localAreas.join(',') || '*'}  pending=${s.pending}  set-aside=${s.setAside}`).join('\n'),
            );
            return 0;
          }
          if (sub === 'remove') {
            const id = required(values, 'id');
            if (!(await deps.adminOf(rt).remove(id))) throw new SubscriptionError([`no subscription ${JSON.stringify(id)} (see: subscriptions list)`]);
            print(values, { removed: id }, () => `removed ${id} and its undelivered events`);
            return 0;
          }
          if (sub === 'test') {
            const result = await deps.testSubscription(rt, required(values, 'id'));
            print(values, result, () => (result.ok ? `delivered test event ${result.id}: ${result.status} in ${result.ms} ms` : `test event ${result.id} failed: ${result.error}`));
            return result.ok ? 0 : 1;
          }
          if (sub === 'failed') {
            const ds = await deps.adminOf(rt).failed();
            print(values, ds, () =>
              ds.length === 0
                ? 'no deliveries set aside'
                : ds.map((d) => `${d.id}  ${d.subscriptionId}  ${d.kind}  ${d.count} reports  queued ${new Date(d.atMs).toISOString()}  ${d.attempts} attempts  last error: ${d.lastError ?? ''}`).join('\n'),
            );
            return 0;
          }
          if (sub === 'redrive') {
            const id = typeof values.id === 'string' ? (await deps.findSubscription(rt, values.id)).id : undefined;
            const r = await deps.adminOf(rt).redrive(id, new deps.HostPolicy(rt.config.events.webhookAllowHosts), rt.config.events.webhookTimeoutMs);
            print(values, r, () =>
              rt.events ? `queued ${r.redriven} set-aside deliveries again` : `delivered ${r.redriven} set-aside deliveries; ${r.stillFailing} failed again and stay set aside`,
            );
            if (r.stillFailing > 0) return 1;
            return 0;
          }
          throw new UsageError('subscriptions needs one of: add, rotate-secret, list, remove, test, failed, redrive');
        } catch (err) {
          if (err instanceof SubscriptionError) throw new UsageError(err.problems.join('\n'));
          throw err;
        }
      }),
  },
};

function help(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((c) => c.length));
  return [
    'usage: flood-archive <command> [options]   (npm run cli -- <command> …)',
    '',
    ...Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`),
    '',
    'Every command takes --help; ops commands take --json. Configuration comes from the environment (see README).',
  ].join('\n');
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(`${help()}\n`);
    return name === undefined ? 2 : 0;
  }
  const command = COMMANDS[name];
  if (!command) {
    process.stderr.write(`unknown command "${name}"\n\n${help()}\n`);
    return 2;
  }
  let parsed;
  try {
    parsed = parseArgs({ args: rest, options: { ...command.options, help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: true });
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\nusage: flood-archive ${command.usage}\n`);
    return 2;
  }
  if (parsed.values.help) {
    process.stdout.write(`${command.summary}\nusage: flood-archive ${command.usage}\n`);
    return 0;
  }
  deps = await import('./commandModules.js');
  let config: Config;
  try {
    config = deps.loadConfig();
  } catch (err) {
    if (err instanceof deps.ConfigError) {
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
      process.stderr.write(`${err.message}: is the ${err.dependency === 'storage' ? 'object store' : 'queue'} reachable?\n`);
      return 69;
    }
    process.stderr.write(`${name} failed: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`fatal: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
