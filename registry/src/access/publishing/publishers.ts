/**
 * Whether an identity token's claims (already verified) match a trusted publisher's rules
 * (config/publishers.ts): the issuer, every pinned claim, the workflow file (GitHub Actions) and
 * the git ref. Names on GitHub and GitLab are case-insensitive, so those claims are compared so.
 */
import type { TrustedPublisher } from '../../config/types.js';

export type Claims = Record<string, unknown>;

const CASE_INSENSITIVE = new Set(['repository', 'repository_owner', 'project_path', 'namespace_path']);

export function publisherMatches(publisher: TrustedPublisher, claims: Claims): boolean {
  if (typeof claims.iss !== 'string' || claims.iss.replace(/\/+$/, '') !== publisher.issuer) return false;
  for (const [name, want] of Object.entries(publisher.claims)) {
    const got = claims[name];
    if (typeof got !== 'string') return false;
    if (CASE_INSENSITIVE.has(name) ? got.toLowerCase() !== want.toLowerCase() : got !== want) return false;
  }
  if (publisher.workflow !== undefined && !workflowMatches(publisher, claims)) return false;
  if (publisher.ref !== undefined) {
    // GitLab's `ref` is the short name and `ref_path` the full one; GitHub's `ref` is the full one.
    const ref = typeof claims.ref_path === 'string' ? claims.ref_path : claims.ref;
    if (ref !== publisher.ref) return false;
  }
  return true;
}

/** GitHub's `job_workflow_ref` is `<owner>/<repo>/.github/workflows/<file>@<ref>`: the workflow that ran the job. */
function workflowMatches(publisher: TrustedPublisher, claims: Claims): boolean {
  const ref = claims.job_workflow_ref;
  if (typeof ref !== 'string') return false;
  const at = ref.lastIndexOf('@');
  const path = at === -1 ? ref : ref.slice(0, at);
  return path.toLowerCase() === `${publisher.claims.repository!.toLowerCase()}/.github/workflows/${publisher.workflow!.toLowerCase()}`;
}

/** The claims a refusal shows, so whoever set up the publisher sees what to change (none is a secret). */
export function shownClaims(claims: Claims): string {
  const keys = ['iss', 'sub', 'repository', 'job_workflow_ref', 'environment', 'ref', 'project_path', 'ref_path'];
  return keys.flatMap((k) => (typeof claims[k] === 'string' ? [`${k}=${claims[k]}`] : [])).join(', ');
}
