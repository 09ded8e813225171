/**
 * The token exchange of trusted publishing, as PyPI runs it (`/_/oidc/mint-token`, which uv and
 * `pypa/gh-action-pypi-publish` call): a CI job sends the identity token its provider signed for
 * our audience; if the issuer's keys verify it and its claims match a trusted publisher of some
 * hosted index, it gets a short-lived upload token for every index whose publisher matched.
 *
 * The issuer's keys are fetched from the issuer the publisher names, through the upstream client
 * (bounded, timed out, public addresses only for hosts the issuer's documents point at); which
 * issuers are asked is decided by the config, never by the token: a token from an issuer no
 * publisher names is refused before anything is fetched.
 */
import { decodeJwt } from 'jose';
import type { HostedIndex, IndexConfig, TrustedPublisher, TrustedPublishingConfig } from '../../config/types.js';
import { Egress } from '../../roles/egress.js';
import { UpstreamClient } from '../../roles/upstream.js';
import type { PublishGrant } from '../identities/identity.js';
import { IssuerKeys } from '../oidc/issuer-keys.js';
import type { PublishTokens } from './publish-tokens.js';
import { publisherMatches, shownClaims } from './publishers.js';

/** PyPI's error codes, which the clients print. */
export type MintFailureCode = 'invalid-payload' | 'invalid-token' | 'invalid-publisher' | 'unavailable';
export type MintResult = { ok: true; token: string; expiresAt: Date; grants: PublishGrant[] } | { ok: false; code: MintFailureCode; description: string };

const KEYS_TIMEOUT_MS = 10_000;

export class TokenExchange {
  /** Every index's trusted publishers: the config's, fixed for the process's life. */
  readonly #publishers: readonly { index: HostedIndex; publisher: TrustedPublisher }[];
  readonly #settings: TrustedPublishingConfig;
  readonly #tokens: PublishTokens;
  readonly #keys = new Map<string, IssuerKeys>();

  constructor(indexes: readonly IndexConfig[], settings: TrustedPublishingConfig, tokens: PublishTokens) {
    this.#publishers = indexes.flatMap((index) => (index.role === 'hosted' ? index.trustedPublishers.map((publisher) => ({ index, publisher })) : []));
    this.#settings = settings;
    this.#tokens = tokens;
  }

  get audience(): string {
    return this.#settings.audience;
  }

  /** Whether any index has a trusted publisher (the exchange answers 404 otherwise). */
  get configured(): boolean {
    return this.#publishers.length > 0;
  }

  async mint(identityToken: string): Promise<MintResult> {
    const fail = (code: MintFailureCode, description: string): MintResult => ({ ok: false, code, description });
    let issuer: unknown;
    try {
      issuer = decodeJwt(identityToken).iss;
    } catch {
      return fail('invalid-token', 'the token is not a JWT');
    }
    if (typeof issuer !== 'string') return fail('invalid-token', 'the token names no issuer ("iss")');
    const candidates = this.#publishers.filter(({ publisher }) => publisher.issuer === issuer.replace(/\/+$/, ''));
    if (candidates.length === 0) return fail('invalid-publisher', `no trusted publisher on this registry trusts the issuer ${issuer}`);
    const verdict = await this.#keysOf(candidates[0]!.publisher.issuer).verify(identityToken, this.#settings.audience);
    if (!verdict.ok) return fail(verdict.reason === 'unavailable' ? 'unavailable' : 'invalid-token', verdict.message);
    const grants: PublishGrant[] = [];
    for (const { index, publisher } of candidates) {
      if (publisherMatches(publisher, verdict.claims) && !grants.some((g) => g.index === index.name)) grants.push({ index: index.name, publisher: publisher.name });
    }
    if (grants.length === 0) return fail('invalid-publisher', `valid token, but no trusted publisher matches its claims (${shownClaims(verdict.claims)})`);
    const { token, expiresAt } = await this.#tokens.mint(grants, this.#settings.tokenLifetimeSecs);
    return { ok: true, token, expiresAt, grants };
  }

  #keysOf(issuer: string): IssuerKeys {
    let keys = this.#keys.get(issuer);
    if (!keys) {
      const client = new UpstreamClient({
        baseUrl: issuer,
        headersTimeoutMs: KEYS_TIMEOUT_MS,
        idleTimeoutMs: KEYS_TIMEOUT_MS,
        userAgent: 'velodex trusted publishing',
        // The issuer's own host is the configured one; a key set elsewhere must be on a public address.
        egress: new Egress({ upstream: issuer, otherHosts: 'public' }),
      });
      this.#keys.set(issuer, (keys = new IssuerKeys({ discoveryUrl: `${issuer}/.well-known/openid-configuration`, issuer, client })));
    }
    return keys;
  }
}
