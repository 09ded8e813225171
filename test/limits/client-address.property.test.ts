/**
 * The client address behind trusted proxies. For any `X-Forwarded-For` text: never throws; the
 * answer is the socket's address or one of the header's addresses; it is never a trusted address
 * while the header holds an untrusted one; and without trusted proxies the header is ignored.
 */
import fc from 'fast-check';
import { isIP } from 'node:net';
import { describe, expect, it } from 'vitest';
import type { AddressRange } from '../../registry/src/config/types.js';
import { ClientAddress, plainAddress } from '../../registry/src/limits/client-address.js';

const RUNS = { numRuns: 500 };

const TRUSTED: AddressRange[] = [
  { address: '127.0.0.1', prefix: 32, family: 'ipv4' },
  { address: '10.0.0.0', prefix: 8, family: 'ipv4' },
  { address: '::1', prefix: 128, family: 'ipv6' },
  { address: 'fd00::', prefix: 8, family: 'ipv6' },
];
const proxies = new ClientAddress(TRUSTED);

const v4 = fc.tuple(fc.constantFrom(10, 127, 192, 203), fc.nat(255), fc.nat(255), fc.nat(255)).map((p) => p.join('.'));
const v6 = fc.oneof(fc.constant('::1'), fc.ipV6(), fc.constantFrom('fd00::7', 'fdab:1::2', '2001:db8::1'));
const entry = fc.oneof(
  v4,
  v6,
  v4.map((a) => `${a}:8080`),
  v6.map((a) => `[${a}]:443`),
  fc.constantFrom('unknown', '', ' ', '::ffff:10.1.2.3', 'fe80::1%eth0', '999.1.1.1'),
  fc.string({ maxLength: 12 }),
);
const header = fc.oneof(
  fc.array(entry, { maxLength: 8 }).chain((parts) => fc.constantFrom(parts.join(','), parts.join(', '), parts.join(' ,  '))),
  fc.string({ unit: 'binary', maxLength: 80 }),
);
const socket = fc.oneof(v4, v6, fc.constant('::ffff:127.0.0.1'), fc.constant(undefined));

/** The addresses a header holds, as the chooser reads them. */
function addressesOf(h: string): string[] {
  return h.split(',').flatMap((p) => plainAddress(p.trim()) ?? []);
}

describe('ClientAddress', () => {
  it('answers the socket address or one of the header addresses, never a trusted one when an untrusted one is there', () => {
    fc.assert(
      fc.property(socket, header, (peer, h) => {
        const client = proxies.of(peer, h);
        const peerPlain = plainAddress(peer ?? '') ?? 'unknown';
        const listed = addressesOf(h);
        expect([peerPlain, ...listed]).toContain(client);
        if (!proxies.isTrusted(peerPlain)) {
          expect(client).toBe(peerPlain);
        } else if (listed.some((a) => !proxies.isTrusted(a))) {
          expect(proxies.isTrusted(client)).toBe(false);
          // The right-most untrusted one: everything right of it is a trusted hop.
          const at = listed.lastIndexOf(client);
          expect(listed.slice(at + 1).every((a) => proxies.isTrusted(a))).toBe(true);
        }
      }),
      RUNS,
    );
  });

  it('ignores the header without trusted proxies', () => {
    const none = new ClientAddress([]);
    fc.assert(
      fc.property(socket, fc.oneof(header, fc.constant(undefined)), (peer, h) => {
        expect(none.of(peer, h)).toBe(plainAddress(peer ?? '') ?? 'unknown');
      }),
      RUNS,
    );
  });

  it('reads repeated headers as one list, and maps IPv4-mapped sockets to IPv4', () => {
    expect(proxies.of('::ffff:127.0.0.1', ['198.51.100.7', '10.1.1.1'])).toBe('198.51.100.7');
    expect(proxies.of('127.0.0.1', '203.0.113.9, 198.51.100.7')).toBe('198.51.100.7');
    expect(proxies.of('127.0.0.1', '10.0.0.2, 10.0.0.1')).toBe('10.0.0.2');
    expect(proxies.of('198.51.100.1', '203.0.113.9')).toBe('198.51.100.1');
    expect(proxies.of('127.0.0.1', 'unknown, [2001:db8::1]:443')).toBe('2001:db8::1');
    expect(isIP(proxies.of(undefined, '1.2.3.4'))).toBe(0);
    expect(proxies.of('2001:DB8:0::1', undefined)).toBe('2001:db8::1');
    expect(proxies.of('0:0:0:0:0:0:0:1', '2001:db8::7')).toBe('2001:db8::7');
  });
});
