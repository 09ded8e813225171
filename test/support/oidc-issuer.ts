/**
 * A local OpenID Connect issuer, as GitHub Actions' token service is for a CI job (a fake: the
 * real one signs only for jobs running on GitHub). It serves the discovery document and the key
 * set velodex fetches, and the job side of GitHub's protocol that uv and
 * `pypa/gh-action-pypi-publish` call: `GET <ACTIONS_ID_TOKEN_REQUEST_URL>&audience=<aud>` with
 * `Authorization: bearer <ACTIONS_ID_TOKEN_REQUEST_TOKEN>` answers `{"value": "<JWT>"}` carrying
 * the claims the test gave that job (`jobEnv`). Tokens are RS256 under a key of its own; `sign`
 * makes any token directly (an expired one, one for another audience).
 */
import { generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SignJWT, exportJWK } from 'jose';

export interface SignOptions {
  audience: string;
  /** Seconds from now; negative: already expired. Default 300. */
  expiresInSecs?: number;
  /** Sign with a key the issuer does not publish (a forgery). */
  foreignKey?: boolean;
  /** Another `iss` than the issuer's own. */
  issuer?: string;
}

export interface OidcIssuer {
  /** The issuer URL, `iss` of its tokens. */
  url: string;
  /** The environment of a GitHub Actions job with `id-token: write` whose tokens carry `claims`. */
  jobEnv(claims: Record<string, unknown>): Record<string, string>;
  /** A token for `claims`, signed now. */
  sign(claims: Record<string, unknown>, opts: SignOptions): Promise<string>;
  /** Key set fetches so far. */
  readonly keyFetches: number;
  close(): Promise<void>;
}

/** The claims a GitHub Actions job's token carries for `repository`, run by `workflow` on `ref`. */
export function githubClaims(repository: string, workflow: string, more: Record<string, unknown> = {}): Record<string, unknown> {
  const ref = (more.ref as string | undefined) ?? 'refs/heads/main';
  return {
    sub: `repo:${repository}:ref:${ref}`,
    repository,
    repository_owner: repository.split('/')[0],
    repository_owner_id: '4242',
    job_workflow_ref: `${repository}/.github/workflows/${workflow}@${ref}`,
    workflow_ref: `${repository}/.github/workflows/${workflow}@${ref}`,
    ref,
    ...more,
  };
}

export async function startOidcIssuer(): Promise<OidcIssuer> {
  const own = generateKeyPair();
  const foreign = generateKeyPair();
  const jobs = new Map<string, Record<string, unknown>>();
  let keyFetches = 0;
  let url = '';

  const sign = async (claims: Record<string, unknown>, opts: SignOptions): Promise<string> => {
    const key = opts.foreignKey ? foreign : own;
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT(claims)
      .setProtectedHeader({ alg: 'RS256', kid: key.kid, typ: 'JWT' })
      .setIssuer(opts.issuer ?? url)
      .setAudience(opts.audience)
      .setIssuedAt(now - 5)
      .setNotBefore(now - 5)
      .setExpirationTime(now + (opts.expiresInSecs ?? 300))
      .setJti(randomBytes(8).toString('hex'))
      .sign(key.privateKey);
  };

  const server = http.createServer((req, res) => {
    const reqUrl = new URL(req.url ?? '/', url);
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    void (async () => {
      if (reqUrl.pathname === '/.well-known/openid-configuration') return json(200, { issuer: url, jwks_uri: `${url}/jwks`, id_token_signing_alg_values_supported: ['RS256'] });
      if (reqUrl.pathname === '/jwks') {
        keyFetches += 1;
        return json(200, { keys: [{ ...(await exportJWK(own.publicKey)), kid: own.kid, alg: 'RS256', use: 'sig' }] });
      }
      if (reqUrl.pathname === '/token') {
        const bearer = /^bearer\s+(.+)$/i.exec(req.headers.authorization ?? '')?.[1];
        const claims = bearer === undefined ? undefined : jobs.get(bearer);
        if (!claims) return json(401, { message: 'bad request token' });
        const audience = reqUrl.searchParams.get('audience');
        if (!audience) return json(400, { message: 'no audience' });
        return json(200, { value: await sign(claims, { audience }), count: 1 });
      }
      return json(404, { message: 'not found' });
    })().catch((err: unknown) => json(500, { message: String(err) }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    url,
    jobEnv(claims) {
      const requestToken = randomBytes(16).toString('hex');
      jobs.set(requestToken, claims);
      return { GITHUB_ACTIONS: 'true', ACTIONS_ID_TOKEN_REQUEST_URL: `${url}/token?api-version=2.0`, ACTIONS_ID_TOKEN_REQUEST_TOKEN: requestToken };
    },
    sign,
    get keyFetches() {
      return keyFetches;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function generateKeyPair(): { privateKey: KeyObject; publicKey: KeyObject; kid: string } {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { privateKey, publicKey, kid: randomBytes(6).toString('hex') };
}
