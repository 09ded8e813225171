/**
 * Verifies the identity token a request brings as its Basic password, once, before any handler
 * looks at the credentials (an `onRequest` hook, app/app.ts): the verifiers are asynchronous (a
 * key set may need fetching), the credential checks are not. A token that verifies is remembered
 * (remembered.ts) and the checks find it there; one that does not is logged with the reason and
 * left to the checks, which refuse it as they refuse any wrong password.
 */
import { decodeJwt } from 'jose';
import { MAX_IDENTITY_TOKEN_LENGTH } from '../oidc/issuer-keys.js';
import { parseBasic } from '../secrets.js';
import type { IdentityRejection, VerifiedIdentity } from './identity.js';
import { recall, remember } from './remembered.js';

/** One kind of identity token: null when `token` is not of its kind (its unverified `iss` says whose it is). */
export interface IdentityVerifier {
  verify(token: string, issuer: string): Promise<VerifiedIdentity | IdentityRejection | null>;
}

/** Three base64url parts: the shape of a signed JWT. Checked before anything is decoded. */
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

export class IdentityResolver {
  readonly #verifiers: readonly IdentityVerifier[];

  constructor(verifiers: readonly IdentityVerifier[]) {
    this.#verifiers = verifiers;
  }

  get active(): boolean {
    return this.#verifiers.length > 0;
  }

  /** Verifies the password of `authorization` if it is an identity token not verified yet; the rejection, if any. */
  async resolve(authorization: string | undefined): Promise<IdentityRejection | null> {
    const password = parseBasic(authorization)?.password;
    if (password === undefined || password.length > MAX_IDENTITY_TOKEN_LENGTH || !JWT_SHAPE.test(password) || recall(password)) return null;
    let issuer: string;
    try {
      const iss = decodeJwt(password).iss;
      if (typeof iss !== 'string') return null;
      issuer = iss;
    } catch {
      return null;
    }
    for (const verifier of this.#verifiers) {
      const verdict = await verifier.verify(password, issuer);
      if (verdict === null) continue;
      if ('rejected' in verdict) return verdict;
      remember(password, verdict);
      return null;
    }
    return null;
  }
}
