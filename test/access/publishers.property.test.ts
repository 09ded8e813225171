/**
 * The claim rules of trusted publishers (registry/src/access/publishing/publishers.ts) against a
 * model: a token matches when its issuer is the publisher's, every pinned claim is equal
 * (repository, owner and project paths in any case, the rest exactly), the workflow that ran the
 * job is the publisher's file in the publisher's repository at any ref, and the full ref (GitLab's
 * `ref_path`, else `ref`) is the publisher's. Claims that are not strings never match.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { publisherMatches, type Claims } from '../../registry/src/access/publishing/publishers.js';
import type { TrustedPublisher } from '../../registry/src/config/types.js';

const ISSUER = 'https://token.actions.example';
const word = fc.array(fc.constantFrom('a', 'b', 'A', 'B', '-', '.'), { minLength: 1, maxLength: 4 }).map((cs) => cs.join(''));
const repository = fc.tuple(word, word).map(([o, n]) => `${o}/${n}`);
const workflow = word.map((w) => `${w}.yml`);
const ref = fc.constantFrom('refs/heads/main', 'refs/heads/dev', 'refs/tags/v1');

const publisher = fc.record({
  repository,
  environment: fc.option(fc.constantFrom('pypi', 'staging'), { nil: undefined }),
  workflow: fc.option(workflow, { nil: undefined }),
  ref: fc.option(ref, { nil: undefined }),
});
const job = fc.record({
  repository,
  environment: fc.option(fc.constantFrom('pypi', 'staging', 'PYPI'), { nil: undefined }),
  workflowRepo: fc.option(repository, { nil: undefined }),
  workflow,
  ref,
  issuer: fc.constantFrom(ISSUER, `${ISSUER}/`, 'https://other.example'),
});

function modelMatches(p: { repository: string; environment: string | undefined; workflow: string | undefined; ref: string | undefined }, j: { repository: string; environment: string | undefined; workflowRepo: string | undefined; workflow: string; ref: string; issuer: string }): boolean {
  if (j.issuer.replace(/\/$/, '') !== ISSUER) return false;
  if (p.repository.toLowerCase() !== j.repository.toLowerCase()) return false;
  if (p.environment !== undefined && p.environment !== j.environment) return false;
  const ran = `${j.workflowRepo ?? j.repository}/.github/workflows/${j.workflow}`;
  if (p.workflow !== undefined && ran.toLowerCase() !== `${p.repository}/.github/workflows/${p.workflow}`.toLowerCase()) return false;
  if (p.ref !== undefined && p.ref !== j.ref) return false;
  return true;
}

describe('the claim rules of trusted publishers', () => {
  it('match exactly when the model says so', () => {
    fc.assert(
      fc.property(publisher, job, (p, j) => {
        const rules: TrustedPublisher = {
          name: 'release',
          issuer: ISSUER,
          claims: { repository: p.repository, ...(p.environment !== undefined ? { environment: p.environment } : {}) },
          ...(p.workflow !== undefined ? { workflow: p.workflow } : {}),
          ...(p.ref !== undefined ? { ref: p.ref } : {}),
        };
        const claims: Claims = {
          iss: j.issuer,
          repository: j.repository,
          job_workflow_ref: `${j.workflowRepo ?? j.repository}/.github/workflows/${j.workflow}@${j.ref}`,
          ref: j.ref,
          ...(j.environment !== undefined ? { environment: j.environment } : {}),
        };
        expect(publisherMatches(rules, claims)).toBe(modelMatches(p, j));
      }),
      { numRuns: 2000 },
    );
  });

  it('never match a claim that is not a string, nor a token without the pinned claim', () => {
    const rules: TrustedPublisher = { name: 'gl', issuer: ISSUER, claims: { project_path: 'acme/w' }, ref: 'refs/heads/main' };
    fc.assert(
      fc.property(fc.oneof(fc.integer(), fc.boolean(), fc.constant(null), fc.array(fc.string()), fc.constant(undefined)), (value) => {
        expect(publisherMatches(rules, { iss: ISSUER, project_path: value, ref_path: 'refs/heads/main' })).toBe(false);
      }),
    );
    expect(publisherMatches(rules, { iss: ISSUER, project_path: 'ACME/w', ref_path: 'refs/heads/main', ref: 'main' })).toBe(true);
    // GitLab's short `ref` is not the full ref the rule names.
    expect(publisherMatches(rules, { iss: ISSUER, project_path: 'acme/w', ref: 'refs/heads/main', ref_path: 'refs/heads/dev' })).toBe(false);
  });
});
