/**
 * Which `[[index.service_account]]` rule of an index applies to a ServiceAccount: the rule naming
 * it, else its namespace's `*` rule, else none. One rule applies, never a union of two: a union
 * of `*` reading everything and `builder` uploading to `app-*` would let `builder` upload
 * everywhere. The config allows one rule per ServiceAccount (or `*`) and namespace
 * (config/kubernetes.ts), so the rule found is the only candidate of its kind.
 */
import type { ServiceAccountRule } from '../../config/types.js';

export interface ServiceAccountName {
  namespace: string;
  name: string;
}

const SUBJECT = /^system:serviceaccount:([a-z0-9]([-a-z0-9]*[a-z0-9])?):([a-z0-9]([-a-z0-9.]*[a-z0-9])?)$/;

/** The ServiceAccount a token's `sub` names (`system:serviceaccount:<ns>:<name>`), or null for any other subject. */
export function serviceAccountOf(subject: unknown): ServiceAccountName | null {
  if (typeof subject !== 'string' || subject.length > 330) return null;
  const m = SUBJECT.exec(subject);
  return m ? { namespace: m[1]!, name: m[3]! } : null;
}

/** How logs, webhooks and status name a ServiceAccount: `serviceaccount:<ns>/<name>`. */
export function serviceAccountActor(sa: ServiceAccountName): string {
  return `serviceaccount:${sa.namespace}/${sa.name}`;
}

/** The ServiceAccount an actor label names, or null when it names none. */
export function serviceAccountOfActor(actor: string): ServiceAccountName | null {
  const m = /^serviceaccount:([^/]+)\/(.+)$/.exec(actor);
  return m ? { namespace: m[1]!, name: m[2]! } : null;
}

export function ruleFor(rules: readonly ServiceAccountRule[], sa: ServiceAccountName): ServiceAccountRule | undefined {
  let wildcard: ServiceAccountRule | undefined;
  for (const rule of rules) {
    if (rule.namespace !== sa.namespace) continue;
    if (rule.name === sa.name) return rule;
    if (rule.name === '*') wildcard = rule;
  }
  return wildcard;
}
