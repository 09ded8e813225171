/**
 * The docker CLI and engine (Debian's docker.io, a private dockerd) against velodex, as a team
 * would use them: `docker login` fails with a wrong password and succeeds with an index's upload
 * token; `docker push` to a hosted index, then, logged out and with the image removed, `docker
 * pull` brings back the same digest; a push without login is refused; a login with team A's token
 * cannot push to team B; a push through a virtual index lands in its upload target. None of it
 * works without the token realm: docker sends credentials only after `/v2/` challenged it. Named
 * tokens: one that may upload to `app*` pushes there and pulls it back, and is refused elsewhere;
 * one past its expiry cannot log in, and docker prints when it expired. A private index
 * (`read = "token"`): an anonymous pull is refused, a login with its `read` token pulls the digest
 * its upload token pushed, and may not push. Trusted publishing: a CI job's identity token (from a
 * local OIDC issuer, test/support/oidc-issuer.ts) exchanged for a minted upload token logs docker
 * in and pushes the publisher's repository, and only that.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDockerd, type Dockerd } from '../support/dockerd.js';
import { tar } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { oci, toml } from '../support/config.js';
import { githubClaims, startOidcIssuer, type OidcIssuer } from '../support/oidc-issuer.js';
import { run } from '../support/run.js';
import { basicAuth, startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { twoTeams } from './api-support.js';

/** Named tokens of the index at `tokens/oci` (it has no upload token). */
const NAMED = { ci: 'ci-docker-secret-4b7e21', old: 'old-docker-secret-90c3aa' };

/** The private index at `vault/oci`: its upload token and a named token that may only read. */
const VAULT = { upload: 'vault-docker-upload-7d2c1e', read: 'vault-docker-read-3fa86b' };

/**
 * The two teams, with writes to the virtual `all/oci` going to team A; and an index whose only
 * credentials are named tokens: `ci` may upload to `app*`, `old` is past its expiry; and a private one.
 */
const config = (issuer: OidcIssuer) => toml(
  ...twoTeams({ allUploadTarget: 'team-a' }),
  oci.hosted('tokens', {
    route: 'tokens/oci',
    tokens: [
      { name: 'ci', secret: NAMED.ci, scopes: ['upload'], projects: ['app*'] },
      { name: 'old', secret: NAMED.old, scopes: ['upload'], expires: '2020-01-01' },
    ],
  }),
  oci.hosted('vault', { route: 'vault/oci', token: VAULT.upload, read: 'token', tokens: [{ name: 'puller', secret: VAULT.read, scopes: ['read'] }] }),
  oci.hosted('released', { route: 'released/oci', trustedPublishers: [{ name: 'app-release', issuer: issuer.url, repository: 'acme/app', projects: ['app'] }] }),
);

let issuer: OidcIssuer;
let server: Velodex;
let engine: Dockerd;
let host: string;
let work: string;

beforeAll(async () => {
  issuer = await startOidcIssuer();
  server = await startVelodex({ config: config(issuer) });
  host = `127.0.0.1:${server.port}`;
  work = tempDir('velodex-docker-');
  engine = await startDockerd(work);
  const rootfs = join(work, 'rootfs.tar');
  writeFileSync(rootfs, tar(new Map([['hello.txt', Buffer.from('hello from docker\n')], ['etc/motd', Buffer.from('pushed by docker\n')]])));
  await engine.docker(['import', rootfs, 'local/app:v1']);
}, 120_000);

afterAll(async () => {
  await engine?.stop();
  await server?.stop();
  await issuer?.close();
});

const login = (password: string, user = '__token__') => engine.docker(['login', '-u', user, '--password-stdin', host], { input: `${password}\n`, allowFailure: true });
const logout = () => engine.docker(['logout', host]);

/** `docker push`; the digest it printed, or the failure. */
async function push(ref: string): Promise<{ code: number; digest?: string; output: string }> {
  await engine.docker(['tag', 'local/app:v1', ref]);
  const res = await engine.docker(['push', ref], { allowFailure: true, timeoutMs: 120_000 });
  const output = `${res.stdout}\n${res.stderr}`;
  return { code: res.code, digest: /digest: (sha256:[0-9a-f]{64})/.exec(res.stdout)?.[1], output };
}

