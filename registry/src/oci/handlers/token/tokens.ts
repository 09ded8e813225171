/**
 * The bearer tokens of the token realm: JWTs signed with HS256 under the shared signing key, in
 * the claim set of the distribution registry's token spec (`iss`, `sub`, `aud`, `exp`, `nbf`,
 * `iat`, `jti`, and `access`: the granted `{type, name, actions}`). Only velodex reads them, so a
 * symmetric key is enough; every replica holds the same one. Verification checks the signature
 * first and the claims after it, so a forged token is never judged by what it claims.
 *
 * A client sends its token with every request of a pull, and a check costs a WebCrypto HMAC: a
 * token that verified is remembered, by its exact text, until its lifetime ends (`#verified`).
 * Only tokens this registry signed get there, so a client cannot fill that memory.
 */
import { createHmac, createSecretKey, randomBytes, type KeyObject } from 'node:crypto';
import { errors, jwtVerify, SignJWT } from 'jose';
import { z } from 'zod';
import { deepFreeze } from '../../../storage/freeze.js';
import type { Access } from './scope.js';

/** The `service` of the challenges and the tokens' audience and issuer: the design's wire name. */
export const SERVICE = 'velodex';
/** Five minutes, as the distribution registry's token servers; clients fetch a new one when it ends. */
export const TOKEN_LIFETIME_SECS = 300;
/** Clocks of replicas may disagree a little; a token is honoured this much past its `exp`. */
const CLOCK_TOLERANCE_SECS = 30;
/** Real tokens are well below 2 KiB; anything far larger is refused before it is parsed. */
const MAX_TOKEN_LENGTH = 8192;
const ALGORITHM = 'HS256';
/** Verified tokens remembered; the oldest is forgotten beyond this. */
const MAX_REMEMBERED = 4096;

export interface IssuedToken {
  token: string;
  expiresIn: number;
  issuedAt: Date;
}

export type TokenRejection = 'malformed' | 'bad-signature' | 'expired' | 'wrong-claims';
/**
 * What a token says beyond the spec's claims: for each index it was asked writes to by one of the
 * index's credentials (its upload token, a named token), a keyed fingerprint of that credential's
 * secret (`bindingOf`), so a token stops writing the moment the credential is rotated instead of
 * living out its five minutes, and a write it was not granted can say what the credential lacks.
 */
export type Bindings = Record<string, string>;
export type Verified = { ok: true; subject: string; access: Access[]; bindings: Bindings } | { ok: false; reason: TokenRejection };
type Passed = Extract<Verified, { ok: true }>;

/** A token that verified: what it grants, and from and until when that holds (ms since the epoch). */
interface Remembered {
  verified: Readonly<Passed>;
  fromMs: number;
  untilMs: number;
}

const accessClaim = z.array(z.strictObject({ type: z.string(), name: z.string(), actions: z.array(z.string()) }));
const bindingsClaim = z.record(z.string(), z.string());

export class TokenSigner {
  readonly #key: Uint8Array;
  /** The key as jose takes it without converting it on every call. */
  readonly #secret: KeyObject;
  readonly #now: () => number;
  readonly #verified = new Map<string, Remembered>();
  /** Secret -> its binding: a private index's reads compare a token's binding with its readers' on every request. */
  readonly #bindings = new Map<string, string>();

  /** `now`: milliseconds since the epoch (tests move it). */
  constructor(key: Uint8Array, now: () => number = Date.now) {
    this.#key = key;
    this.#secret = createSecretKey(key);
    this.#now = now;
  }

