// `subscriptions`: webhook subscriptions and the deliveries set aside.
import { listOption, SubscriptionError } from '../../events/subscriptions.js';
import { common, deps, print, required, secretOption, UsageError, withRuntime, type Command } from './options.js';

export const subscriptions: Command = {
  summary: 'webhook subscriptions: add, rotate-secret, list, remove, test; deliveries set aside: failed, redrive',
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
  subcommand: true,
  subcommandOptions: {
    add: ['url', 'secret-file', 'secret', 'admin', 'local-area', 'events'],
    'rotate-secret': ['id', 'secret-file', 'secret'],
    list: [],
    remove: ['id'],
    test: ['id'],
    failed: [],
    redrive: ['id'],
  },
  run: ({ config, values, positionals }) =>
    withRuntime(config, async (rt) => {
      try {
        const sub = positionals[0];
        if (sub === 'add') {
          const url = required(values, 'url');
          // Given but naming nothing (`--admin ''`, `--events ,`): refused, not read as left out
          // (every city, or the default events), which would subscribe to more than was asked.
          const listed = (name: 'admin' | 'local-area' | 'events'): string[] => {
            const list = listOption(values[name]);
            if (typeof values[name] === 'string' && list.length === 0) throw new UsageError(`--${name} names nothing: leave it out, or name at least one`);
            return list;
          };
          const s = await deps.addSubscription(rt, {
            url,
            secret: await secretOption(values),
            admins: listed('admin'),
            localAreas: listed('local-area'),
            events: listed('events'),
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
};
