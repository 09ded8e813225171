/**
 * Kubernetes ServiceAccount tokens as identity tokens (identities/resolver.ts): a pod sends its
 * projected token (audience `[kubernetes] audience`) as the Basic password, and it verifies
 * against the cluster's own issuer, read from the API server: its discovery document
 * (`/.well-known/openid-configuration`, which names the issuer) and its keys (`/openid/v1/jwks`,
 * fetched from the API server too, whatever `jwks_uri` says: that may be an address only the
 * cluster's outside reaches). Both are fetched with the configured CA and the pod's own token as
 * the bearer, to the API server's origin only, and kept (oidc/issuer-keys.ts): no request asks
 * the API server anything.
 *
 * A token verifies when its signature, `iss`, `aud` (contains the audience), `exp` and `nbf`
 * hold, and its `sub` (`system:serviceaccount:<ns>:<name>`) agrees with its `kubernetes.io`
 * claim. What it may do on an index is the index's rules' (identities/grants.ts); it expires
 * with the token. A token the API server has since revoked (its pod or ServiceAccount deleted)
 * still verifies until its `exp`: keep projected tokens short-lived (`expirationSeconds`).
 *
 * A JWT of another issuer is not for this verifier (null), unless it claims to be a
 * ServiceAccount's: then it is refused by name (another cluster's token, a wrong issuer).
 * Refusals name the ServiceAccount the token claims to be, never anything of the token itself.
 */
import { readFileSync } from 'node:fs';
import { decodeJwt, type JWTPayload } from 'jose';
import { ConfigError } from '../../config/errors.js';
import type { KubernetesConfig } from '../../config/types.js';
import { Egress } from '../../roles/egress.js';
import { UpstreamClient } from '../../roles/upstream.js';
import type { IdentityRejection, VerifiedIdentity } from '../identities/identity.js';
import type { IdentityVerifier } from '../identities/resolver.js';
import { IssuerKeys, type OidcVerdict } from '../oidc/issuer-keys.js';
import { serviceAccountActor, serviceAccountOf, type ServiceAccountName } from '../identities/service-account-rules.js';

const DISCOVERY_PATH = '/.well-known/openid-configuration';
const JWKS_PATH = '/openid/v1/jwks';
/** The API server answers these from memory; a slow answer is a sick connection. */
const FETCH_TIMEOUT_MS = 10_000;
const BY = 'service accounts';

export class ServiceAccountTokens implements IdentityVerifier {
  readonly #audience: string;
  readonly #keys: IssuerKeys;

  /** Reads the CA and checks the token file now, so a pod without them does not start (ConfigError). */
  constructor(config: KubernetesConfig) {
    this.#audience = config.audience;
    const ca = readConfigFile(config.caFile, 'kubernetes.ca_file', 'the CA bundle of the API server');
    readConfigFile(config.tokenFile, 'kubernetes.token_file', "the pod's ServiceAccount token");
    const client = new UpstreamClient({
      baseUrl: config.apiServer,
      ca,
      headersTimeoutMs: FETCH_TIMEOUT_MS,
      idleTimeoutMs: FETCH_TIMEOUT_MS,
      userAgent: 'velodex service accounts',
      // The API server and nothing else: the bearer is the pod's own token.
      egress: new Egress({ upstream: config.apiServer, otherHosts: 'refuse' }),
    });
    this.#keys = new IssuerKeys({
      discoveryUrl: `${config.apiServer}${DISCOVERY_PATH}`,
      jwksUrl: `${config.apiServer}${JWKS_PATH}`,
      client,
      // Read at each fetch: the kubelet renews a projected token well before it expires.
      headers: () => ({ authorization: `Bearer ${readFileSync(config.tokenFile, 'utf8').trim()}` }),
    });
  }

  async verify(token: string, issuer: string): Promise<VerifiedIdentity | IdentityRejection | null> {
    let claimed: JWTPayload;
    try {
      claimed = decodeJwt(token);
    } catch {
      return null;
    }
    const sa = serviceAccountOf(claimed.sub);
    // Another issuer's token that is no ServiceAccount's, told apart without a signature check
    // once the cluster's issuer is known.
    const clusterIssuer = await this.#keys.knownIssuer();
    if (!sa && clusterIssuer !== undefined && claimed.iss !== clusterIssuer) return null;
    const verdict = await this.#keys.verify(token, this.#audience);
    if (!verdict.ok) {
      // Another issuer's token that is no ServiceAccount's: some other verifier's, or nobody's.
      if (verdict.reason === 'wrong-issuer' && !sa) return null;
      return refusal(verdict, sa, issuer, this.#audience);
    }
    const { claims } = verdict;
    const proven = serviceAccountOf(claims.sub);
    if (!proven || !agrees(claims, proven)) {
      return { rejected: true, by: BY, reason: 'malformed', message: `${who(sa)}: the token's "sub" and "kubernetes.io" claims do not name one ServiceAccount` };
    }
    return { kind: 'service-account', namespace: proven.namespace, name: proven.name, expiresAt: claims.exp * 1000 };
  }
}

/** The `kubernetes.io` claim names the ServiceAccount `sub` names (a token the API server issued always does). */
function agrees(claims: JWTPayload, sa: ServiceAccountName): boolean {
  const k = claims['kubernetes.io'] as { namespace?: unknown; serviceaccount?: { name?: unknown } } | undefined;
  return typeof k === 'object' && k !== null && k.namespace === sa.namespace && k.serviceaccount?.name === sa.name;
}

function who(sa: ServiceAccountName | null): string {
  return sa ? `${serviceAccountActor(sa)} (as the token claims)` : 'a token that names no ServiceAccount';
}

function refusal(verdict: Extract<OidcVerdict, { ok: false }>, sa: ServiceAccountName | null, issuer: string, audience: string): IdentityRejection {
  const hints: Partial<Record<typeof verdict.reason, string>> = {
    'wrong-audience': `project the token with audience "${audience}" (serviceAccountToken.audience)`,
    'wrong-issuer': `it was issued by ${JSON.stringify(issuer.slice(0, 200))}, not by this cluster`,
    expired: 'the kubelet renews a projected token: read the file again for each command',
  };
  const hint = hints[verdict.reason];
  return { rejected: true, by: BY, reason: verdict.reason, message: `${who(sa)}: ${verdict.message}${hint ? `; ${hint}` : ''}` };
}

function readConfigFile(path: string, key: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    throw new ConfigError(
      key,
      `cannot read ${what} at ${path} (${code}), which [[index.service_account]] rules need`,
      'run in a pod that mounts its ServiceAccount token (automountServiceAccountToken), or set ca_file and token_file in [kubernetes]',
    );
  }
}
