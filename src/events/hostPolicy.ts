// Where a webhook may point. Only https, to public addresses, unless WEBHOOK_ALLOW_HOSTS admits
// the host (by name, address or CIDR): a subscription must not be able to reach the network the
// service runs in (metadata endpoints, databases, admin ports). The check runs on every address a
// name resolves to at delivery time too (see lookupGuard), so a name re-pointed later is caught.
import dns from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';

export class HostPolicy {
  private readonly names = new Set<string>();
  private readonly blocks = new BlockList();

  constructor(allow: readonly string[]) {
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
      dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
        if (err) return callback(err, '', 4);
        const list = addresses;
        for (const a of list) {
          const why = this.refuseAddress(host, a.address);
          if (why) return callback(Object.assign(new Error(`refused: ${hostname} resolves to ${why}`), { code: 'EREFUSED_ADDRESS' }), '', 4);
        }
        const first = list[0];
        if (!first) return callback(Object.assign(new Error(`${hostname} did not resolve`), { code: 'ENOTFOUND' }), '', 4);
        if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, list);
        callback(null, first.address, first.family);
      });
    };
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
export function isPublic(address: string): boolean {
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
