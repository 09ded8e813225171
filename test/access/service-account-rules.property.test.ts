/**
 * What a ServiceAccount may do on an index (access/identities/grants.ts with
 * service-account-rules.ts) against a model: of the index's rules, the one naming the
 * ServiceAccount in its namespace applies, else the namespace's `*` rule, else none (no scope);
 * the credential then may do the scopes of that one rule, to the names its globs match (Python
 * names normalised), and nothing of any other rule. The grant an OCI realm token carries (found
 * again from its actor label) is the same grant.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { grantOfActor, grantOn } from '../../registry/src/access/identities/grants.js';
import { serviceAccountOf } from '../../registry/src/access/identities/service-account-rules.js';
import { hasScope, reachesName, scopeRefusal, type Credential } from '../../registry/src/access/tokens.js';
import type { IndexConfig, ServiceAccountRule, TokenScope } from '../../registry/src/config/types.js';
import { normalizeName } from '../../registry/src/python/model/records.js';

const SCOPES: TokenScope[] = ['read', 'upload', 'delete'];
const namespaces = fc.constantFrom('ci', 'ops', 'team-a');
const names = fc.constantFrom('builder', 'tester', 'web.deploy');
const nameChar = fc.constantFrom('a', 'b', 'A', '-', '_', '.', '/');
const project = fc.array(nameChar, { minLength: 1, maxLength: 8 }).map((cs) => cs.join(''));
const glob = fc.array(fc.oneof(nameChar, fc.constantFrom('*', '?')), { minLength: 1, maxLength: 6 }).map((cs) => cs.join(''));

const rule = fc.record({
  namespace: namespaces,
  name: fc.oneof(names, fc.constant('*')),
  scopes: fc.uniqueArray(fc.constantFrom(...SCOPES), { minLength: 1, maxLength: 3 }),
  projects: fc.option(fc.array(glob, { minLength: 1, maxLength: 3 }), { nil: undefined }),
});
/** The config allows one rule per ServiceAccount (or `*`) and namespace. */
const rules = fc.uniqueArray(rule, { maxLength: 8, selector: (r) => `${r.namespace}/${r.name}` }).map((rs) => rs.map((r): ServiceAccountRule => (r.projects ? r : { namespace: r.namespace, name: r.name, scopes: r.scopes })));

function indexWith(serviceAccounts: ServiceAccountRule[]): IndexConfig {
  return { name: 'builds', route: 'builds', routeSegments: ['builds'], ecosystem: 'python', role: 'hosted', volatile: false, trustedPublishers: [], policy: { denyProjects: [], allowProjects: [] }, webhooks: [], tokens: [], serviceAccounts, private: false };
}

function modelMatches(pattern: string, subject: string): boolean {
  return new RegExp(`^${[...pattern].map((c) => (c === '*' ? '.*' : c === '?' ? '.' : c.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('')}$`, 'su').test(subject);
}

/** The model: the exact rule, else the namespace's wildcard, else nothing. */
function modelRule(rs: readonly ServiceAccountRule[], namespace: string, name: string): ServiceAccountRule | undefined {
  return rs.find((r) => r.namespace === namespace && r.name === name) ?? rs.find((r) => r.namespace === namespace && r.name === '*');
}

describe('the ServiceAccount rules of an index', () => {
  it('agree with the model: one rule applies, its scopes and its globs', () => {
    fc.assert(
      fc.property(rules, namespaces, names, project, fc.constantFrom(...SCOPES), (rs, namespace, name, subject, scope) => {
        const index = indexWith(rs);
        const expiresAt = Date.now() + 60_000;
        const grant = grantOn(index, { kind: 'service-account', namespace, name, expiresAt });
        const credential: Credential = { kind: 'identity', grant };
        const expected = modelRule(rs, namespace, name);
        expect(grant.actor).toBe(`serviceaccount:${namespace}/${name}`);
        expect(grant.expiresAt.getTime()).toBe(expiresAt);
        expect([...grant.scopes].sort()).toEqual([...(expected?.scopes ?? [])].sort());
        expect(hasScope(credential, scope)).toBe(expected?.scopes.includes(scope) ?? false);
        const reaches = expected?.projects === undefined || expected.projects.some((p) => modelMatches(normalizeName(p), normalizeName(subject)));
        expect(reachesName(credential, subject, normalizeName)).toBe(reaches);
        const refusal = scopeRefusal(credential, scope, subject, normalizeName);
        expect(refusal === null).toBe((expected?.scopes.includes(scope) ?? false) && reaches);
        if (refusal !== null) expect(refusal).toMatch(new RegExp(`^the service account "${namespace}/${name.replace('.', '\\.')}" may not `));
        // A realm token names the identity by its actor: the same grant, read from the rules again.
        expect(grantOfActor(index, grant.actor, grant.expiresAt)).toEqual(grant);
      }),
      { numRuns: 500 },
    );
  });

  it("read a token's subject only when it names a ServiceAccount the way the API server writes it", () => {
    expect(serviceAccountOf('system:serviceaccount:ci:builder')).toEqual({ namespace: 'ci', name: 'builder' });
    expect(serviceAccountOf('system:serviceaccount:ci:web.deploy')).toEqual({ namespace: 'ci', name: 'web.deploy' });
    for (const other of ['system:serviceaccount:ci', 'system:serviceaccount:ci:builder:x', 'system:serviceaccount:CI:builder', 'system:node:n1', 'repo:acme/app:ref:refs/heads/main', 42, undefined]) {
      expect(serviceAccountOf(other), String(other)).toBeNull();
    }
  });
});
