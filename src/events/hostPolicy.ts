// Where a webhook may point. Only https, to public addresses, unless WEBHOOK_ALLOW_HOSTS admits
// the host (by name, address or CIDR): a subscription must not be able to reach the network the
// service runs in (metadata endpoints, databases, admin ports). The check runs on every address a
// name resolves to at delivery time too (see lookupGuard), so a name re-pointed later is caught.
import dns from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * How long a delivery waits for a name's addresses, per server asked, and how many times each is
 * asked. Public names are resolved with c-ares (the DNS protocol, on the event loop), not the
 * system's getaddrinfo: that one runs on libuv's thread pool (four threads), so a few subscribers
 * whose name servers never answer held every thread for the resolver's timeout, and every other
 * subscriber's lookup (and the process's file writes) queued behind them.
 */
const DNS_TIMEOUT_MS = 3_000;
const DNS_TRIES = 2;

export class HostPolicy {
  private readonly names = new Set<string>();
  private readonly blocks = new BlockList();
  private readonly resolver: dns.promises.Resolver;

  /** `resolver`: where public names are resolved (a test's, on its own servers). */
  constructor(allow: readonly string[], resolver = new dns.promises.Resolver({ timeout: DNS_TIMEOUT_MS, tries: DNS_TRIES })) {
    this.resolver = resolver;
    for (const entry of allow) {
      const text = entry.trim().toLowerCase();
      if (text.includes('/')) {
        const [ip, bits] = text.split('/') as [string, string];
        this.blocks.addSubnet(ip, Number(bits), isIP(ip) === 6 ? 'ipv6' : 'ipv4');
      } else if (isIP(text)) {
        this.blocks.addAddress(text, isIP(text) === 6 ? 'ipv6' : 'ipv4');
      } else {
        this.names.add(text);
      }
    }
  }

  /** Whether the allow-list names this host (a name, or an address in a listed range). */
  allows(host: string): boolean {
    const h = bare(host).toLowerCase();
    if (this.names.has(h)) return true;
    const kind = isIP(h);
    return kind !== 0 && this.blocks.check(h, kind === 6 ? 'ipv6' : 'ipv4');
  }

  /** Why a resolved address may not be reached from a URL on `host`, or undefined when it may. */
  refuseAddress(host: string, address: string): string | undefined {
    if (this.allows(host) || this.allows(address)) return undefined;
    return isPublic(address) ? undefined : `${address} is a private, loopback, link-local or reserved address`;
  }

  /** Why this URL cannot be a webhook, or undefined when its form is acceptable. */
  refuseUrl(text: string): string | undefined {
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      return 'is not an absolute URL';
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'must be an https URL';
    if (url.username || url.password) return 'must not carry credentials (use --secret)';
    if (url.hash) return 'must not have a fragment';
    if (text.length > 2000) return 'is longer than 2000 characters';
    const allowed = this.allows(url.hostname);
    if (url.protocol === 'http:' && !allowed) return `must be https (http only for hosts in WEBHOOK_ALLOW_HOSTS)`;
    const host = bare(url.hostname);
    if (isIP(host)) return this.refuseAddress(host, host);
    // A name's trailing dot (the DNS root) names the same host: `localhost.` is localhost.
    const name = host.replace(/\.+$/, '');
    if (!allowed && !this.allows(name) && isLocalName(name)) {
      return `names a local or cloud metadata host (${host}); add it to WEBHOOK_ALLOW_HOSTS to allow it`;
    }
    return undefined;
  }

  /** A `lookup` for http(s).request that refuses an address the policy forbids, after resolving. */
  lookupGuard(host: string): LookupFunction {
    return (hostname, options, callback) => {
      const family = (options as { family?: number }).family;
      this.addressesOf(hostname, family === 4 || family === 6 ? family : undefined).then(
        (list) => {
          for (const a of list) {
            const why = this.refuseAddress(host, a.address);
            if (why) return callback(Object.assign(new Error(`refused: ${hostname} resolves to ${why}`), { code: 'EREFUSED_ADDRESS' }), '', 4);
          }
          const first = list[0];
          if (!first) return callback(Object.assign(new Error(`${hostname} did not resolve`), { code: 'ENOTFOUND' }), '', 4);
          if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, list);
          callback(null, first.address, first.family);
        },
        (err: NodeJS.ErrnoException) => callback(err, '', 4),
      );
    };
  }

  /**
   * A name's addresses: an allowed or local name as the system resolves it (its hosts file), a
   * public one by DNS alone (see DNS_TIMEOUT_MS).
   */
  async addressesOf(name: string, family?: 4 | 6): Promise<dns.LookupAddress[]> {
    const bareName = bare(name).replace(/\.+$/, '');
    if (isIP(bareName) || this.allows(name) || this.allows(bareName) || isLocalName(bareName)) {
      return dns.promises.lookup(name, { all: true, ...(family && { family }) });
    }
    const asked = ([4, 6] as const).filter((f) => family === undefined || f === family);
    const answers = await Promise.allSettled(asked.map((f) => (f === 4 ? this.resolver.resolve4(bareName) : this.resolver.resolve6(bareName))));
    const list = answers.flatMap((a, i) => (a.status === 'fulfilled' ? a.value.map((address) => ({ address, family: asked[i]! })) : []));
    const failed = answers.find((a): a is PromiseRejectedResult => a.status === 'rejected');
    if (list.length === 0 && failed) throw failed.reason;
    return list;
  }
}

/** Names that only mean something inside a network: special-use suffixes, and cloud metadata services. */
const LOCAL_SUFFIXES = ['localhost', 'local', 'localdomain', 'internal', 'intranet', 'lan', 'home.arpa'];
const METADATA_NAMES = new Set(['metadata.goog', 'metadata.google.internal', 'instance-data.ec2.internal', 'metadata.tencentyun.com', 'metadata.platformequinix.com']);

function isLocalName(name: string): boolean {
  return !name.includes('.') || METADATA_NAMES.has(name) || LOCAL_SUFFIXES.some((s) => name === s || name.endsWith(`.${s}`));
}

/**
 * Public unicast only: everything ipaddr.js does not class as plain "unicast" is refused, and so
 * is ::/96 (IPv4-compatible IPv6, deprecated), which it calls unicast though `::7f00:1` is
 * 127.0.0.1 to some stacks.
 */
function isPublic(address: string): boolean {
  try {
    let ip = ipaddr.parse(address);
    if (ip.kind() === 'ipv6' && (ip as ipaddr.IPv6).isIPv4MappedAddress()) ip = (ip as ipaddr.IPv6).toIPv4Address();
    if (ip.kind() === 'ipv6' && ip.match(ipaddr.parseCIDR('::/96'))) return false;
    return ip.range() === 'unicast';
  } catch {
    return false;
  }
}

function bare(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}
