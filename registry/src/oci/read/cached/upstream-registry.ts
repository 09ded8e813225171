/**
 * A cached OCI index's view of one of its upstream registries: `<url>/v2/<repository>/...`
 * requests with the authentication that upstream asks for, with that upstream's own credentials
 * (each upstream of an index has its own, its own token cache and its own egress rule).
 *
 * - Bearer (the docker token flow): `GET /v2/` is asked once, as docker clients do; its 401
 *   challenge names the realm and service. A token for `repository:<name>:pull` is fetched
 *   (anonymously, or with the index's upstream credentials), kept per realm/service/scope
 *   (`roles/bearer-tokens.ts`) and sent with every request of that repository. A 401 to a request that carried a token drops that token and retries once with a
 *   fresh one, for the scope the challenge names (`insufficient_scope` asks for a wider one).
 * - Basic: the index's upstream credentials, when the upstream's challenge asks for Basic.
 *
 * Credentials and tokens go to the origin first asked only (roles/upstream.ts), never to the CDN
 * a blob GET redirects to. A challenge counts only when the upstream registry itself answered it
 * (its own origin, not a response reached by a redirect): a realm a CDN or any other host names
 * is never asked, nor kept. A realm is never plain http when the registry is https, and a realm
 * on another host than the registry's is asked only when that host is public (roles/egress.ts),
 * so an upstream cannot aim the index's credentials at an internal service.
 */
import { Secret } from '../../../config/secret.js';
import type { IncomingHttpHeaders } from 'node:http';
import type { UpstreamConfig } from '../../../config/types.js';
import type { UpstreamSlots } from '../../../limits/upstream-slots.js';
import { BearerTokens, TokenError, type TokenRequest } from '../../../roles/bearer-tokens.js';
import { Egress } from '../../../roles/egress.js';
import { discard, UpstreamClient, type UpstreamResponse } from '../../../roles/upstream.js';
import { challengeOf, parseWwwAuthenticate } from '../../../roles/www-authenticate.js';

/** Everything a pull may meet, OCI and Docker, indexes and single-platform manifests. */
export const MANIFEST_ACCEPT = [
  'application/vnd.oci.image.index.v1+json',
  'application/vnd.oci.image.manifest.v1+json',
  'application/vnd.docker.distribution.manifest.list.v2+json',
  'application/vnd.docker.distribution.manifest.v2+json',
].join(', ');

/** Docker Hub's hosts: one-segment names there live under `library/`. */
const DOCKER_HUB_HOSTS = new Set(['docker.io', 'index.docker.io', 'registry-1.docker.io', 'registry.hub.docker.com']);

export interface RegistryRequest {
  method?: 'GET' | 'HEAD';
  /** The repository as the upstream names it (see `upstreamName`). */
  repository: string;
  /** After `/v2/<repository>/`: `manifests/<ref>`, `blobs/<digest>`, `tags/list?...`. */
  path: string;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

type Scheme = { kind: 'bearer'; realm: string; service?: string } | { kind: 'basic' } | { kind: 'none' };

export class UpstreamRegistry {
  readonly client: UpstreamClient;
  readonly tokens: BearerTokens;
  readonly #tokenClient: UpstreamClient;
  readonly #basic: string | undefined;
  readonly #dockerHub: boolean;
  #scheme: Scheme | undefined;
  #learning: Promise<void> | undefined;
  /** Repositories whose pulls need a wider scope than `repository:<name>:pull` (learned from `insufficient_scope`). */
  readonly #scopes = new Map<string, string>();

