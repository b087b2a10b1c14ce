// Webhook hosts are resolved by DNS on the event loop (c-ares), not by the system's getaddrinfo
// on libuv's four threads: a subscriber whose name servers never answer must not hold the
// threads every other subscriber's lookup and the process's file writes need. Every address a
// name resolves to is checked as before. A DNS server of the test's own answers.
import fs from 'node:fs/promises';
import dns from 'node:dns';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HostPolicy } from '../../src/events/hostPolicy.js';
import { startDnsServer, type DnsServer } from '../support/dnsServer.js';

let server: DnsServer;
let policy: HostPolicy;
beforeAll(async () => {
  server = await startDnsServer({ 'hooks.example.org': '93.184.216.34', 'inside.example.org': '10.0.0.5' }, ['silent.example.org']);
  const resolver = new dns.promises.Resolver({ timeout: 500, tries: 1 });
  resolver.setServers([server.address]);
  policy = new HostPolicy([], resolver);
});
afterAll(async () => {
  await server.close();
});

const lookup = (host: string) =>
  new Promise<string>((resolve, reject) => policy.lookupGuard(host)(host, {}, (err, address) => (err ? reject(err) : resolve(address as string))));

describe('webhook hosts resolved by DNS', () => {
  it('resolves a public name by DNS and refuses one that resolves to a private address', async () => {
    expect(await lookup('hooks.example.org')).toBe('93.184.216.34');
    await expect(lookup('inside.example.org')).rejects.toMatchObject({ code: 'EREFUSED_ADDRESS', message: expect.stringMatching(/10\.0\.0\.5 is a private/) });
  });

  it('waits for name servers that never answer without holding the thread pool: file reads go on meanwhile', async () => {
    const settled: string[] = [];
    // More lookups than the pool has threads.
    const lookups = Array.from({ length: 8 }, () => lookup('silent.example.org').then(() => settled.push('lookup'), (err: NodeJS.ErrnoException) => settled.push(`lookup ${err.code}`)));
    const reads = Array.from({ length: 8 }, () => fs.readFile(new URL(import.meta.url)).then(() => settled.push('read')));
    await Promise.all([...lookups, ...reads]);
    expect(settled.slice(0, 8)).toEqual(Array(8).fill('read'));
    expect(settled.slice(8)).toEqual(Array(8).fill('lookup ETIMEOUT'));
  });
});
