// `flood-archive subscriptions` as ops run it: add, list, test, remove, failed, redrive; bad
// input exits 2 with every reason and stores nothing.
import { afterEach, describe, expect, it } from 'vitest';
import { runCli as run } from '../support/cli.js';
import { tempDir } from '../support/env.js';
import { cliAtTerminal } from '../support/terminal.js';
import { startReceiver, verifies, type Receiver } from '../support/webhookReceiver.js';

const SECRET = 'a-webhook-secret-of-thirty-two-chars';

let hook: Receiver | undefined;
afterEach(async () => {
  await hook?.close();
  hook = undefined;
});

describe('flood-archive subscriptions', () => {
  it('adds, lists (without secrets), tests and removes a subscription', async () => {
    hook = await startReceiver();
    const env = { DATA_DIR: await tempDir(), WEBHOOK_ALLOW_HOSTS: '127.0.0.1' };
    // The secret from standard input: never in the process list or the shell history.
    const added = await run(['subscriptions', 'add', '--url', hook.url, '--secret-file', '-', '--admin', 'PH-QC', '--events', 'archived,retracted', '--json'], env, `${SECRET}\n`);
    expect(added.code, added.stderr).toBe(0);
    expect(added.stderr).toBe('');
    const sub = JSON.parse(added.stdout);
    expect(sub).toMatchObject({ url: hook.url, admins: ['PH-QC'], localAreas: [], events: ['archived', 'retracted'] });
    expect(sub.secret).toBeUndefined();

    const listed = await run(['subscriptions', 'list', '--json'], env);
    expect(JSON.parse(listed.stdout)).toEqual([{ ...sub, pending: 0, setAside: 0 }]);
    expect(listed.stdout).not.toContain(SECRET);

    const tested = await run(['subscriptions', 'test', '--id', sub.id], env);
    expect(tested.code, tested.stderr).toBe(0);
    expect(tested.stdout).toMatch(/delivered test event \w+: 204/);
    expect(hook.received).toHaveLength(1);
    expect(JSON.parse(hook.received[0]!.body)).toMatchObject({ specversion: '1.0', type: 'ph.floodarchive.test.v1', data: { type: 'FeatureCollection', features: [] } });
    expect(verifies(hook.received[0]!, SECRET)).toBe(true);

    hook.answer = () => ({ status: 500 });
    const failing = await run(['subscriptions', 'test', '--id', sub.id], env);
    expect(failing.code).toBe(1);
    expect(failing.stdout).toMatch(/failed: answered 500/);

    expect((await run(['subscriptions', 'failed'], env)).stdout).toMatch(/no deliveries set aside/);
    expect((await run(['subscriptions', 'redrive', '--json'], env)).stdout).toMatch(/"redriven": 0/);
    expect((await run(['subscriptions', 'remove', '--id', sub.id], env)).code).toBe(0);
    expect((await run(['subscriptions', 'list'], env)).stdout).toMatch(/no subscriptions/);
    const again = await run(['subscriptions', 'remove', '--id', sub.id], env);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/no subscription/);
  });

  it('asks for the secret at a terminal without showing it (--secret-file - with nothing piped in); Ctrl-C stops it, storing nothing', async () => {
    hook = await startReceiver();
    const env = { DATA_DIR: await tempDir(), WEBHOOK_ALLOW_HOSTS: '127.0.0.1' };
    const add = ['subscriptions', 'add', '--url', hook.url, '--secret-file', '-', '--json'];
    // Typed with a slip taken back (Backspace sends DEL), ended by Enter.
    const typed = await cliAtTerminal(add, env, 'Secret', `${SECRET}x\u007f\r`);
    expect([typed.code, typed.signal]).toEqual([0, null]);
    expect(typed.screen).toMatch(/^Secret \(not shown; Enter to end\): /);
    expect(typed.screen).not.toContain(SECRET.slice(0, 8));
    const sub = JSON.parse(typed.screen.slice(typed.screen.indexOf('{')));
    expect((await run(['subscriptions', 'test', '--id', sub.id], env)).code).toBe(0);
    expect(verifies(hook.received[0]!, SECRET)).toBe(true);

    const stopped = await cliAtTerminal(add, env, 'Secret', 'half a secr\u0003');
    expect([stopped.code, stopped.signal]).toEqual([null, 'SIGINT']);
    expect(JSON.parse((await run(['subscriptions', 'list', '--json'], env)).stdout)).toHaveLength(1);
  });

  it('exits 2 naming every problem of a bad subscription, and stores nothing', async () => {
    const env = { DATA_DIR: await tempDir() };
    const bad = await run(['subscriptions', 'add', '--url', 'http://192.168.0.10/hook', '--secret', 'short', '--admin', 'PH-ZZ', '--events', 'archived,exploded'], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/must be https/);
    expect(bad.stderr).toMatch(/at least 24 characters/);
    expect(bad.stderr).toMatch(/--admin "PH-ZZ" must be one of: PH-QC, PH-PG/);
    expect(bad.stderr).toMatch(/"exploded" is not one of archived, retracted/);
    const link = await run(['subscriptions', 'add', '--url', 'https://169.254.169.254/', '--secret', SECRET], env);
    expect(link.code).toBe(2);
    expect(link.stderr).toMatch(/169\.254\.169\.254 is a private, loopback, link-local or reserved address/);
    expect((await run(['subscriptions', 'add', '--secret', SECRET], env)).stderr).toMatch(/--url is required/);
    expect((await run(['subscriptions', 'frob'], env)).code).toBe(2);
    // Given but naming nothing: refused, not read as every city or the default events.
    for (const [option, value] of [['--admin', ''], ['--events', ','], ['--local-area', ' ']]) {
      const empty = await run(['subscriptions', 'add', '--url', 'https://hooks.example.org/flood', '--secret', SECRET, option!, value!], env);
      expect([option, empty.code, empty.stderr]).toEqual([option, 2, expect.stringMatching(new RegExp(`^${option} names nothing`, 'm'))]);
    }
    expect(JSON.parse((await run(['subscriptions', 'list', '--json'], env)).stdout)).toEqual([]);
    const badConfig = await run(['subscriptions', 'list'], { ...env, WEBHOOK_ALLOW_HOSTS: '10.0.0.0/99' });
    expect(badConfig.code).toBe(78);
    expect(badConfig.stderr).toMatch(/WEBHOOK_ALLOW_HOSTS/);
  });

  it('refuses at registration the local and metadata hosts that delivery would refuse', async () => {
    const env = { DATA_DIR: await tempDir() };
    const refused: [string, RegExp][] = [
      // IPv4-compatible IPv6 (::/96): 127.0.0.1 and the metadata address in another form.
      ['https://[::7f00:1]/hook', /::7f00:1 is a private, loopback, link-local or reserved address/],
      ['https://[::a9fe:a9fe]/hook', /::a9fe:a9fe is a private, loopback, link-local or reserved address/],
      ['https://localhost./hook', /names a local or cloud metadata host \(localhost\.\)/],
      ['https://metadata.google.internal/computeMetadata/v1/', /names a local or cloud metadata host \(metadata\.google\.internal\)/],
      ['https://metadata.google.internal./computeMetadata/v1/', /names a local or cloud metadata host/],
      ['https://metadata.goog/computeMetadata/v1/', /names a local or cloud metadata host \(metadata\.goog\)/],
      ['https://instance-data.ec2.internal/latest/meta-data/', /names a local or cloud metadata host/],
    ];
    for (const [url, why] of refused) {
      const added = await run(['subscriptions', 'add', '--url', url, '--secret', SECRET], env);
      expect(added.code, url).toBe(2);
      expect(added.stderr, url).toMatch(why);
    }
    expect(JSON.parse((await run(['subscriptions', 'list', '--json'], env)).stdout)).toEqual([]);
    // A public name is still accepted; --secret still works, with a warning.
    const plain = await run(['subscriptions', 'add', '--url', 'https://hooks.example.org/flood', '--secret', SECRET], env);
    expect(plain.code).toBe(0);
    expect(plain.stderr).toMatch(/warning: --secret leaves the secret in the process list/);
    const both = await run(['subscriptions', 'add', '--url', 'https://hooks.example.org/flood', '--secret', SECRET, '--secret-file', '-'], env, SECRET);
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/--secret-file or --secret, not both/);
    const none = await run(['subscriptions', 'add', '--url', 'https://hooks.example.org/flood'], env);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/--secret-file is required/);
    const missing = await run(['subscriptions', 'add', '--url', 'https://hooks.example.org/flood', '--secret-file', '/nonexistent/secret'], env);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/cannot read --secret-file \/nonexistent\/secret/);
  });
});
