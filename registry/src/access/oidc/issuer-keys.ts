/**
 * The signing keys of one OpenID Connect issuer, and the verification of the identity tokens it
 * signs: a CI provider's (GitHub Actions, GitLab) for trusted publishing, a cluster's for
 * ServiceAccount tokens. The discovery document names the issuer and its key set; both are
 * fetched through `UpstreamClient` (bounded bodies, timeouts, egress rules), once, and the key set
 * is kept by jose's remote set: refetched when it grows old or when a token names a key it does
 * not hold, at most once per cooldown, so a stream of tokens with made-up key ids costs no more
 * than one fetch a cooldown. Nothing here reaches the issuer per request.
 *
 * Only asymmetric algorithms verify: a key set is public, so a token "signed" with it as an HMAC
 * secret would be a forgery anyone could make.
 */
import { createRemoteJWKSet, customFetch, errors, jwtVerify, type JWTPayload } from 'jose';
import { z } from 'zod';
import { readBounded, type UpstreamClient } from '../../roles/upstream.js';

/** Discovery documents and key sets are a few KiB; anything far larger is refused unread. */
const MAX_DOC_BYTES = 256 * 1024;
/** Identity tokens are a few KiB; a larger "token" is refused before it is parsed. */
export const MAX_IDENTITY_TOKEN_LENGTH = 16 * 1024;
const ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];
/** Clocks disagree a little: a token is honoured this much around its `nbf` and `exp`. */
const CLOCK_TOLERANCE_SECS = 30;
/** After a failed discovery, the next request tries again only after this. */
const RETRY_AFTER_MS = 30_000;
/** How long a key set is used before it is fetched again, and the least time between two fetches. */
const KEYS_MAX_AGE_MS = 60 * 60_000;
const KEYS_COOLDOWN_MS = 30_000;

export interface IssuerKeysOptions {
  /** Where the discovery document is: `<issuer>/.well-known/openid-configuration`, or the cluster API server's. */
  discoveryUrl: string;
  /** The `iss` tokens must carry; absent: whatever the discovery document says (a cluster names its own). */
  issuer?: string;
  /** The key set's URL when it is not the document's `jwks_uri` (a cluster API server's own `/openid/v1/jwks`). */
  jwksUrl?: string;
  client: UpstreamClient;
  /** Headers for every fetch from the discovery document's origin (a bearer read fresh from a rotated file); never sent elsewhere. */
  headers?: () => Record<string, string>;
}

export type OidcRejection = 'malformed' | 'wrong-issuer' | 'wrong-audience' | 'expired' | 'bad-signature' | 'unavailable';
export type OidcVerdict = { ok: true; claims: JWTPayload & { exp: number } } | { ok: false; reason: OidcRejection; message: string };

const discoverySchema = z.object({ issuer: z.string().url(), jwks_uri: z.string().url() });

interface Keys {
  issuer: string;
  jwks: ReturnType<typeof createRemoteJWKSet>;
}

export class IssuerKeys {
  readonly #opts: IssuerKeysOptions;
  readonly #origin: string;
  #keys: Promise<Keys> | undefined;
  #failedAt = 0;

  constructor(opts: IssuerKeysOptions) {
    this.#opts = opts;
    this.#origin = new URL(opts.discoveryUrl).origin;
  }

  /** What the issuer's keys make of `token` for `audience`. */
  async verify(token: string, audience: string): Promise<OidcVerdict> {
    if (token.length > MAX_IDENTITY_TOKEN_LENGTH) return { ok: false, reason: 'malformed', message: `the token is longer than ${MAX_IDENTITY_TOKEN_LENGTH} characters` };
    let keys: Keys;
    try {
      keys = await this.#loaded();
    } catch (err) {
      return { ok: false, reason: 'unavailable', message: `the keys of ${this.#opts.issuer ?? this.#origin} could not be fetched: ${(err as Error).message}` };
    }
    try {
      const { payload } = await jwtVerify(token, keys.jwks, { issuer: keys.issuer, audience, algorithms: ALGORITHMS, clockTolerance: CLOCK_TOLERANCE_SECS, requiredClaims: ['exp'] });
      return { ok: true, claims: payload as JWTPayload & { exp: number } };
    } catch (err) {
      return rejection(err);
    }
  }

  /**
   * The issuer tokens must name, once known: configured, or named by the discovery document read
   * already (undefined before that, or after a failed read). Lets a caller pass over another
   * issuer's token without a signature check.
   */
  async knownIssuer(): Promise<string | undefined> {
    if (this.#opts.issuer !== undefined) return this.#opts.issuer;
    return this.#keys?.then(
      (keys) => keys.issuer,
      () => undefined,
    );
  }

  #loaded(): Promise<Keys> {
    if (!this.#keys && Date.now() - this.#failedAt >= RETRY_AFTER_MS) {
      this.#keys = this.#discover().catch((err: unknown) => {
        this.#keys = undefined;
        this.#failedAt = Date.now();
        throw err;
      });
    }
    return this.#keys ?? Promise.reject(new Error(`the last attempt failed less than ${RETRY_AFTER_MS / 1000} s ago`));
  }

  async #discover(): Promise<Keys> {
    const doc = discoverySchema.safeParse(JSON.parse((await this.#fetch(this.#opts.discoveryUrl)).toString('utf8')));
    if (!doc.success) throw new Error('the discovery document has no valid "issuer" and "jwks_uri"');
    const issuer = this.#opts.issuer ?? doc.data.issuer;
    const jwks = createRemoteJWKSet(new URL(this.#opts.jwksUrl ?? doc.data.jwks_uri), {
      cacheMaxAge: KEYS_MAX_AGE_MS,
      cooldownDuration: KEYS_COOLDOWN_MS,
      [customFetch]: async (url: string) => new Response(new Uint8Array(await this.#fetch(url)), { status: 200, headers: { 'content-type': 'application/json' } }),
    });
    return { issuer, jwks };
  }

  /** One bounded GET; anything but a 200 is an error naming the status. */
  async #fetch(url: string): Promise<Buffer> {
    const target = new URL(url);
    const headers = target.origin === this.#origin ? (this.#opts.headers?.() ?? {}) : {};
    // A cluster API server answers its key set only to a client that accepts its own type (406 otherwise).
    const res = await this.#opts.client.get(target, { headers: { accept: 'application/json, application/jwk-set+json', ...headers } });
    const body = await readBounded(res, MAX_DOC_BYTES);
    if (res.status !== 200) throw new Error(`${res.url} answered ${res.status}`);
    return body;
  }
}

function rejection(err: unknown): OidcVerdict {
  const no = (reason: OidcRejection, message: string): OidcVerdict => ({ ok: false, reason, message });
  if (err instanceof errors.JWTExpired) return no('expired', 'the token has expired');
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === 'iss') return no('wrong-issuer', 'the token names another issuer');
    if (err.claim === 'aud') return no('wrong-audience', 'the token is for another audience');
    return no('malformed', `the token's "${err.claim}" claim is not valid (${err.reason})`);
  }
  if (err instanceof errors.JWKSNoMatchingKey || err instanceof errors.JWSSignatureVerificationFailed || err instanceof errors.JOSEAlgNotAllowed) {
    return no('bad-signature', 'the token is not signed by a key of the issuer');
  }
  if (err instanceof errors.JWKSTimeout || err instanceof errors.JWKSInvalid) return no('unavailable', `the issuer's key set could not be read (${err.code})`);
  if (err instanceof errors.JOSEError) return no('malformed', `the token is not a valid signed JWT (${err.code})`);
  return no('unavailable', `the issuer's key set could not be fetched: ${(err as Error).message}`);
}
