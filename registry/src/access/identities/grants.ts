/**
 * What a verified identity may do on an index, read from the index's rules each time (so a rule
 * removed from the config stops a token at once, however long the token would live):
 *
 * - an upload token minted for a trusted publisher uploads to the indexes it was minted for,
 *   while the publisher is still declared there, to the names the publisher's `projects` reach;
 * - a Kubernetes ServiceAccount may do what the index's rule for it says (its own rule, else its
 *   namespace's `*` rule: service-account-rules.ts), to the names the rule's `projects` reach;
 * - anything else is known but may do nothing here: a refusal names it and says so (403).
 */
import type { IndexConfig } from '../../config/types.js';
import { ruleFor, serviceAccountActor, serviceAccountOfActor, type ServiceAccountName } from './service-account-rules.js';
import type { IdentityGrant, VerifiedIdentity } from './identity.js';

export function grantOn(index: IndexConfig, identity: Readonly<VerifiedIdentity>): IdentityGrant {
  const expiresAt = new Date(identity.expiresAt);
  switch (identity.kind) {
    case 'publish-token': {
      const minted = identity.grants.find((g) => g.index === index.name);
      return minted ? publisherGrant(index, minted.publisher, expiresAt) : { actor: 'publisher', described: 'the trusted publishing token', scopes: [], expiresAt };
    }
    case 'service-account':
      return serviceAccountGrant(index, identity, expiresAt);
  }
}

/**
 * The grant an `actor` (`IdentityGrant.actor`) has on `index` now: what a bearer token the OCI
 * realm issued for an identity is checked against on every write. Undefined for an actor this
 * module does not name.
 */
export function grantOfActor(index: IndexConfig, actor: string, expiresAt: Date): IdentityGrant | undefined {
  if (actor.startsWith('publisher:')) return publisherGrant(index, actor.slice('publisher:'.length), expiresAt);
  const sa = serviceAccountOfActor(actor);
  return sa ? serviceAccountGrant(index, sa, expiresAt) : undefined;
}

function serviceAccountGrant(index: IndexConfig, sa: ServiceAccountName, expiresAt: Date): IdentityGrant {
  const rule = ruleFor(index.serviceAccounts, sa);
  const grant: IdentityGrant = { actor: serviceAccountActor(sa), described: `the service account "${sa.namespace}/${sa.name}"`, scopes: rule?.scopes ?? [], expiresAt };
  if (rule?.projects) grant.projects = rule.projects;
  return grant;
}

function publisherGrant(index: IndexConfig, name: string, expiresAt: Date): IdentityGrant {
  const publisher = index.role === 'hosted' ? index.trustedPublishers.find((p) => p.name === name) : undefined;
  const grant: IdentityGrant = { actor: `publisher:${name}`, described: `the trusted publisher "${name}"`, scopes: publisher ? ['upload'] : [], expiresAt };
  if (publisher?.projects) grant.projects = publisher.projects;
  return grant;
}
