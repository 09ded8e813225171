/**
 * The egress rule of cached indexes (registry/src/roles/egress.ts): which hosts are trusted, and
 * which addresses count as public, against a model built from the address blocks themselves, for
 * addresses written every way an upstream could write them.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../registry/src/config/errors.js';
import { parseConfigText } from '../../registry/src/config/load.js';
import { ecosystems } from '../../registry/src/app/ecosystems.js';
import { Egress, EgressRefusedError, isPublicAddress, publicOnlyLookup } from '../../registry/src/roles/egress.js';

/** The model: an IPv4 address is not public when it falls in one of these blocks. */
const NOT_PUBLIC_V4: [number, number][] = [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12], ['192.0.0.0', 24],
  ['192.0.2.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24], ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4],
].map(([a, p]) => [toInt(a as string), p as number]);

function toInt(ip: string): number {
  return ip.split('.').reduce((n, o) => n * 256 + Number(o), 0);
}
function modelPublicV4(n: number): boolean {
  return !NOT_PUBLIC_V4.some(([base, prefix]) => Math.floor(n / 2 ** (32 - prefix)) === Math.floor(base / 2 ** (32 - prefix)));
}
const v4 = (n: number) => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
const hex = (n: number) => `${((n >>> 16) & 0xffff).toString(16)}:${(n & 0xffff).toString(16)}`;

/** Addresses near every block's edges, and anywhere. */
const anyV4 = fc.oneof(
  fc.integer({ min: 0, max: 2 ** 32 - 1 }),
  fc.constantFrom(...NOT_PUBLIC_V4).chain(([base, prefix]) => fc.integer({ min: -2, max: 2 ** (32 - prefix) + 1 }).map((d) => Math.min(2 ** 32 - 1, Math.max(0, base + d)))),
);

describe('isPublicAddress', () => {
  it('agrees with the model for IPv4, and for the same address mapped into IPv6 or NAT64', () => {
    fc.assert(
      fc.property(anyV4, (n) => {
        const want = modelPublicV4(n);
        expect(isPublicAddress(v4(n))).toBe(want);
        expect(isPublicAddress(`::ffff:${v4(n)}`)).toBe(want);
        expect(isPublicAddress(`::ffff:${hex(n)}`)).toBe(want);
        expect(isPublicAddress(`64:ff9b::${v4(n)}`)).toBe(want);
        expect(isPublicAddress(`[::ffff:${v4(n)}]`)).toBe(want);
      }),
      { numRuns: 2000 },
    );
  });

  it('knows the IPv6 blocks that are not public', () => {
    for (const ip of ['::', '::1', 'fe80::1', 'fc00::1', 'fd12:3456::1', 'ff02::1', '2001:db8::1', 'fec0::1', '100::1', 'fe80::1%eth0']) expect(isPublicAddress(ip), ip).toBe(false);
    for (const ip of ['2606:4700::1111', '2a00:1450:4001::200e', '8.8.8.8', '1.1.1.1']) expect(isPublicAddress(ip), ip).toBe(true);
  });

  it('is false for anything that is not an address', () => {
    fc.assert(fc.property(fc.string(), (s) => (isPublicAddress(s) ? expect(/^[0-9a-f:.[\]]+$/i.test(s)).toBe(true) : true)));
    for (const s of ['', 'localhost', 'example.com', '1.2.3', '999.1.1.1']) expect(isPublicAddress(s)).toBe(false);
  });
});

describe('Egress', () => {
  const egress = new Egress({ upstream: 'https://Mirror.Example:8443/simple/', trustedHosts: ['files.example', '*.cdn.example', '10.0.0.7'], otherHosts: 'refuse' });

  it('trusts the upstream host (any port, any scheme), the named hosts and the names below a wildcard', () => {
    for (const url of ['https://mirror.example/x', 'http://MIRROR.example:1/y', 'https://files.example/f', 'https://a.cdn.example/f', 'https://b.a.cdn.example/f', 'http://10.0.0.7/f']) {
      expect(egress.modeOf(new URL(url)), url).toBe('trusted');
    }
  });

  it('refuses every other host when the ecosystem says so, the wildcard parent included', () => {
    for (const url of ['https://cdn.example/f', 'https://evilcdn.example/f', 'https://files.example.evil/f', 'http://127.0.0.1/', 'http://169.254.169.254/latest']) {
      expect(() => egress.admit(new URL(url)), url).toThrow(EgressRefusedError);
    }
  });

  it('lets other hosts through only to public addresses when the ecosystem allows them', () => {
    const open = new Egress({ upstream: 'https://registry.example/', otherHosts: 'public' });
    expect(open.admit(new URL('https://203.0.114.9/blob'))).toEqual({});
    expect(open.admit(new URL('https://cdn.example/blob')).lookup).toBe(publicOnlyLookup);
    for (const url of ['http://127.0.0.2:9/', 'http://[::1]/', 'http://169.254.169.254/', 'http://[::ffff:10.1.2.3]/', 'http://0x7f000001/']) {
      expect(() => open.admit(new URL(url)), url).toThrow(EgressRefusedError);
    }
  });

  it('a name that resolves to loopback is refused when the connection is made', async () => {
    const err = await new Promise<NodeJS.ErrnoException | null>((resolve) => publicOnlyLookup('localhost', { all: true }, (e) => resolve(e)));
    expect(err?.code).toBe('EGRESS_REFUSED');
    expect(err?.message).toContain('upstream_hosts');
  });
});

describe('upstream_hosts in the config', () => {
  const load = (index: string) => parseConfigText(index, 'test.toml', { env: {}, ecosystems });

  it('is read on a cached index, lower-cased', () => {
    const config = load('[[index]]\nname = "c"\nroute = "c"\ncached = "https://pypi.example/simple/"\nupstream_hosts = ["Files.Example", "*.cdn.example", "10.1.2.3"]\n');
    const ix = config.indexes[0]!;
    expect(ix.role === 'cached' && ix.upstreams[0].hosts).toEqual(['files.example', '*.cdn.example', '10.1.2.3']);
  });

  it('is refused on other roles and when an entry is no host name', () => {
    expect(() => load('[[index]]\nname = "h"\nroute = "h"\nhosted = true\nupstream_hosts = ["a.example"]\n')).toThrow(/upstream_hosts.*only applies to a cached index/s);
    for (const bad of ['https://a.example/', 'a.example/path', '*', 'a.*.example', 'a b']) {
      expect(() => load(`[[index]]\nname = "c"\nroute = "c"\ncached = "https://pypi.example/simple/"\nupstream_hosts = ["${bad}"]\n`), bad).toThrow(ConfigError);
    }
  });
});
