/**
 * Where a cached index's upstream client may connect. An upstream is trusted only as far as the
 * configuration names it: the host of the configured upstream URL, and the hosts of `upstream_hosts`,
 * are fetched from whatever address they resolve to (an in-cluster mirror on a private network is
 * an ordinary upstream). Every other host reaches us through something an upstream said (a page
 * link, a redirect, a token realm): such a host is either refused outright, or fetched only when
 * every address it resolves to is public, checked when the connection is made (a name that
 * resolves to loopback, a private network or the link-local metadata address never gets a
 * request, whatever it resolved to the last time).
 */
import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions, type LookupOneOptions } from 'node:dns';
import { BlockList, isIP } from 'node:net';

/** What becomes of a host the configuration does not name. */
export type OtherHosts = 'public' | 'refuse';

export interface EgressOptions {
  /** The configured upstream URL: its host is trusted. */
  upstream: string | URL;
  /** More trusted hosts: names, or `*.example.com` for every name below example.com (config/hosts.ts). */
  trustedHosts?: readonly string[];
  otherHosts: OtherHosts;
}

/** How a request to a host goes out: to any address, to public addresses only, or not at all. */
export type EgressMode = 'trusted' | 'public' | 'refused';

/** Addresses no request to an untrusted host may reach (RFC 6890 special-purpose blocks and the like). */
const NOT_PUBLIC = (() => {
  const b = new BlockList();
  const v4: [string, number][] = [
    ['0.0.0.0', 8], // "this network"
    ['10.0.0.0', 8],
    ['100.64.0.0', 10], // carrier-grade NAT
    ['127.0.0.0', 8],
    ['169.254.0.0', 16], // link-local, cloud metadata services
    ['172.16.0.0', 12],
    ['192.0.0.0', 24],
    ['192.0.2.0', 24],
    ['192.168.0.0', 16],
    ['198.18.0.0', 15],
    ['198.51.100.0', 24],
    ['203.0.113.0', 24],
    ['224.0.0.0', 4], // multicast
    ['240.0.0.0', 4], // reserved, broadcast
  ];
  for (const [a, p] of v4) b.addSubnet(a, p, 'ipv4');
  const v6: [string, number][] = [
    ['::', 128],
    ['::1', 128],
    ['64:ff9b:1::', 48], // local-use NAT64
    ['100::', 64], // discard
    ['2001:db8::', 32], // documentation
    ['fc00::', 7], // unique local
    ['fe80::', 10], // link-local
    ['fec0::', 10], // site-local (deprecated, still routed by some)
    ['ff00::', 8], // multicast
  ];
  for (const [a, p] of v6) b.addSubnet(a, p, 'ipv6');
  return b;
})();

/** True when `ip` is an address on the public internet (IPv4-mapped and NAT64 forms judged by their IPv4 address). */
export function isPublicAddress(ip: string): boolean {
  const bare = ip.startsWith('[') && ip.endsWith(']') ? ip.slice(1, -1) : ip;
  const version = isIP(bare);
  if (version === 0) return false;
  if (version === 4) return !NOT_PUBLIC.check(bare, 'ipv4');
  const embedded = embeddedIpv4(bare);
  if (embedded !== undefined) return isPublicAddress(embedded);
  try {
    return !NOT_PUBLIC.check(bare, 'ipv6');
  } catch {
    // An address BlockList cannot read (a zone id) is nothing we send to.
    return false;
  }
}

/** The IPv4 address inside `::ffff:a.b.c.d` (mapped) or `64:ff9b::a.b.c.d` (NAT64), if it is one. */
function embeddedIpv4(v6: string): string | undefined {
  const lower = v6.toLowerCase();
  for (const prefix of ['::ffff:', '64:ff9b::']) {
    if (!lower.startsWith(prefix)) continue;
    const rest = lower.slice(prefix.length);
    if (isIP(rest) === 4) return rest;
    // The hex form, `::ffff:7f00:1`.
    const m = /^([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(rest);
    if (m) {
      const hi = parseInt(m[1]!, 16);
      const lo = parseInt(m[2]!, 16);
      return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
    }
  }
  return undefined;
}

/** Refused by the egress rule: the message names the host and the setting, never a path or query. */
export class EgressRefusedError extends Error {
  constructor(
    readonly host: string,
    detail: string,
  ) {
    super(`${host}: ${detail}`);
    this.name = 'EgressRefusedError';
  }
}

export class Egress {
  readonly #upstreamHost: string;
  readonly #exact = new Set<string>();
  readonly #suffixes: string[] = [];
  readonly #others: OtherHosts;

  constructor(opts: EgressOptions) {
    this.#upstreamHost = hostOf(new URL(opts.upstream));
    for (const pattern of opts.trustedHosts ?? []) {
      const p = pattern.toLowerCase();
      if (p.startsWith('*.')) this.#suffixes.push(p.slice(1));
      else this.#exact.add(p.replace(/^\[(.*)\]$/, '$1'));
    }
    this.#others = opts.otherHosts;
  }

  /** How a request to `url` goes out. */
  modeOf(url: URL): EgressMode {
    const host = hostOf(url);
    if (host === this.#upstreamHost || this.#exact.has(host) || this.#suffixes.some((s) => host.endsWith(s))) return 'trusted';
    return this.#others === 'public' ? 'public' : 'refused';
  }

  /**
   * Throws `EgressRefusedError` unless a request to `url` may go out; for a host that must be
   * public, answers the `lookup` to connect with (an address literal is judged here and now).
   */
  admit(url: URL): { lookup?: typeof publicOnlyLookup } {
    const mode = this.modeOf(url);
    if (mode === 'trusted') return {};
    const host = hostOf(url);
    if (mode === 'refused') {
      throw new EgressRefusedError(host, 'not the upstream\'s own host nor one of the index\'s upstream_hosts; nothing is fetched from it');
    }
    if (isIP(host) !== 0) {
      if (!isPublicAddress(host)) throw new EgressRefusedError(host, 'a loopback, private or link-local address; list the host in upstream_hosts to allow it');
      return {};
    }
    return { lookup: publicOnlyLookup };
  }
}

/** The host of `url`, lower case, IPv6 without brackets. */
function hostOf(url: URL): string {
  return url.hostname.toLowerCase().replace(/^\[(.*)\]$/, '$1');
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for `http.request` that resolves as usual and fails the connection when any address
 * of the name is not public (all of them are checked: the socket may try each in turn).
 */
export function publicOnlyLookup(hostname: string, options: LookupOneOptions | LookupAllOptions | number, callback: LookupCallback): void {
  const opts = typeof options === 'number' ? { family: options } : options;
  dnsLookup(hostname, { ...opts, all: true }, (err, addresses) => {
    if (err) {
      callback(err, '');
      return;
    }
    const bad = addresses.find((a) => !isPublicAddress(a.address));
    if (bad !== undefined || addresses.length === 0) {
      const refusal = new EgressRefusedError(hostname, 'resolves to a loopback, private or link-local address; list the host in upstream_hosts to allow it') as NodeJS.ErrnoException;
      refusal.code = 'EGRESS_REFUSED';
      callback(refusal, '');
      return;
    }
    if ('all' in opts && opts.all) callback(null, addresses);
    else callback(null, addresses[0]!.address, addresses[0]!.family);
  });
}
