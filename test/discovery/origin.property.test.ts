/**
 * The origin parser takes the client's own header bytes (`Host`, `X-Forwarded-Host`,
 * `X-Forwarded-Proto`) and turns them into the URLs of the discovery document. Properties: what
 * it accepts is a normalised host[:port] that the URL parser reads back unchanged; what it
 * rejects never reaches the document; plausible hosts are never refused; forwarded headers count
 * only when the request came from a trusted proxy.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { localOrigin, originOf, parseHost, parseScheme } from '../../registry/src/discovery/origin.js';

const RUNS = { numRuns: 500 };
/** What an accepted host may look like, written independently of the parser. */
const SAFE_HOST = /^(?:\[[0-9a-f:.]+\]|[a-z0-9_](?:[a-z0-9._-]*[a-z0-9_])?)(?::[0-9]{1,5})?$/;

// `xn--` starts an IDNA label, which must decode: not every such string is a host.
const label = fc.stringMatching(/^[a-z0-9](?:[a-z0-9-]{0,10}[a-z0-9])?$/).filter((l) => !l.startsWith('xn--'));
const dnsName = fc
  .array(label, { minLength: 1, maxLength: 4 })
  // A last label that reads as a number (`123`, or hex such as `0x` and `0x1f`) makes the URL
  // parser take the whole name for an IPv4 address, which `a.0x` is not: no plausible name.
  .filter((labels) => !/^(?:[0-9]+|0x[0-9a-f]*)$/.test(labels[labels.length - 1] ?? ''))
  .map((labels) => labels.join('.'));
const ipv4 = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)).map((p) => p.join('.'));
const ipv6 = fc.ipV6().map((a) => `[${a}]`);
const port = fc.integer({ min: 1, max: 65535 });
const plausible = fc.tuple(fc.oneof(dnsName, ipv4, ipv6), fc.option(port, { nil: undefined })).map(([h, p]) => (p === undefined ? h : `${h}:${p}`));
/** Anything a client can put in a header: arbitrary text, and near-misses of real hosts. */
const garbage = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 60 }),
  fc.tuple(plausible, fc.constantFrom('/', '@', ' ', '"', '<', '>', '\\', '?', '#', '%2f', ':', ':0', ':65536', ':-1', '\t'), plausible).map(([a, sep, b]) => `${a}${sep}${b}`),
);

describe('parseHost', () => {
  it('accepts only a normalised host[:port] that reads back unchanged', () => {
    fc.assert(
      fc.property(fc.oneof(plausible, garbage), (raw) => {
        const host = parseHost(raw);
        if (host === null) return;
        expect(host).toMatch(SAFE_HOST);
        expect(parseHost(host)).toBe(host);
        // What the document prints is what a client's URL parser makes of it.
        expect(new URL(`http://${host}`).host).toBe(host.replace(/:80$/, ''));
      }),
      RUNS,
    );
  });

  it('accepts every plausible host, lowercased', () => {
    fc.assert(
      fc.property(plausible, fc.boolean(), (raw, upper) => {
        const given = upper ? raw.toUpperCase() : raw;
        const host = parseHost(given);
        expect(host).not.toBeNull();
        expect(new URL(`http://${host}`).host).toBe(new URL(`http://${raw}`).host);
      }),
      RUNS,
    );
  });

  it('refuses what would change the URL beyond its host', () => {
    for (const bad of ['evil.example/path', 'user@evil.example', 'evil.example?x', 'evil.example#x', 'a b', '', ':80', 'host:0', 'host:99999', '[::1', '[zz::1]', '1.2.3', '-lead.example', 'x'.repeat(64) + '.example', 'évil.example', 'evil.example\r\nX-Injected: 1', 'xn--0.a', 'xn--.example']) {
      expect(parseHost(bad), bad).toBeNull();
    }
  });
});

