/**
 * Bearer tokens an upstream's token realm issues (the docker registry token flow): `GET
 * <realm>?service=<service>&scope=<scope>`, anonymous or with the index's upstream credentials as
 * Basic, answered with JSON carrying `token` (or `access_token`, the OAuth2 spelling) and
 * optionally `expires_in` seconds (60 when absent, as the token spec says).
 *
 * Tokens are kept per realm, service and scope until shortly before they expire; concurrent
 * requests for one key share one fetch. A token the upstream refused is dropped with `forget`,
 * and the next `get` fetches a fresh one. Tokens live in process memory only and never appear in
 * an error message or a log line.
 */
import type { Secret } from '../config/secret.js';
import { displayUrl } from '../config/sanitize.js';
import { PromiseFlights } from './promise-flights.js';
import { discard, readBounded, type UpstreamClient } from './upstream.js';
import { UpstreamError } from './upstream-error.js';

/** The token spec's default lifetime when the realm names none. */
export const DEFAULT_TOKEN_SECS = 60;
/** Refreshed this long before the realm's expiry, so no request goes out with a dying token. */
const EARLY_SECS = 5;
/** Past this many held tokens, expired ones are dropped (one per repository scope otherwise adds up). */
const PRUNE_ABOVE = 1000;
/** A token response is a small JSON document. */
const MAX_TOKEN_RESPONSE = 64 * 1024;

export interface TokenRequest {
  realm: string;
  service?: string;
  scope?: string;
}

export interface BearerTokensOptions {
  /** The client that reaches the realm (no slot cap: a token fetch must not wait behind the fetch it serves). */
  client: UpstreamClient;
  username?: Secret;
  password?: Secret;
  now?: () => number;
}

interface Held {
  token: string;
  expiresAt: number;
}

/**
 * The realm refused or answered something that is not a token: an `UpstreamError` of kind
 * `token` that names the realm.
 */
export class TokenError extends UpstreamError {
  /** The realm as `displayUrl` shows it (a logged error carries its fields). */
  readonly realm: string;

  /** `status`: the realm's own answer, when it gave one (a 429 or 5xx of the realm is the upstream's failure to answer now). */
  constructor(realm: string, detail: string, status?: number) {
    const shown = displayUrl(realm);
    super('token', null, `token realm ${shown}: ${detail}`, { shownUrl: shown, ...(status !== undefined ? { status } : {}) });
    this.name = 'TokenError';
    this.realm = shown;
  }
}

export class BearerTokens {
  readonly #o: BearerTokensOptions;
  readonly #held = new Map<string, Held>();
  readonly #flights = new PromiseFlights<Held>();
  #fetches = 0;

  constructor(opts: BearerTokensOptions) {
    this.#o = opts;
  }

  /** Tokens fetched from realms so far (for tests and status). */
  get fetches(): number {
    return this.#fetches;
  }

  async get(req: TokenRequest, signal?: AbortSignal): Promise<string> {
    const key = keyOf(req);
    const now = (this.#o.now ?? Date.now)();
    const held = this.#held.get(key);
    if (held && now < held.expiresAt) return held.token;
    const fresh = await this.#flights.run(key, () => this.#fetch(req, signal));
    this.#held.set(key, fresh);
    if (this.#held.size > PRUNE_ABOVE) this.#prune(now);
    return fresh.token;
  }

  /** Drops the token for `req` (the upstream refused it); `token`, when given, must be the one held. */
  forget(req: TokenRequest, token?: string): void {
    const key = keyOf(req);
    if (token === undefined || this.#held.get(key)?.token === token) this.#held.delete(key);
  }

  #prune(now: number): void {
    for (const [key, held] of this.#held) if (now >= held.expiresAt) this.#held.delete(key);
  }

  async #fetch(req: TokenRequest, signal?: AbortSignal): Promise<Held> {
    let url: URL;
    try {
      url = new URL(req.realm);
    } catch {
      throw new TokenError(req.realm, 'the realm is not a URL');
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TokenError(req.realm, 'the realm is not an http(s) URL');
    if (req.service !== undefined) url.searchParams.set('service', req.service);
    if (req.scope !== undefined) url.searchParams.set('scope', req.scope);
    const headers: Record<string, string> = { accept: 'application/json' };
    const user = this.#o.username?.reveal();
    const pass = this.#o.password?.reveal();
    if (user !== undefined || pass !== undefined) {
      headers.authorization = `Basic ${Buffer.from(`${user ?? ''}:${pass ?? ''}`).toString('base64')}`;
    }
    this.#fetches++;
    const res = await this.#o.client.get(url, { headers, ...(signal ? { signal } : {}) });
    if (res.status !== 200) {
      discard(res);
      throw new TokenError(req.realm, `answered ${res.status}${res.status === 401 ? ' (the upstream credentials were refused)' : ''}`, res.status);
    }
    let body: Buffer;
    try {
      body = await readBounded(res, MAX_TOKEN_RESPONSE);
    } catch (err) {
      if (err instanceof UpstreamError && err.kind === 'too_large') throw new TokenError(req.realm, `the token response is larger than ${MAX_TOKEN_RESPONSE} bytes`);
      throw err instanceof UpstreamError ? err : new TokenError(req.realm, 'the token response broke off');
    }
    const parsed = parseTokenResponse(body);
    if (!parsed) throw new TokenError(req.realm, 'the response carries no token');
    const now = (this.#o.now ?? Date.now)();
    const lifetime = Math.max(0, parsed.expiresInSecs - EARLY_SECS);
    return { token: parsed.token, expiresAt: now + lifetime * 1000 };
  }
}

/** `token` or `access_token`, and `expires_in` (seconds; the default when absent or nonsense). */
export function parseTokenResponse(body: Buffer | string): { token: string; expiresInSecs: number } | null {
  let doc: unknown;
  try {
    doc = JSON.parse(typeof body === 'string' ? body : body.toString('utf8'));
  } catch {
    return null;
  }
  if (typeof doc !== 'object' || doc === null) return null;
  const d = doc as Record<string, unknown>;
  const token = typeof d.token === 'string' && d.token !== '' ? d.token : typeof d.access_token === 'string' && d.access_token !== '' ? d.access_token : undefined;
  if (token === undefined) return null;
  const e = d.expires_in;
  const expiresInSecs = typeof e === 'number' && Number.isFinite(e) && e > 0 ? e : DEFAULT_TOKEN_SECS;
  return { token, expiresInSecs };
}

function keyOf(req: TokenRequest): string {
  return JSON.stringify([req.realm, req.service ?? null, req.scope ?? null]);
}
