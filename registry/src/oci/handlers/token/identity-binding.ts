/**
 * What a realm token is bound to when an identity (access/identities/: a minted upload token, a
 * ServiceAccount token) asked for it. A credential secret is bound by its keyed fingerprint
 * (`TokenSigner.bindingOf`), and a later request finds which secret it was by comparing
 * fingerprints; an identity has no configured secret to compare with, so the binding names the
 * identity itself and when it expires (the realm token is signed, so nobody can write one).
 * Every write and read of a private index re-reads the index's rules for that identity, as it
 * re-checks a named token, so a rule removed from the config stops the token at once.
 */
import type { IdentityGrant } from '../../../access/identities/identity.js';
import { grantOfActor } from '../../../access/identities/grants.js';
import type { Credential } from '../../../access/tokens.js';
import type { IndexConfig } from '../../../config/types.js';

const PREFIX = 'identity:';

export function identityBinding(grant: IdentityGrant): string {
  return `${PREFIX}${Math.floor(grant.expiresAt.getTime() / 1000)}:${grant.actor}`;
}

export function isIdentityBinding(binding: string): boolean {
  return binding.startsWith(PREFIX);
}

/** The identity credential `binding` stands for on `index` now; undefined once it expired, or for an identity the index no longer names. */
export function boundIdentity(index: IndexConfig, binding: string, now: number = Date.now()): Credential | undefined {
  const m = /^identity:(\d+):(.+)$/.exec(binding);
  if (!m) return undefined;
  const expiresAt = new Date(Number(m[1]) * 1000);
  if (expiresAt.getTime() <= now) return undefined;
  const grant = grantOfActor(index, m[2]!, expiresAt);
  return grant && { kind: 'identity', grant };
}