async function servedDigest(name: string, tag: string): Promise<string | null> {
  const res = await fetch(`${server.url}/v2/${name}/manifests/${tag}`, {
    method: 'HEAD',
    headers: { accept: 'application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json' },
  });
  return res.status === 200 ? res.headers.get('docker-content-digest') : null;
}

async function tags(name: string): Promise<string[]> {
  return ((await (await fetch(`${server.url}/v2/${name}/tags/list`)).json()) as { tags: string[] }).tags;
}

describe('docker', () => {
  it('refuses docker login with a wrong password, with a message that says why', async () => {
    const res = await login('not-the-token');
    expect(res.code).not.toBe(0);
    expect(res.stderr).toMatch(/unauthorized: the password is not the upload token of any hosted OCI index/);
  });

  it('logs in with an upload token, pushes to a hosted index, and pulls the same digest back anonymously', async () => {
    const res = await login('token-a');
    expect(res.stdout, res.stderr).toMatch(/Login Succeeded/);

    const ref = `${host}/team-a/oci/app:v1`;
    const pushed = await push(ref);
    expect(pushed.code, pushed.output).toBe(0);
    expect(pushed.digest).toMatch(/^sha256:/);
    expect(await servedDigest('team-a/oci/app', 'v1')).toBe(pushed.digest);

    await logout();
    await engine.docker(['rmi', ref]);
    expect((await engine.docker(['image', 'inspect', ref], { allowFailure: true })).code).not.toBe(0);
    const pulled = await engine.docker(['pull', ref], { timeoutMs: 120_000 });
    expect(pulled.stdout).toContain(`Digest: ${pushed.digest}`);
    const inspected = await engine.docker(['image', 'inspect', '--format', '{{json .RepoDigests}}', ref]);
    expect(JSON.parse(inspected.stdout)).toEqual([`${host}/team-a/oci/app@${pushed.digest}`]);
    // The files are the ones docker imported, as another client reads them.
    const exported = await run(tool('crane'), ['export', '--insecure', ref, join(work, 'export.tar')], { env: { HOME: work } });
    expect(exported.code).toBe(0);
    expect((await run('tar', ['-xOf', join(work, 'export.tar'), 'hello.txt'])).stdout).toBe('hello from docker\n');
  });

  it('refuses a push without login, and stores no tag', async () => {
    await logout();
    const pushed = await push(`${host}/team-a/oci/anonymous:v1`);
    expect(pushed.code).not.toBe(0);
    // The layers are not in this repository (blobs are per repository), so docker is refused at its
    // first blob upload, and says so in its own words, as Docker Hub's refusals read; velodex's
    // answer (and its security log) name what is missing.
    expect(pushed.output).toMatch(/denied: requested access to the resource is denied/);
    expect(server.logs()).toMatch(/"event":"auth_failed".*"reason":"insufficient-scope"|"reason":"insufficient-scope".*"event":"auth_failed"/);
    expect(await tags('team-a/oci/anonymous')).toEqual([]);
  });

  it("cannot push to team B's index when logged in with team A's token", async () => {
    expect((await login('token-a')).code).toBe(0);
    const pushed = await push(`${host}/team-b/oci/app:v1`);
    expect(pushed.code).not.toBe(0);
    // Docker words a refused blob upload its own way; velodex's security log says what happened.
    expect(pushed.output).toMatch(/denied: requested access to the resource is denied|does not allow writes to team-b\/oci\/app/);
    expect(server.logs()).toMatch(/"event":"auth_failed","index":"team-b\/oci","method":"POST","client":"127.0.0.1","reason":"insufficient-scope"/);
    expect(await tags('team-b/oci/app')).toEqual([]);
    expect(await servedDigest('team-b/oci/app', 'v1')).toBeNull();
  });

  it("pushes through a virtual index into its upload target, and pulls it back through the virtual name", async () => {
    expect((await login('token-a')).code).toBe(0);
    const ref = `${host}/all/oci/web:v1`;
    const pushed = await push(ref);
    expect(pushed.code, pushed.output).toBe(0);
    expect(await tags('team-a/oci/web')).toEqual(['v1']);
    expect(await servedDigest('team-a/oci/web', 'v1')).toBe(pushed.digest);
    await logout();
    await engine.docker(['rmi', ref]);
    const pulled = await engine.docker(['pull', ref], { timeoutMs: 120_000 });
    expect(pulled.stdout).toContain(`Digest: ${pushed.digest}`);
  });

  it('leaves no upload token or bearer token in the log', () => {
    const logs = server.logs();
    expect(logs).toMatch(/"url":"\/v2\/token\?/);
    expect(logs).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+/);
    for (const secret of ['token-a', 'token-b']) expect(logs).not.toContain(secret);
  });
});