  async issue(subject: string, access: Access[], bindings: Bindings = {}): Promise<IssuedToken> {
    const issuedAt = new Date(Math.floor(this.#now() / 1000) * 1000);
    const iat = issuedAt.getTime() / 1000;
    const claims = Object.keys(bindings).length > 0 ? { access, bindings } : { access };
    const token = await new SignJWT(claims)
      .setProtectedHeader({ alg: ALGORITHM, typ: 'JWT' })
      .setIssuer(SERVICE)
      .setAudience(SERVICE)
      .setSubject(subject)
      .setIssuedAt(iat)
      .setNotBefore(iat)
      .setExpirationTime(iat + TOKEN_LIFETIME_SECS)
      .setJti(randomBytes(16).toString('base64url'))
      .sign(this.#secret);
    return { token, expiresIn: TOKEN_LIFETIME_SECS, issuedAt };
  }

  /** Never throws for any input: what is wrong with a token is the answer. */
  async verify(token: string): Promise<Verified> {
    if (token.length > MAX_TOKEN_LENGTH) return { ok: false, reason: 'malformed' };
    const now = this.#now();
    const remembered = this.#verified.get(token);
    if (remembered && now >= remembered.fromMs && now < remembered.untilMs) return remembered.verified;
    let payload;
    try {
      ({ payload } = await jwtVerify(token, this.#secret, {
        algorithms: [ALGORITHM],
        issuer: SERVICE,
        audience: SERVICE,
        requiredClaims: ['exp', 'iat', 'sub'],
        clockTolerance: CLOCK_TOLERANCE_SECS,
        currentDate: new Date(now),
      }));
    } catch (err) {
      return { ok: false, reason: rejectionOf(err) };
    }
    const access = accessClaim.safeParse(payload.access ?? []);
    const bindings = bindingsClaim.safeParse(payload.bindings ?? {});
    if (!access.success || !bindings.success || typeof payload.sub !== 'string') return { ok: false, reason: 'malformed' };
    // Handed to every request that presents the token: frozen, so none can change it for the next.
    const verified: Passed = deepFreeze({ ok: true, subject: payload.sub, access: access.data, bindings: bindings.data });
    // What jose allows: `nbf` up to the tolerance ahead, `exp` up to the tolerance behind.
    const fromMs = ((payload.nbf ?? payload.iat ?? 0) - CLOCK_TOLERANCE_SECS) * 1000;
    const untilMs = ((payload.exp ?? 0) + CLOCK_TOLERANCE_SECS) * 1000;
    this.#verified.delete(token);
    this.#verified.set(token, { verified, fromMs, untilMs });
    if (this.#verified.size > MAX_REMEMBERED) this.#verified.delete(this.#verified.keys().next().value as string);
    return verified;
  }

  /**
   * A fingerprint of a secret under the signing key: equal for equal secrets, and, unlike a
   * plain hash, no help to someone who reads it in a token and tries to guess the secret.
   */
  bindingOf(secret: string): string {
    const known = this.#bindings.get(secret);
    if (known !== undefined) return known;
    const binding = createHmac('sha256', this.#key).update('velodex upload token\0').update(secret).digest('base64url').slice(0, 22);
    // The secrets asked about are the config's (a private index's readers, checked per read): few.
    if (this.#bindings.size >= MAX_REMEMBERED) this.#bindings.delete(this.#bindings.keys().next().value as string);
    this.#bindings.set(secret, binding);
    return binding;
  }
}

function rejectionOf(err: unknown): TokenRejection {
  if (err instanceof errors.JWTExpired) return 'expired';
  if (err instanceof errors.JWSSignatureVerificationFailed) return 'bad-signature';
  if (err instanceof errors.JWTClaimValidationFailed) return 'wrong-claims';
  // JWSInvalid, JWTInvalid, JOSEAlgNotAllowed (`none`, RS256 ...), and anything jose met on the way.
  return 'malformed';
}

/** What a person reads when a token is refused. */
export const REJECTION_MESSAGES: Record<TokenRejection, string> = {
  malformed: 'the bearer token is not a token this registry issued',
  'bad-signature': 'the bearer token was not signed by this registry (or its signing key changed): fetch a new one from the token realm',
  expired: 'the bearer token has expired: fetch a new one from the token realm',
  'wrong-claims': 'the bearer token was issued for another service',
};
