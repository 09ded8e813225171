/**
 * Property-based checks of the `WWW-Authenticate` parser (upstream bytes): any string parses
 * without throwing; challenges rendered from arbitrary schemes and parameters (quoted with
 * escapes, or bare tokens, with any spacing) parse back to what was rendered; and the parameter
 * records never reach a prototype.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { challengeOf, parseWwwAuthenticate, type Challenge } from '../../registry/src/roles/www-authenticate.js';

const RUNS = { numRuns: 500 };

const tokenChars = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&\'*+.^_`|~-'.split('');
const token = fc.array(fc.constantFrom(...tokenChars), { minLength: 1, maxLength: 12 }).map((cs) => cs.join(''));
/** Parameter names are compared lower case; schemes never look like a token68 with `=` padding. */
const scheme = fc.stringMatching(/^[A-Za-z][A-Za-z0-9-]{0,9}$/);
const value = fc.string({ maxLength: 40 }).filter((v) => !/[\r\n]/.test(v));
const space = fc.constantFrom('', ' ', '  ', '\t');

interface Rendered {
  scheme: string;
  params: Array<[string, string, boolean]>;
}

const challenge: fc.Arbitrary<Rendered> = fc.record({
  scheme,
  params: fc.uniqueArray(fc.tuple(token, value, fc.boolean()), { minLength: 1, maxLength: 5, selector: ([k]) => k.toLowerCase() }),
});

function render(chs: readonly Rendered[], sp: string): string {
  return chs
    .map((ch) => {
      const params = ch.params.map(([k, v, quoted]) => {
        // A value that is not a token must be quoted.
        const bare = !quoted && /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(v);
        return `${k}${sp}=${sp}${bare ? v : `"${v.replace(/["\\]/g, (c) => `\\${c}`)}"`}`;
      });
      return `${ch.scheme} ${params.join(`${sp},${sp}`)}`;
    })
    .join(`${sp},${sp}`);
}

describe('parseWwwAuthenticate', () => {
  it('never throws, and returns challenges with lower-case schemes and string parameters', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), (header) => {
        const out = parseWwwAuthenticate(header);
        for (const ch of out) {
          expect(ch.scheme).toBe(ch.scheme.toLowerCase());
          for (const v of Object.values(ch.params)) expect(typeof v).toBe('string');
        }
      }),
      RUNS,
    );
  });

  it('reads back every rendered challenge and parameter', () => {
    fc.assert(
      fc.property(fc.array(challenge, { minLength: 1, maxLength: 3 }), space, (chs, sp) => {
        const out = parseWwwAuthenticate(render(chs, sp));
        const expected: Challenge[] = chs.map((ch) => ({
          scheme: ch.scheme.toLowerCase(),
          params: Object.fromEntries(ch.params.map(([k, v]) => [k.toLowerCase(), v])),
        }));
        expect(out.map((c) => ({ scheme: c.scheme, params: { ...c.params } }))).toEqual(expected);
      }),
      RUNS,
    );
  });

  it('reads the registries\' own challenges', () => {
    const hub = parseWwwAuthenticate('Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/alpine:pull"');
    expect(challengeOf(hub, 'bearer')?.params).toEqual({ realm: 'https://auth.docker.io/token', service: 'registry.docker.io', scope: 'repository:library/alpine:pull' });
    const scoped = parseWwwAuthenticate('Bearer realm="https://r.example/token",service="r",scope="repository:a:pull,push",error="insufficient_scope"');
    expect(challengeOf(scoped, 'bearer')?.params.scope).toBe('repository:a:pull,push');
    expect(challengeOf(scoped, 'bearer')?.params.error).toBe('insufficient_scope');
    const two = parseWwwAuthenticate(['Basic realm="velodex"', 'Negotiate abc=']);
    expect(two).toEqual([
      { scheme: 'basic', params: { realm: 'velodex' } },
      { scheme: 'negotiate', params: {}, token68: 'abc=' },
    ]);
  });

  it('keeps a parameter named __proto__ as data', () => {
    const [ch] = parseWwwAuthenticate('Bearer __proto__="x", realm="r"');
    expect(ch?.params.realm).toBe('r');
    expect(Object.getPrototypeOf(ch?.params)).toBe(Object.prototype);
    expect(Object.hasOwn(ch!.params, '__proto__')).toBe(true);
  });
});
