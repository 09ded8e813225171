/**
 * Identities: credentials that are not a configured secret but a signed token velodex verifies
 * (a Kubernetes ServiceAccount token, an upload token minted for a trusted publisher). A token is
 * verified once, asynchronously, when a request brings it (resolver.ts); what it proved is
 * remembered by its exact text until it expires (remembered.ts), and the index's rules say what
 * it may do there (grants.ts), so the synchronous checks of access/tokens.ts treat it as one more
 * credential kind.
 */
import type { TokenScope } from '../../config/types.js';

/** What a verified token proved: who it stands for, until when (ms since the epoch). */
export type VerifiedIdentity = (
  | { kind: 'service-account'; namespace: string; name: string }
  | { kind: 'publish-token'; grants: readonly PublishGrant[] }
) & {
  expiresAt: number;
  /** When a process should verify it again (a revocation may have come since); absent: not before it expires. */
  recheckAt?: number;
};

/** One index a minted upload token was minted for, and the publisher whose rules matched there. */
export interface PublishGrant {
  index: string;
  publisher: string;
}

/** What an identity may do on one index, by the index's rules as they are now. */
export interface IdentityGrant {
  /** How logs, webhooks and status name it: `serviceaccount:<ns>/<name>`, `publisher:<name>`. */
  actor: string;
  /** How a message names it: `the service account "ci/builder"`. */
  described: string;
  /** Empty: the identity is known but may do nothing here (a 403 that says so, not a 401). */
  scopes: readonly TokenScope[];
  /** Globs over names inside the index; absent: every name. */
  projects?: readonly string[];
  expiresAt: Date;
}

/** A token that failed verification: why, for the security log and the refusal. */
export interface IdentityRejection {
  rejected: true;
  /** Which verifier looked at it (`trusted publishing`, `service accounts`). */
  by: string;
  reason: string;
  message: string;
}
