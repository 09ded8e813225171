/**
 * The token realm over plain HTTP (docker's own view is in clients-docker.test.ts): the version
 * check's challenge, what `/v2/token` grants to whom, and how every `/v2/<name>/` route treats a
 * bearer token (a token for one team's index never writes to the other's; a forged, edited or
 * expired token is a 401 with the spec's body and an `invalid_token` challenge; Basic still works).
 * Then the signing key: configured, generated once into the data dir and kept across a restart,
 * and agreed on by replicas that start at the same moment on one shared store.
 */
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { decodeJwt, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testBackend } from '../support/backend.js';
import { auth, oci, s3Storage, toml, trustedProxies } from '../support/config.js';
import { startMinio, type Minio } from '../support/minio.js';
import { rawRequest } from '../support/raw-http.js';
import { basicAuth, startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { TokenSigner } from '../../registry/src/oci/handlers/token/tokens.js';
import { expectOciError, imageManifest, Registry, sha256 } from './api-support.js';

const SIGNING_KEY = 'test-signing-key-0123456789-abcdefghijklmnop';

/** The suite's indexes; `tokenA` is team A's upload token (one test rotates it). */
const indexes = (tokenA = 'token-a') => [
  oci.hosted('team-a', { route: 'team-a/oci', token: tokenA }),
  oci.hosted('team-b', { route: 'team-b/oci', token: 'token-b' }),
  oci.hosted('closed', { route: 'closed/oci' }),
  oci.virtual('all', ['team-a', 'team-b'], { route: 'all/oci', uploadTarget: 'team-a' }),
];
const SIGNED = auth({ tokenSigningKey: SIGNING_KEY });

interface TokenAnswer {
  token: string;
  access_token: string;
  expires_in: number;
  issued_at: string;
}

interface Claims {
  iss: string;
  aud: string;
  exp: number;
  iat: number;
  access: { type: string; name: string; actions: string[] }[];
}

/** `GET /v2/token` for the given scopes, anonymous unless a password is given. */
async function tokenFetch(url: string, scopes: string[], password?: string, query = 'service=velodex'): Promise<Response> {
  const params = [query, ...scopes.map((s) => `scope=${encodeURIComponent(s)}`)].filter((p) => p !== '').join('&');
  return fetch(`${url}/v2/token?${params}`, { headers: password === undefined ? {} : { authorization: basicAuth(password) } });
}

async function tokenFor(url: string, scopes: string[], password?: string): Promise<string> {
  const res = await tokenFetch(url, scopes, password);
  expect(res.status, await res.clone().text()).toBe(200);
  return ((await res.json()) as TokenAnswer).token;
}

const bearer = (token: string) => `Bearer ${token}`;

describe('token realm', () => {
  let server: Velodex;
  const tokensSeen: string[] = [];

  beforeAll(async () => {
    // 127.0.0.1 is a trusted proxy here, so a test can send the headers an ingress would.
    server = await startVelodex({ config: toml(trustedProxies(['127.0.0.1']), SIGNED, ...indexes()) });
  });

  afterAll(async () => {
    await server?.stop();
  });

  describe('version check', () => {
    it('challenges a caller without credentials to the realm at the origin it used, a trusted proxy\'s included', async () => {
      const plain = await fetch(`${server.url}/v2/`);
      expect(plain.headers.get('www-authenticate')).toBe(`Bearer realm="${server.url}/v2/token",service="velodex"`);
      const body = await expectOciError(plain, 401, 'UNAUTHORIZED');
      expect(body.message).toMatch(/\/v2\/token/);
      const proxied = await fetch(`${server.url}/v2/`, { headers: { 'x-forwarded-host': 'registry.example.com', 'x-forwarded-proto': 'https' } });
      expect(proxied.headers.get('www-authenticate')).toBe('Bearer realm="https://registry.example.com/v2/token",service="velodex"');
      // From a peer that is no trusted proxy, the same headers move nothing.
      const direct = await rawRequest(server.url, '/v2/', 'GET', { 'x-forwarded-host': 'registry.example.com', 'x-forwarded-proto': 'https' }, { localAddress: '127.0.0.2' });
      expect(direct.headers['www-authenticate']).toBe(`Bearer realm="${server.url}/v2/token",service="velodex"`);
    });

    it('answers 200 to a realm token and to a right Basic password, 401 to a wrong one', async () => {
      const anonymous = await tokenFor(server.url, []);
      tokensSeen.push(anonymous);
      expect((await fetch(`${server.url}/v2/`, { headers: { authorization: bearer(anonymous) } })).status).toBe(200);
      expect((await fetch(`${server.url}/v2/`, { headers: { authorization: basicAuth('token-b') } })).status).toBe(200);
      const wrong = await fetch(`${server.url}/v2/`, { headers: { authorization: basicAuth('token-c') } });
      expect(wrong.headers.get('www-authenticate')).toMatch(/^Bearer realm=/);
      await expectOciError(wrong, 401, 'UNAUTHORIZED');
    });
  });

  describe('/v2/token', () => {
    it('answers token, access_token, expires_in and issued_at, never cached', async () => {
      const before = Math.floor(Date.now() / 1000);
      const res = await tokenFetch(server.url, ['repository:team-a/oci/app:pull']);
      expect(res.status).toBe(200);
      expect(res.headers.get('cache-control')).toBe('no-store');
      const answer = (await res.json()) as TokenAnswer;
      tokensSeen.push(answer.token);
      expect(answer.access_token).toBe(answer.token);
      expect(answer.expires_in).toBe(300);
      const issuedAt = Date.parse(answer.issued_at) / 1000;
      expect(issuedAt).toBeGreaterThanOrEqual(before - 1);
      const claims = decodeJwt(answer.token) as unknown as Claims;
      expect(claims).toMatchObject({ iss: 'velodex', aud: 'velodex', iat: issuedAt, exp: issuedAt + 300 });
    });

    it('grants pull to anyone and nothing more', async () => {
      const claims = decodeJwt(await tokenFor(server.url, ['repository:team-a/oci/app:pull,push', 'repository:team-b/oci/x:delete'])) as unknown as Claims;
      expect(claims.access).toEqual([{ type: 'repository', name: 'team-a/oci/app', actions: ['pull'] }]);
    });

    it("grants writes on an index's names to the holder of its upload token only, a virtual index's through its upload target", async () => {
      const scopes = ['repository:team-a/oci/app:pull,push', 'repository:team-b/oci/app:pull,push', 'repository:all/oci/app:push', 'repository:closed/oci/app:pull,push', 'repository:elsewhere/app:push'];
      const withA = decodeJwt(await tokenFor(server.url, scopes, 'token-a')) as unknown as Claims;
      expect(withA.access).toEqual([
        { type: 'repository', name: 'team-a/oci/app', actions: ['pull', 'push'] },
        { type: 'repository', name: 'team-b/oci/app', actions: ['pull'] },
        { type: 'repository', name: 'all/oci/app', actions: ['push'] },
        { type: 'repository', name: 'closed/oci/app', actions: ['pull'] },
      ]);
      const withB = decodeJwt(await tokenFor(server.url, scopes, 'token-b')) as unknown as Claims;
      expect(withB.access).toEqual([
        { type: 'repository', name: 'team-a/oci/app', actions: ['pull'] },
        { type: 'repository', name: 'team-b/oci/app', actions: ['pull', 'push'] },
        { type: 'repository', name: 'closed/oci/app', actions: ['pull'] },
      ]);
      // `*` asks for everything: the write actions a holder may have, and pull.
      const star = decodeJwt(await tokenFor(server.url, ['repository:team-a/oci/app:*'], 'token-a')) as unknown as Claims;
      expect(star.access).toEqual([{ type: 'repository', name: 'team-a/oci/app', actions: ['pull', 'push', 'delete'] }]);
    });

    it('refuses a password that is no upload token with 401, so docker login fails', async () => {
      const res = await tokenFetch(server.url, [], 'not-a-token');
      expect(res.headers.get('www-authenticate')).toBe('Basic realm="velodex"');
      const body = await expectOciError(res, 401, 'UNAUTHORIZED');
      expect(body.message).toMatch(/not the upload token of any hosted OCI index/);
      await expectOciError(await fetch(`${server.url}/v2/token`, { headers: { authorization: 'Bearer abc' } }), 401, 'UNAUTHORIZED');
    });

    it('refuses another service and malformed scopes with 400, and methods other than GET with 405', async () => {
      await expectOciError(await tokenFetch(server.url, [], undefined, 'service=registry.docker.io'), 400, 'REQUEST_INVALID');
      const bad = await expectOciError(await tokenFetch(server.url, ['repository:app']), 400, 'REQUEST_INVALID');
      expect(bad.message).toMatch(/type:name:actions/);
      // containerd tries the OAuth2 POST first and falls back to GET on a 405.
      const post = await fetch(`${server.url}/v2/token`, { method: 'POST', body: 'grant_type=password', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
      expect(post.headers.get('allow')).toBe('GET, HEAD');
      await expectOciError(post, 405, 'UNSUPPORTED');
      // Without a service parameter the realm's own is meant.
      expect((await tokenFetch(server.url, ['repository:team-a/oci/app:pull'], undefined, '')).status).toBe(200);
    });
  });

  describe('routes with a bearer token', () => {
    it("pushes with a token for the index's names, and a token for team A cannot push to team B", async () => {
      const token = await tokenFor(server.url, ['repository:team-a/oci/app:pull,push', 'repository:team-b/oci/app:pull,push'], 'token-a');
      tokensSeen.push(token);
      const reg = new Registry(server.url, bearer(token));
      const config = Buffer.from('{"architecture":"amd64","os":"linux"}');
      const hex = await reg.pushBlob('team-a/oci/app', config);
      expect((await reg.pushManifest('team-a/oci/app', 'v1', imageManifest(hex, config.length, []))).status).toBe(201);

      const refused = await reg.fetch(`/v2/team-b/oci/app/blobs/uploads/?digest=sha256:${sha256(config)}`, { method: 'POST', body: config });
      expect(refused.headers.get('www-authenticate')).toBe(
        `Bearer realm="${server.url}/v2/token",service="velodex",scope="repository:team-b/oci/app:pull,push",error="insufficient_scope"`,
      );
      const body = await expectOciError(refused, 401, 'UNAUTHORIZED');
      expect(body.message).toMatch(/does not allow writes to team-b\/oci\/app.*index "team-b"/);
      // Another repository of team A's own index is another name: the token does not cover it either.
      const other = await reg.fetch('/v2/team-a/oci/other/manifests/v1', { method: 'DELETE' });
      expect(other.headers.get('www-authenticate')).toMatch(/scope="repository:team-a\/oci\/other:delete",error="insufficient_scope"/);
      await expectOciError(other, 401, 'UNAUTHORIZED');
      expect((await fetch(`${server.url}/v2/team-b/oci/app/tags/list`)).status).toBe(200);
      expect(await (await fetch(`${server.url}/v2/team-b/oci/app/tags/list`)).json()).toEqual({ name: 'team-b/oci/app', tags: [] });
    });

    it("writes through a virtual index's upload target with a token minted for the virtual name", async () => {
      const token = await tokenFor(server.url, ['repository:all/oci/web:pull,push'], 'token-a');
      const reg = new Registry(server.url, bearer(token));
      const config = Buffer.from('{"os":"linux","architecture":"arm64"}');
      const hex = await reg.pushBlob('all/oci/web', config);
      expect((await reg.pushManifest('all/oci/web', 'v1', imageManifest(hex, config.length, []))).status).toBe(201);
      expect(await (await fetch(`${server.url}/v2/team-a/oci/web/tags/list`)).json()).toEqual({ name: 'team-a/oci/web', tags: ['v1'] });
    });

    it('refuses an anonymous token on a write with the scope the write needs, and a closed index with 403', async () => {
      const token = await tokenFor(server.url, ['repository:team-a/oci/app:pull,push']);
      const res = await fetch(`${server.url}/v2/team-a/oci/app/blobs/uploads/`, { method: 'POST', headers: { authorization: bearer(token) } });
      expect(res.headers.get('www-authenticate')).toMatch(/scope="repository:team-a\/oci\/app:pull,push",error="insufficient_scope"/);
      await expectOciError(res, 401, 'UNAUTHORIZED');
      const closed = await fetch(`${server.url}/v2/closed/oci/app/blobs/uploads/`, { method: 'POST', headers: { authorization: bearer(token) } });
      await expectOciError(closed, 403, 'DENIED');
    });

    it('refuses forged, edited and expired tokens on every route, reads included, with an invalid_token challenge', async () => {
      const claims = { access: [{ type: 'repository', name: 'team-a/oci/app', actions: ['pull', 'push'] }] };
      const now = Math.floor(Date.now() / 1000);
      const sign = (key: string, iat: number) =>
        new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setIssuer('velodex').setAudience('velodex').setSubject('uploader').setIssuedAt(iat).setExpirationTime(iat + 300).sign(Buffer.from(key));
      const forged = await sign('some-other-key-some-other-key-some-other-key', now);
      const expired = await sign(SIGNING_KEY, now - 3600);
      const anonymous = await tokenFor(server.url, ['repository:team-a/oci/app:pull']);
      const [h, , s] = anonymous.split('.') as [string, string, string];
      const edited = `${h}.${Buffer.from(JSON.stringify({ ...decodeJwt(anonymous), ...claims })).toString('base64url')}.${s}`;
      for (const [what, token, message] of [
        ['forged', forged, /not signed by this registry/],
        ['edited', edited, /not signed by this registry/],
        ['expired', expired, /expired/],
        ['garbage', 'not.a.token', /not a token this registry issued/],
      ] as const) {
        for (const [method, path] of [
          ['GET', '/v2/'],
          ['GET', '/v2/team-a/oci/app/tags/list'],
          ['POST', '/v2/team-a/oci/app/blobs/uploads/'],
        ]) {
          const res = await fetch(`${server.url}${path}`, { method, headers: { authorization: bearer(token) } });
          expect(res.headers.get('www-authenticate'), `${what} ${method} ${path}`).toBe(`Bearer realm="${server.url}/v2/token",service="velodex",error="invalid_token"`);
          const body = await expectOciError(res, 401, 'UNAUTHORIZED');
          expect(body.message, what).toMatch(message);
        }
      }
      // The key signs: the same claims under the configured key, in their lifetime and bound to
      // team A's upload token, are a push.
      const bindings = { 'team-a': new TokenSigner(Buffer.from(SIGNING_KEY)).bindingOf('token-a') };
      const genuine = await new SignJWT({ ...claims, bindings })
        .setProtectedHeader({ alg: 'HS256' }).setIssuer('velodex').setAudience('velodex').setSubject('uploader').setIssuedAt(now).setExpirationTime(now + 300).sign(Buffer.from(SIGNING_KEY));
      const reg = new Registry(server.url, bearer(genuine));
      await reg.pushBlob('team-a/oci/app', 'signed with the configured key');
    });

    it('still takes Basic credentials on every write (crane, skopeo, curl)', async () => {
      const reg = new Registry(server.url, basicAuth('token-b'));
      await reg.pushBlob('team-b/oci/basic', 'basic bytes');
      const wrong = await new Registry(server.url, basicAuth('token-a')).fetch('/v2/team-b/oci/basic/blobs/uploads/', { method: 'POST' });
      expect(wrong.headers.get('www-authenticate')).toBe('Basic realm="velodex"');
      await expectOciError(wrong, 401, 'UNAUTHORIZED');
    });

    it('writes no token, upload token or signing key into the log', () => {
      const logs = server.logs();
      expect(tokensSeen.length).toBeGreaterThan(2);
      for (const token of tokensSeen) expect(logs).not.toContain(token.split('.')[2]);
      for (const secret of ['token-a', 'token-b', SIGNING_KEY]) expect(logs).not.toContain(secret);
      // The failed logins are in the security log, with no credential.
      expect(logs).toMatch(/"event":"auth_failed","index":"\/v2\/token","method":"GET","client":"127.0.0.1","reason":"wrong-credentials"/);
      expect(logs).toMatch(/"event":"auth_failed","index":"team-b\/oci","method":"POST","client":"127.0.0.1","reason":"insufficient-scope"/);
    });
  });
});

describe('signing key', () => {
  it('is generated once into the data dir (or the store) and kept across a restart; a rotated upload token ends its tokens', async () => {
    const dataDir = tempDir('velodex-token-key-');
    let server = await startVelodex({ config: toml(...indexes()), dataDir });
    const tokenA = await tokenFor(server.url, ['repository:team-a/oci/app:pull,push'], 'token-a');
    const tokenB = await tokenFor(server.url, ['repository:team-b/oci/app:pull,push'], 'token-b');
    await server.stop();
    if (testBackend() === 'fs') expect(statSync(join(dataDir, 'token-signing-key')).mode & 0o777).toBe(0o600);
    // Team A's upload token is rotated while the server is down.
    server = await startVelodex({ config: toml(...indexes('token-a2')), dataDir });
    try {
      await new Registry(server.url, bearer(tokenB)).pushBlob('team-b/oci/app', 'after a restart');
      const stale = await new Registry(server.url, bearer(tokenA)).fetch('/v2/team-a/oci/app/blobs/uploads/', { method: 'POST' });
      expect(stale.headers.get('www-authenticate')).toMatch(/error="invalid_token"/);
      const body = await expectOciError(stale, 401, 'UNAUTHORIZED');
      expect(body.message).toMatch(/a credential of index "team-a" that has changed or expired since: log in again/);
      expect(server.logs()).toMatch(/"event":"auth_failed","index":"team-a\/oci","method":"POST","client":"127.0.0.1","reason":"stale-upload-token"/);
      const fresh = await tokenFor(server.url, ['repository:team-a/oci/app:pull,push'], 'token-a2');
      await new Registry(server.url, bearer(fresh)).pushBlob('team-a/oci/app', 'with the new token');
    } finally {
      await server.stop();
    }
  });

  it('is refused at start-up when shorter than 32 characters', async () => {
    await expect(startVelodex({ config: toml(auth({ tokenSigningKey: 'short' }), ...indexes()) })).rejects.toThrow(
      /auth\.token_signing_key: is 5 characters long; at least 32 are needed.*openssl rand -base64 48/,
    );
  });

  describe('replicas on one shared store', () => {
    let minio: Minio;
    let nodes: Velodex[] = [];

    beforeAll(async () => {
      minio = await startMinio();
    });

    afterAll(async () => {
      await Promise.allSettled(nodes.map((n) => n.stop()));
      await minio?.stop();
    });

    it('agree on one generated key when they all start at the same moment', async () => {
      const config = toml(s3Storage(minio, { prefix: 'replicas' }), ...indexes());
      nodes = await Promise.all([0, 1, 2].map(() => startVelodex({ config })));
      for (const from of nodes) {
        const token = await tokenFor(from.url, ['repository:team-a/oci/app:pull,push'], 'token-a');
        for (const to of nodes) {
          const res = await fetch(`${to.url}/v2/`, { headers: { authorization: bearer(token) } });
          expect(res.status, `a token of ${from.url} at ${to.url}`).toBe(200);
        }
      }
    });
  });
});