  /** `onAnswer`: told of each answer of the registry itself (its health reads its pressure). */
  constructor(upstream: UpstreamConfig, slots: UpstreamSlots, onAnswer?: (status: number, headers: IncomingHttpHeaders) => void) {
    // `<url>/v2/...`: a configured URL that already ends in `/v2` means the same registry.
    const given = new URL(upstream.url);
    given.pathname = given.pathname.replace(/\/v2\/?$/, '/');
    const base = given.pathname.endsWith('/') ? given.toString() : `${given.toString()}/`;
    // Blob redirects may lead to any public host (CDNs; the bytes are verified by digest), realms
    // to any public host the registry names; private addresses only on hosts the config names.
    const egress = new Egress({ upstream: base, trustedHosts: upstream.hosts, otherHosts: 'public' });
    // No credentials on the client itself: they go out only when a challenge asks for them.
    const timeout = upstream.timeoutSecs !== undefined ? { headersTimeoutMs: upstream.timeoutSecs * 1000 } : {};
    this.client = new UpstreamClient({ baseUrl: stripUserInfo(base), slots, egress, ...timeout, ...(onAnswer ? { onAnswer } : {}) });
    this.#tokenClient = new UpstreamClient({ baseUrl: stripUserInfo(base), egress, ...timeout });
    const url = new URL(base);
    const user = upstream.username ?? secretOf(decodeURIComponent(url.username));
    const pass = upstream.password ?? secretOf(decodeURIComponent(url.password));
    this.tokens = new BearerTokens({ client: this.#tokenClient, ...(user ? { username: user } : {}), ...(pass ? { password: pass } : {}) });
    this.#basic = user || pass ? `Basic ${Buffer.from(`${user?.reveal() ?? ''}:${pass?.reveal() ?? ''}`).toString('base64')}` : undefined;
    this.#dockerHub = DOCKER_HUB_HOSTS.has(url.hostname);
  }

  /** The base URL fit for logs and status documents. */
  get displayUrl(): string {
    return this.client.displayUrl;
  }

  /** The upstream's name for `repo`: Docker Hub's official images are `library/<name>`. */
  upstreamName(repo: readonly string[]): string {
    return this.#dockerHub && repo.length === 1 ? `library/${repo[0]}` : repo.join('/');
  }

  /** One request, authenticated as the upstream demands. Every status is returned (see UpstreamClient). */
  async fetch(req: RegistryRequest): Promise<UpstreamResponse> {
    const target = `v2/${req.repository}/${req.path}`;
    const wanted = this.#scopes.get(req.repository) ?? `repository:${req.repository}:pull`;
    if (!this.#scheme) await this.#learnScheme(req.signal);
    let sent = await this.#authorization(wanted, req.signal);
    const res = await this.client.get(target, this.#request(req, sent?.header));
    // A 401 from a host a redirect led to (a CDN) is that host's answer, never a challenge of ours.
    if (res.status !== 401 || !this.#fromRegistry(res)) return res;
    const challenges = parseWwwAuthenticate(res.headers['www-authenticate']);
    const bearer = challengeOf(challenges, 'bearer');
    if (bearer?.params.realm !== undefined) {
      discard(res);
      this.#scheme = this.#bearerScheme(bearer.params.realm, bearer.params.service);
      const scope = bearer.params.scope ?? wanted;
      // The token we sent was refused: drop it (unless a concurrent request already replaced it).
      if (sent?.token && sent.token.req.scope === scope) this.tokens.forget(sent.token.req, sent.token.value);
      // `insufficient_scope` names a wider scope: this repository asks for it from now on.
      if (scope !== wanted && bearer.params.error === 'insufficient_scope') this.#scopes.set(req.repository, scope);
      sent = await this.#authorization(scope, req.signal);
    } else if (challengeOf(challenges, 'basic') && this.#basic !== undefined && sent?.header !== this.#basic) {
      discard(res);
      this.#scheme = { kind: 'basic' };
      sent = { header: this.#basic };
    } else {
      // Nothing to answer the challenge with: the 401 is the answer.
      return res;
    }
    return this.client.get(target, this.#request(req, sent?.header));
  }

  /**
   * Asks `GET /v2/` once, as docker clients do, for the scheme the upstream wants: then the first
   * real request already carries a token instead of drawing a 401 first. A failure here is left to
   * the real request to meet.
   */
  async #learnScheme(signal?: AbortSignal): Promise<void> {
    this.#learning ??= (async () => {
      try {
        const res = await this.client.get('v2/', signal ? { signal } : {});
        discard(res);
        if (res.status !== 401 || !this.#fromRegistry(res)) {
          this.#scheme ??= { kind: 'none' };
          return;
        }
        const challenges = parseWwwAuthenticate(res.headers['www-authenticate']);
        const bearer = challengeOf(challenges, 'bearer');
        if (bearer?.params.realm !== undefined) this.#scheme ??= this.#bearerScheme(bearer.params.realm, bearer.params.service);
        else if (challengeOf(challenges, 'basic')) this.#scheme ??= { kind: 'basic' };
      } catch {
        // Unreachable now, or a realm refused: the request that follows meets it and reports it.
      } finally {
        this.#learning = undefined;
      }
    })();
    await this.#learning;
  }

  /** Whether `res` is the registry's own answer: its origin, not a host a redirect led to. */
  #fromRegistry(res: UpstreamResponse): boolean {
    return new URL(res.rawUrl).origin === this.client.baseUrl.origin;
  }

  /**
   * The scheme of a Bearer challenge of the registry's own. The realm must be an http(s) URL, and
   * https when the registry is: the index's credentials are never sent downgraded.
   */
  #bearerScheme(realm: string, service: string | undefined): Scheme {
    let url: URL;
    try {
      url = new URL(realm);
    } catch {
      throw new TokenError(realm, 'the realm is not a URL');
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TokenError(realm, 'the realm is not an http(s) URL');
    if (this.client.baseUrl.protocol === 'https:' && url.protocol !== 'https:') {
      throw new TokenError(realm, 'the realm is plain http while the registry is https; credentials are never sent downgraded, so it is not asked');
    }
    return { kind: 'bearer', realm, ...(service !== undefined ? { service } : {}) };
  }

  close(): void {
    this.client.close();
    this.#tokenClient.close();
  }

  #request(req: RegistryRequest, authorization: string | undefined) {
    const headers = { ...req.headers, ...(authorization !== undefined ? { authorization } : {}) };
    return { method: req.method ?? 'GET', headers, ...(req.signal ? { signal: req.signal } : {}) } as const;
  }

  #tokenRequest(scope: string): TokenRequest {
    const s = this.#scheme;
    if (s?.kind !== 'bearer') throw new Error('no bearer realm known');
    return { realm: s.realm, ...(s.service !== undefined ? { service: s.service } : {}), scope };
  }

  /** What to send for `scope`, by what the upstream asked for last. */
  async #authorization(scope: string, signal?: AbortSignal): Promise<{ header: string; token?: { req: TokenRequest; value: string } } | undefined> {
    const s = this.#scheme;
    if (s?.kind === 'basic') return this.#basic !== undefined ? { header: this.#basic } : undefined;
    if (s?.kind !== 'bearer') return undefined;
    const req = this.#tokenRequest(scope);
    const value = await this.tokens.get(req, signal);
    return { header: `Bearer ${value}`, token: { req, value } };
  }
}

function stripUserInfo(url: string): string {
  const u = new URL(url);
  u.username = '';
  u.password = '';
  return u.toString();
}

/** Credentials given as URL user info, wrapped like the config's own. */
function secretOf(value: string): Secret | undefined {
  return value === '' ? undefined : new Secret(value, 'url');
}
