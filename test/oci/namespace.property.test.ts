/**
 * Property-based checks of the `ns` parameter (oci/model/namespace.ts) and of the registry-host
 * grammar under it (config/mirrors.ts): for any query it returns, never throws; a registry host is
 * found again whatever its case and however the query encodes it; its spelling is a fixed point;
 * Docker Hub's API hosts fold into `docker.io`; several `ns` that differ, and anything that is not
 * a host, are `invalid` and quoted within bounds; no `ns` at all is `none`.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { registryHost } from '../../registry/src/config/mirrors.js';
import { ociFacts } from '../../registry/src/oci/facts.js';
import { namespaceOf } from '../../registry/src/oci/model/namespace.js';

const RUNS = { numRuns: 300 };
const ALIASES = ociFacts.mirror?.aliases ?? {};

const label = fc.stringMatching(/^[a-z0-9](?:[a-z0-9-]{0,10}[a-z0-9])?$/);
/** A DNS name whose last label is not all digits (those are IPv4 or nothing). */
const dnsName = fc.tuple(fc.array(label, { minLength: 0, maxLength: 3 }), fc.stringMatching(/^[a-z][a-z0-9]{0,5}$/)).map(([ls, tld]) => [...ls, tld].join('.'));
const ipv4 = fc.ipV4();
const ipv6 = fc.ipV6().map((a) => `[${a}]`);
const port = fc.option(fc.integer({ min: 1, max: 65535 }), { nil: undefined });
const registry = fc.tuple(fc.oneof(dnsName, ipv4, ipv6), port).map(([h, p]) => (p === undefined ? h : `${h}:${p}`));

/** Randomly upper-cases letters: hosts compare case-insensitively. */
const recased = (s: string, flips: boolean[]) => [...s].map((c, i) => (flips[i % flips.length] ? c.toUpperCase() : c)).join('');

describe('namespaceOf', () => {
  it('never throws, and says none only when no ns was sent', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), (raw) => {
        const query = new URLSearchParams(raw);
        const ns = namespaceOf(query, ALIASES);
        expect(ns.kind === 'none').toBe(!query.has('ns'));
        if (ns.kind === 'invalid') expect(ns.raw.length).toBeLessThanOrEqual(100);
        if (ns.kind === 'registry') expect(registryHost(ns.host, ALIASES)).toBe(ns.host);
      }),
      RUNS,
    );
  });

  it('finds a registry host again, whatever its case and the encoding of the query, beside other parameters', () => {
    fc.assert(
      fc.property(registry, fc.array(fc.boolean(), { minLength: 1, maxLength: 8 }), fc.dictionary(fc.stringMatching(/^[a-m]{1,4}$/), fc.string({ maxLength: 10 })), (host, flips, others) => {
        const canonical = registryHost(host, ALIASES);
        expect(canonical).not.toBeNull();
        // The spelling is a fixed point.
        expect(registryHost(canonical ?? '', ALIASES)).toBe(canonical);
        const query = new URLSearchParams({ ...others, ns: recased(host, flips) });
        // As containerd sends it (`url.Values.Encode`: ':' as %3A), and parsed back as the server does.
        const ns = namespaceOf(new URLSearchParams(query.toString()), ALIASES);
        expect(ns).toEqual({ kind: 'registry', host: canonical });
      }),
      RUNS,
    );
  });

  it('reads ns repeated with one registry as that registry, and two registries as invalid', () => {
    fc.assert(
      fc.property(registry, registry, (a, b) => {
        const same = new URLSearchParams([['ns', a], ['ns', a.toUpperCase()]]);
        expect(namespaceOf(same, ALIASES)).toEqual({ kind: 'registry', host: registryHost(a, ALIASES) });
        const two = namespaceOf(new URLSearchParams([['ns', a], ['ns', b]]), ALIASES);
        expect(two.kind).toBe(registryHost(a, ALIASES) === registryHost(b, ALIASES) ? 'registry' : 'invalid');
      }),
      RUNS,
    );
  });

  it('folds Docker Hub’s API hosts into docker.io', () => {
    for (const host of ['docker.io', 'DOCKER.IO', 'registry-1.docker.io', 'index.docker.io']) {
      expect(namespaceOf(new URLSearchParams({ ns: host }), ALIASES)).toEqual({ kind: 'registry', host: 'docker.io' });
    }
    // A port makes it another registry.
    expect(namespaceOf(new URLSearchParams({ ns: 'registry-1.docker.io:5000' }), ALIASES)).toEqual({ kind: 'registry', host: 'registry-1.docker.io:5000' });
  });

  it('calls anything with a scheme, a path, user info, spaces or a bad port invalid', () => {
    const junk = fc.tuple(registry, fc.constantFrom('http://', 'user@', ' ', '')).chain(([host, prefix]) =>
      fc.constantFrom(`${prefix}${host}/path`, `${prefix}${host}?x`, `${prefix}${host}#f`, `https://${host}`, `${host}:0`, `${host}:65536`, `${host} `, `${host}:`),
    );
    fc.assert(
      fc.property(junk, (raw) => {
        expect(namespaceOf(new URLSearchParams({ ns: raw }), ALIASES).kind).toBe('invalid');
      }),
      RUNS,
    );
  });
});