describe('docker with named tokens', () => {
  it('logs in with a named token, pushes to a repository its globs match, and pulls the same image back', async () => {
    const res = await login(NAMED.ci, 'ci');
    expect(res.stdout, res.stderr).toMatch(/Login Succeeded/);
    const ref = `${host}/tokens/oci/app-web:v1`;
    const pushed = await push(ref);
    expect(pushed.code, pushed.output).toBe(0);
    expect(await servedDigest('tokens/oci/app-web', 'v1')).toBe(pushed.digest);
    // Still logged in: the realm grants the pull to the named token too.
    await engine.docker(['rmi', ref]);
    const pulled = await engine.docker(['pull', ref], { timeoutMs: 120_000 });
    expect(pulled.stdout).toContain(`Digest: ${pushed.digest}`);
    const inspected = await engine.docker(['image', 'inspect', '--format', '{{json .RepoDigests}}', ref]);
    expect(JSON.parse(inspected.stdout)).toContain(`${host}/tokens/oci/app-web@${pushed.digest}`);
    expect(server.logs()).toMatch(/"event":"write","index":"tokens\/oci","method":"PUT","client":"127.0.0.1","credential":"token:ci","what":"push tokens\/oci\/app-web:v1@sha256:/);
  });

  it('refuses a push to a repository outside its globs, and docker says it was denied', async () => {
    expect((await login(NAMED.ci, 'ci')).code).toBe(0);
    const pushed = await push(`${host}/tokens/oci/other:v1`);
    expect(pushed.code).not.toBe(0);
    // Docker prints its own words for a refused upload, not velodex's message (skopeo shows that);
    // the security log names the token.
    expect(pushed.output).toMatch(/denied: requested access to the resource is denied/);
    expect(server.logs()).toMatch(/"event":"auth_failed","index":"tokens\/oci","method":"POST","client":"127.0.0.1","reason":"insufficient-scope","token":"ci"/);
    expect(await tags('tokens/oci/other')).toEqual([]);
  });

  it('refuses docker login with a token past its expiry, and docker prints when it expired', async () => {
    await logout();
    const res = await login(NAMED.old, 'ci');
    expect(res.code).not.toBe(0);
    expect(res.stderr).toMatch(/unauthorized: the token "old" expired at 2020-01-01T00:00:00\.000Z: ask for a new one/);
    expect(server.logs()).toMatch(/"index":"\/v2\/token","method":"GET","client":"127.0.0.1","reason":"expired-credentials","token":"old"/);
  });

  it('leaves no named token secret in the log', () => {
    for (const secret of Object.values(NAMED)) expect(server.logs()).not.toContain(secret);
  });
});

describe('docker and trusted publishing', () => {
  let minted: string;

  it('logs in with an upload token minted for a CI job, and pushes the repository its publisher may write', async () => {
    const identity = await issuer.sign(githubClaims('acme/app', 'release.yml'), { audience: 'velodex' });
    const res = await fetch(`${server.url}/_/oidc/mint-token`, { method: 'POST', body: JSON.stringify({ token: identity }) });
    expect(res.status).toBe(200);
    minted = ((await res.json()) as { token: string }).token;
    await logout();
    expect((await login(minted)).stdout).toMatch(/Login Succeeded/);
    const pushed = await push(`${host}/released/oci/app:v1`);
    expect(pushed.code, pushed.output).toBe(0);
    expect(await servedDigest('released/oci/app', 'v1')).toBe(pushed.digest);
    expect(server.logs()).toMatch(/"event":"write","index":"released\/oci","method":"PUT","client":"127.0.0.1","credential":"publisher:app-release","what":"push released\/oci\/app:v1@sha256:/);
  });

  it('refuses a push outside the publisher\'s repositories, and one to another index', async () => {
    for (const ref of [`${host}/released/oci/other:v1`, `${host}/tokens/oci/app-web:v2`]) {
      const pushed = await push(ref);
      expect(pushed.code, ref).not.toBe(0);
      expect(pushed.output).toMatch(/denied: requested access to the resource is denied|unauthorized/);
    }
    expect(await tags('released/oci/other')).toEqual([]);
    expect(server.logs()).not.toContain(minted);
  });
});

describe('docker and a private index', () => {
  const ref = () => `${host}/vault/oci/app:v1`;
  let digest: string;

  beforeAll(async () => {
    expect((await login(VAULT.upload)).code).toBe(0);
    const pushed = await push(ref());
    expect(pushed.code, pushed.output).toBe(0);
    digest = pushed.digest!;
    await logout();
    await engine.docker(['rmi', ref()]);
  }, 120_000);

  it('refuses an anonymous pull, and docker says it may need a login', async () => {
    await logout();
    const pulled = await engine.docker(['pull', ref()], { allowFailure: true, timeoutMs: 120_000 });
    expect(pulled.code).not.toBe(0);
    // The realm gives an anonymous caller a token without `pull` here; docker words the refusal.
    expect(pulled.stderr).toContain(`pull access denied for ${host}/vault/oci/app, repository does not exist or may require 'docker login'`);
    expect(server.logs()).toMatch(/"event":"auth_failed","index":"vault\/oci","method":"GET","client":"127.0.0.1","reason":"insufficient-scope"/);
    expect((await engine.docker(['image', 'inspect', ref()], { allowFailure: true })).code).not.toBe(0);
  });

  it('pulls the pushed digest after docker login with a read token', async () => {
    const res = await login(VAULT.read, 'puller');
    expect(res.stdout, res.stderr).toMatch(/Login Succeeded/);
    const pulled = await engine.docker(['pull', ref()], { timeoutMs: 120_000 });
    expect(pulled.stdout).toContain(`Digest: ${digest}`);
    const inspected = await engine.docker(['image', 'inspect', '--format', '{{json .RepoDigests}}', ref()]);
    expect(JSON.parse(inspected.stdout)).toContain(`${host}/vault/oci/app@${digest}`);
  });

  it('refuses a push with the read token, and stores no tag', async () => {
    expect((await login(VAULT.read, 'puller')).code).toBe(0);
    const pushed = await push(`${host}/vault/oci/app:v2`);
    expect(pushed.code).not.toBe(0);
    // The layer is there already (docker asked, with the pull the token has); the manifest PUT is refused in velodex's words.
    expect(pushed.output).toContain('unauthorized: index "vault": the token "puller" may not upload (its scopes: read)');
    expect(server.logs()).toMatch(/"event":"auth_failed","index":"vault\/oci","method":"PUT","client":"127.0.0.1","reason":"insufficient-scope","token":"puller"/);
    const auth = { authorization: basicAuth(VAULT.read) };
    expect(((await (await fetch(`${server.url}/v2/vault/oci/app/tags/list`, { headers: auth })).json()) as { tags: string[] }).tags).toEqual(['v1']);
  });

  it('leaves no secret of the private index in the log', () => {
    for (const secret of Object.values(VAULT)) expect(server.logs()).not.toContain(secret);
  });
});
