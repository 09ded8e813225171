/**
 * The scope matcher of named tokens (registry/src/access/tokens.ts) against a model: a token
 * reaches a name when it has no globs or one of its globs matches the whole name (`*` any run,
 * `?` one character, both sides in the index's normal form), and may do a scope it lists. The
 * model matches with a regular expression built from the glob, the matcher without one.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { hasScope, reachesName, scopeRefusal, type Credential } from '../../registry/src/access/tokens.js';
import { Secret } from '../../registry/src/config/secret.js';
import type { IndexToken, TokenScope } from '../../registry/src/config/types.js';
import { normalizeName } from '../../registry/src/python/model/records.js';

const SCOPES: TokenScope[] = ['read', 'upload', 'delete'];

/** Names and globs over a small alphabet, so that matches are frequent. */
const nameChar = fc.constantFrom('a', 'b', 'A', '-', '_', '.', '/');
const name = fc.array(nameChar, { minLength: 1, maxLength: 10 }).map((cs) => cs.join(''));
const glob = fc.array(fc.oneof(nameChar, fc.constantFrom('*', '?')), { minLength: 1, maxLength: 8 }).map((cs) => cs.join(''));

const token = fc.record({
  scopes: fc.uniqueArray(fc.constantFrom(...SCOPES), { minLength: 1, maxLength: 3 }),
  projects: fc.option(fc.array(glob, { minLength: 1, maxLength: 3 }), { nil: undefined }),
});

function modelMatches(pattern: string, subject: string): boolean {
  const re = new RegExp(`^${[...pattern].map((c) => (c === '*' ? '.*' : c === '?' ? '.' : c.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('')}$`, 'su');
  return re.test(subject);
}

function named(t: { scopes: TokenScope[]; projects: string[] | undefined }): Credential {
  const it: IndexToken = { name: 'ci', secret: new Secret('s', 'inline'), scopes: t.scopes, ...(t.projects ? { projects: t.projects } : {}) };
  return { kind: 'named', token: it };
}

describe('the scope matcher of named tokens', () => {
  for (const [ecosystem, normalize] of [
    ['Python (PEP 503 names)', normalizeName],
    ['OCI (names as they are)', (n: string) => n],
  ] as const) {
    it(`agrees with the model, ${ecosystem}`, () => {
      fc.assert(
        fc.property(token, name, fc.constantFrom(...SCOPES), (t, subject, scope) => {
          const credential = named(t);
          const reaches = t.projects === undefined || t.projects.some((p) => modelMatches(normalize(p), normalize(subject)));
          expect(reachesName(credential, subject, normalize)).toBe(reaches);
          expect(hasScope(credential, scope)).toBe(t.scopes.includes(scope));
          const refusal = scopeRefusal(credential, scope, subject, normalize);
          expect(refusal === null).toBe(t.scopes.includes(scope) && reaches);
          // A refusal names the token, never anything secret.
          if (refusal !== null) expect(refusal).toMatch(/^the token "ci" may not /);
        }),
        { numRuns: 500 },
      );
    });
  }

  it('the upload token reaches every name and may do everything', () => {
    fc.assert(
      fc.property(name, fc.constantFrom(...SCOPES), (subject, scope) => {
        const credential: Credential = { kind: 'upload-token' };
        expect(reachesName(credential, subject)).toBe(true);
        expect(hasScope(credential, scope)).toBe(true);
        expect(scopeRefusal(credential, scope, subject)).toBeNull();
      }),
    );
  });
});