describe('originOf', () => {
  const scheme = fc.oneof(fc.constantFrom('http', 'https', 'HTTPS', ' http '), fc.string({ maxLength: 10 }));
  const header = fc.option(fc.oneof(plausible, garbage), { nil: undefined });

  it('from a trusted proxy, uses a forwarded value only when it is valid, and reflects nothing else', () => {
    fc.assert(
      fc.property(header, header, fc.option(scheme, { nil: undefined }), fc.constantFrom('http', 'https'), (host, fwdHost, fwdProto, conn) => {
        const headers: Record<string, string> = {};
        if (host !== undefined) headers.host = host;
        if (fwdHost !== undefined) headers['x-forwarded-host'] = fwdHost;
        if (fwdProto !== undefined) headers['x-forwarded-proto'] = fwdProto;
        const origin = originOf(headers, conn as 'http' | 'https', true);
        const firstFwd = fwdHost?.split(',')[0];
        const expectedHost = (firstFwd === undefined ? null : parseHost(firstFwd)) ?? parseHost(host?.split(',')[0] ?? '');
        if (expectedHost === null) {
          expect(origin).toBeNull();
          return;
        }
        const expectedScheme = (fwdProto === undefined ? null : parseScheme(fwdProto.split(',')[0] ?? '')) ?? conn;
        expect(origin).not.toBeNull();
        expect(origin?.scheme).toBe(expectedScheme);
        expect(origin?.href).toBe(new URL(`${expectedScheme}://${expectedHost}`).origin);
        expect(origin?.host).toMatch(SAFE_HOST);
      }),
      RUNS,
    );
  });

  it('from any other peer, ignores the forwarded headers whatever they say', () => {
    fc.assert(
      fc.property(header, header, fc.option(scheme, { nil: undefined }), fc.constantFrom('http', 'https'), (host, fwdHost, fwdProto, conn) => {
        const headers: Record<string, string> = {};
        if (host !== undefined) headers.host = host;
        if (fwdHost !== undefined) headers['x-forwarded-host'] = fwdHost;
        if (fwdProto !== undefined) headers['x-forwarded-proto'] = fwdProto;
        const plain: Record<string, string> = host === undefined ? {} : { host };
        expect(originOf(headers, conn as 'http' | 'https', false)).toEqual(originOf(plain, conn as 'http' | 'https', true));
        // Untrusted is the default: a caller that forgets to ask gets the safe answer.
        expect(originOf(headers, conn as 'http' | 'https')).toEqual(originOf(headers, conn as 'http' | 'https', false));
      }),
      RUNS,
    );
  });

  it('takes the client-facing entry of a proxy chain', () => {
    expect(originOf({ host: 'inner:8080', 'x-forwarded-host': 'pkgs.example.com, inner:8080', 'x-forwarded-proto': 'https, http' }, 'http', true)?.href).toBe('https://pkgs.example.com');
    expect(originOf({ host: 'pkgs.example.com:443', 'x-forwarded-proto': 'https' }, 'http', true)?.href).toBe('https://pkgs.example.com');
    expect(originOf({ host: '[::1]:4433' }, 'http', true)?.href).toBe('http://[::1]:4433');
    expect(originOf({ host: 'ok.example', 'x-forwarded-host': 'bad host', 'x-forwarded-proto': 'gopher' }, 'http', true)?.href).toBe('http://ok.example');
  });

  it('falls back to the connection\'s own address when a URL is needed and no host was named', () => {
    expect(localOrigin({ localAddress: '127.0.0.1', localPort: 4433 }).href).toBe('http://127.0.0.1:4433');
    expect(localOrigin({ localAddress: '::1', localPort: 4433 }).href).toBe('http://[::1]:4433');
    expect(localOrigin({ localAddress: 'fe80::1%eth0', localPort: 80 }).href).toBe('http://[fe80::1]');
    expect(localOrigin({}).href).toBe('http://127.0.0.1');
  });
});
