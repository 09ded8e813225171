/**
 * The short-lived upload tokens minted for trusted publishers (exchange.ts): JWTs signed with
 * HS256 under a key derived from the shared signing key (access/signing-key.ts), so every replica
 * verifies what any replica minted and no other token velodex signs (the OCI realm's) passes for
 * one. A token names the indexes and publishers it was minted for, never what they allow: that is
 * read from the config on every use (identities/grants.ts), so removing a publisher stops its
 * tokens at once. A token burnt by its holder (burnt-tokens.ts) is refused by every replica; a
 * verified token is remembered for `RECHECK_MS` at most, so a burn reaches every process within that.
 */
import { createHmac, createSecretKey, randomBytes, type KeyObject } from 'node:crypto';
import { errors, jwtVerify, SignJWT } from 'jose';
import { z } from 'zod';
import type { IdentityVerifier } from '../identities/resolver.js';
import type { IdentityRejection, PublishGrant, VerifiedIdentity } from '../identities/identity.js';
import type { BurntTokens } from './burnt-tokens.js';

/** The `iss` of minted tokens: the resolver hands a token to this verifier by it. */
export const PUBLISH_TOKEN_ISSUER = 'velodex:trusted-publishing';
const AUDIENCE = 'velodex:upload';
const ALGORITHM = 'HS256';
const CLOCK_TOLERANCE_SECS = 30;
/** How long a process trusts a verified token before it asks again whether it was burnt. */
export const RECHECK_MS = 30_000;

const grantsClaim = z.array(z.strictObject({ index: z.string(), publisher: z.string() })).min(1);

export class PublishTokens implements IdentityVerifier {
  readonly #key: KeyObject;
  readonly #burnt: BurntTokens;

  constructor(signingKey: Uint8Array, burnt: BurntTokens) {
    this.#key = publishTokenKey(signingKey);
    this.#burnt = burnt;
  }

  mint(grants: readonly PublishGrant[], lifetimeSecs: number): Promise<{ token: string; expiresAt: Date }> {
    return mintPublishToken(this.#key, grants, lifetimeSecs);
  }

  async verify(token: string, issuer: string): Promise<VerifiedIdentity | IdentityRejection | null> {
    if (issuer !== PUBLISH_TOKEN_ISSUER) return null;
    const checked = await this.#checked(token);
    if ('rejected' in checked) return checked;
    if (await this.#burnt.isBurnt(checked.jti)) return refuse('burnt', 'the minted upload token was burnt (revoked) by its holder: mint a new one (/_/oidc/mint-token)');
    return { kind: 'publish-token', grants: checked.grants, expiresAt: checked.expiresAt, recheckAt: Date.now() + RECHECK_MS };
  }

  /** Revokes `token` everywhere if it is one this registry minted; whether it was. */
  async burn(token: string): Promise<boolean> {
    const checked = await this.#checked(token);
    if ('rejected' in checked) return false;
    await this.#burnt.burn(checked.jti, checked.expiresAt);
    return true;
  }

  async #checked(token: string): Promise<{ jti: string; grants: PublishGrant[]; expiresAt: number } | IdentityRejection> {
    try {
      const { payload } = await jwtVerify(token, this.#key, { issuer: PUBLISH_TOKEN_ISSUER, audience: AUDIENCE, algorithms: [ALGORITHM], clockTolerance: CLOCK_TOLERANCE_SECS, requiredClaims: ['exp', 'jti'] });
      const grants = grantsClaim.safeParse(payload.grants);
      if (!grants.success) return refuse('wrong-claims', 'the minted token names no index');
      return { jti: payload.jti!, grants: grants.data, expiresAt: payload.exp! * 1000 };
    } catch (err) {
      if (err instanceof errors.JWTExpired) return refuse('expired', 'the minted upload token has expired: mint a new one (/_/oidc/mint-token)');
      return refuse('bad-signature', 'the token is not an upload token this registry minted');
    }
  }
}

function refuse(reason: string, message: string): IdentityRejection {
  return { rejected: true, by: 'trusted publishing', reason, message };
}

/** The key minted tokens are signed with: its own, derived, so a token signed for another purpose never verifies here. */
export function publishTokenKey(signingKey: Uint8Array): KeyObject {
  return createSecretKey(createHmac('sha256', signingKey).update('velodex trusted publishing tokens').digest());
}

/** A token for `grants`, living `lifetimeSecs` from `now`. */
export async function mintPublishToken(key: KeyObject, grants: readonly PublishGrant[], lifetimeSecs: number, now: number = Date.now()): Promise<{ token: string; expiresAt: Date }> {
  const iat = Math.floor(now / 1000);
  const token = await new SignJWT({ grants })
    .setProtectedHeader({ alg: ALGORITHM, typ: 'JWT' })
    .setIssuer(PUBLISH_TOKEN_ISSUER)
    .setAudience(AUDIENCE)
    .setSubject(grants.map((g) => `${g.index}/${g.publisher}`).join(' '))
    .setIssuedAt(iat)
    .setNotBefore(iat)
    .setExpirationTime(iat + lifetimeSecs)
    .setJti(randomBytes(16).toString('base64url'))
    .sign(key);
  return { token, expiresAt: new Date((iat + lifetimeSecs) * 1000) };
}
