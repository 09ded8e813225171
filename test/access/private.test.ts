/**
 * Private indexes (`read = "token"`) through the real clients: pip (credentials in the URL, and
 * from ~/.netrc), uv, crane. A private hosted Python index, a virtual index over it and an open
 * one (private by its member), a private hosted OCI index beside an open one. Without a credential
 * that reads them they answer 401 with the challenge and list nothing (`/v2/_catalog`, `/+stats`
 * of the index); with one, every client reads as from an open index.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hosted, oci, toml, virtual } from '../support/config.js';
import { buildImage, writeLayout } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run, type RunResult } from '../support/run.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { buildProject, type BuiltProject } from '../python/fixtures/projects.js';
import { postUpload } from '../python/fixtures/upload-client.js';

const SECRET_UPLOAD = 'secret-upload-token-6d1f';
const READER = 'reader-token-0b7e2a';
const OLD_READER = 'old-reader-token-51ac9e';
const OPEN_UPLOAD = 'open-upload-token-2c8d';
const VAULT_UPLOAD = 'vault-upload-token-93e1';
const VAULT_READER = 'vault-reader-token-4f06';
const PUBLIC_UPLOAD = 'public-upload-token-7a3b';

let server: Velodex;
let work: string;
let inside: BuiltProject;
let outside: BuiltProject;

beforeAll(async () => {
  [inside, outside] = await Promise.all([buildProject('inside', '1.0'), buildProject('outside', '1.0')]);
  work = tempDir('velodex-private-');
  server = await startVelodex({
    config: toml(
      hosted('secret', {
        token: SECRET_UPLOAD,
        read: 'token',
        tokens: [
          { name: 'reader', secret: READER, scopes: ['read'] },
          { name: 'old-reader', secret: OLD_READER, scopes: ['read'], expires: '2020-01-01' },
        ],
      }),
      hosted('open', { token: OPEN_UPLOAD }),
      virtual('view', ['secret', 'open']),
      oci.hosted('vault', { route: 'team/vault', token: VAULT_UPLOAD, read: 'token', tokens: [{ name: 'puller', secret: VAULT_READER, scopes: ['read'] }] }),
      // `bridge` writes here with the secret that reads the vault: what a mount from the vault needs.
      oci.hosted('public', { route: 'team/public', token: PUBLIC_UPLOAD, tokens: [{ name: 'bridge', secret: VAULT_READER, scopes: ['upload'] }] }),
    ),
  });
  for (const [route, token, file] of [
    ['root/secret', SECRET_UPLOAD, inside.wheel],
    ['root/open', OPEN_UPLOAD, outside.wheel],
  ] as const) {
    const res = await postUpload({ url: `${server.url}/${route}/`, token, file });
    expect(res.status, res.body).toBe(200);
  }
});

afterAll(async () => {
  await server?.stop();
});

const withCredentials = (url: string, password: string) => {
  const u = new URL(url);
  u.username = '__token__';
  u.password = password;
  return u.href;
};

function pipDownload(indexUrl: string, project: string, env: Record<string, string> = {}): Promise<RunResult> {
  return run(tool('pip'), ['download', '--no-deps', '--no-cache-dir', '--dest', join(work, 'pip', project), '--index-url', indexUrl, project], {
    allowFailure: true,
    env: { PIP_CONFIG_FILE: '/dev/null', PIP_DISABLE_PIP_VERSION_CHECK: '1', PIP_NO_INPUT: '1', HOME: work, ...env },
  });
}

describe('a private Python index', () => {
  it('refuses reads without credentials: 401 with the Basic challenge and a message, and pip fails', async () => {
    const res = await fetch(`${server.url}/root/secret/simple/`);
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe('Basic realm="velodex"');
    expect(((await res.json()) as { message: string }).message).toMatch(/index "secret" is private: send HTTP Basic credentials/);
    expect((await fetch(`${server.url}/root/secret/simple/inside/`)).status).toBe(401);
    const pip = await pipDownload(`${server.url}/root/secret/simple/`, 'inside');
    expect(pip.code).not.toBe(0);
    expect(server.logs()).toMatch(/"event":"auth_failed","index":"root\/secret","method":"GET","client":"[^"]+","reason":"missing-credentials"/);
  });

  it('pip and uv read it with a read token in the URL, and pip with one in ~/.netrc', async () => {
    const simple = `${server.url}/root/secret/simple/`;
    const inUrl = await pipDownload(withCredentials(simple, READER), 'inside');
    expect(inUrl.code, inUrl.stderr).toBe(0);
    expect(inUrl.stdout).toContain(inside.wheelFilename);
    writeFileSync(join(work, '.netrc'), `machine 127.0.0.1 login __token__ password ${READER}\n`, { mode: 0o600 });
    const netrc = await pipDownload(simple, 'inside');
    expect(netrc.code, netrc.stderr).toBe(0);
    const uv = await run(tool('uv'), ['pip', 'install', '--no-deps', '--target', join(work, 'uv-target'), '--index-url', withCredentials(simple, READER), 'inside'], {
      allowFailure: true,
      env: { UV_CACHE_DIR: join(work, 'uv-cache'), NO_COLOR: '1', HOME: join(work, 'no-netrc') },
    });
    expect(uv.code, uv.stderr).toBe(0);
  });

  it('the upload token reads it too; a wrong or expired token is 401 saying which', async () => {
    expect((await fetch(`${server.url}/root/secret/simple/`, { headers: { authorization: basic(SECRET_UPLOAD) } })).status).toBe(200);
    const wrong = await fetch(`${server.url}/root/secret/simple/`, { headers: { authorization: basic('not-a-token') } });
    expect(wrong.status).toBe(401);
    expect(((await wrong.json()) as { message: string }).message).toMatch(/these credentials may not read it/);
    const old = await fetch(`${server.url}/root/secret/simple/`, { headers: { authorization: basic(OLD_READER) } });
    expect(old.status).toBe(401);
    expect(((await old.json()) as { message: string }).message).toBe('the token "old-reader" expired at 2020-01-01T00:00:00.000Z: ask for a new one');
  });

  it('/+api marks it private, and its pip text, with the placeholder replaced by a read token, is a pip.conf that works', async () => {
    const api = (await (await fetch(`${server.url}/root/secret/+api`)).json()) as { indexes?: unknown[] } & Record<string, unknown>;
    const entry = ((await (await fetch(`${server.url}/+api`)).json()) as { indexes: Array<{ name: string; private?: boolean; client_configuration?: Record<string, { text: string }> }> }).indexes.find(
      (ix) => ix.name === 'secret',
    );
    expect(entry?.private).toBe(true);
    expect(JSON.stringify(api)).not.toContain(READER);
    const text = entry?.client_configuration?.pip?.text ?? '';
    expect(text).toContain('index-url = http://__token__:<read-token>@127.0.0.1');
    const conf = join(work, 'pip.conf');
    writeFileSync(conf, text.replace('<read-token>', READER));
    const pip = await run(tool('pip'), ['download', '--no-deps', '--no-cache-dir', '--dest', join(work, 'pip', 'conf'), 'inside'], {
      allowFailure: true,
      env: { PIP_CONFIG_FILE: conf, PIP_DISABLE_PIP_VERSION_CHECK: '1', PIP_NO_INPUT: '1', HOME: join(work, 'no-netrc') },
    });
    expect(pip.code, pip.stderr).toBe(0);
  });

  it('a virtual index over it is private too, read with a credential of the private member', async () => {
    expect((await fetch(`${server.url}/root/view/simple/`)).status).toBe(401);
    const pip = await pipDownload(withCredentials(`${server.url}/root/view/simple/`, READER), 'outside');
    expect(pip.code, pip.stderr).toBe(0);
    // The open member stays open on its own route.
    expect((await fetch(`${server.url}/root/open/simple/outside/`)).status).toBe(200);
  });

  it('a promotion from it needs credentials that read it: the open index\'s upload token alone is refused', async () => {
    const res = await fetch(`${server.url}/root/open/inside/1.0/promote?from=root/secret`, { method: 'PUT', headers: { authorization: basic(OPEN_UPLOAD) } });
    expect(res.status).toBe(403);
    expect(((await res.json()) as { message: string }).message).toMatch(/from=root\/secret is private index "secret", which these credentials may not read/);
    expect((await fetch(`${server.url}/root/open/simple/inside/`)).status).toBe(404);
  });

  it('/+stats of the index names its projects only to a reader; the server-wide document shows the index, nothing inside', async () => {
    const stats = `${server.url}/+stats?index=root/secret`;
    expect((await fetch(stats)).status).toBe(401);
    const read = await fetch(stats, { headers: { authorization: basic(READER) } });
    expect(read.status).toBe(200);
    expect(JSON.stringify(await read.json())).toContain('inside');
    const all = JSON.stringify(await (await fetch(`${server.url}/+stats`)).json());
    expect(all).toContain('root/secret');
    expect(all).not.toContain('inside');
    const status = (await (await fetch(`${server.url}/+status`)).json()) as { indexes: Array<{ name: string; private: boolean }> };
    expect(status.indexes.filter((ix) => ix.private).map((ix) => ix.name)).toEqual(['secret', 'view', 'vault']);
  });
});

describe('a private OCI index', () => {
  const env = () => ({ HOME: work, DOCKER_CONFIG: join(work, 'docker') });
  const host = () => `127.0.0.1:${server.port}`;
  const crane = (args: string[], allowFailure = false) => run(tool('crane'), [...args, '--insecure'], { env: env(), allowFailure, timeoutMs: 120_000 });
  const login = (secret: string) => run(tool('crane'), ['auth', 'login', host(), '-u', 'ci', '--password-stdin'], { env: env(), input: secret, timeoutMs: 60_000 });
  const catalog = async (authorization?: string) =>
    ((await (await fetch(`${server.url}/v2/_catalog`, authorization ? { headers: { authorization } } : {})).json()) as { repositories: string[] }).repositories;

  const image = buildImage({ seed: 'private', layers: 1, bigFileSize: 32 * 1024 });
  const secretImage = buildImage({ seed: 'private-only', layers: 1, bigFileSize: 16 * 1024 });

  beforeAll(async () => {
    await login(VAULT_UPLOAD);
    await crane(['push', writeLayout(join(work, 'layout'), [{ tag: 'v1', item: image }]), `${host()}/team/vault/app:v1`]);
    await crane(['push', writeLayout(join(work, 'layout-secret'), [{ tag: 'v1', item: secretImage }]), `${host()}/team/vault/secret:v1`]);
    await login(PUBLIC_UPLOAD);
    await crane(['push', writeLayout(join(work, 'layout-public'), [{ tag: 'v1', item: image }]), `${host()}/team/public/app:v1`]);
    await run(tool('crane'), ['auth', 'logout', host()], { env: env() });
  });

  it('a writer of the open index cannot mount a blob from it: the mount opens an ordinary upload instead', async () => {
    const layer = secretImage.layers[0]!.descriptor.digest;
    const auth = { authorization: basic(PUBLIC_UPLOAD) };
    const mount = await fetch(`${server.url}/v2/team/public/thief/blobs/uploads/?mount=${layer}&from=team/vault/secret`, { method: 'POST', headers: auth });
    expect(mount.status).toBe(202);
    expect((await fetch(`${server.url}/v2/team/public/thief/blobs/${layer}`, { headers: auth })).status).toBe(404);
    // Credentials that write here and read the vault mount it.
    const bridged = await fetch(`${server.url}/v2/team/public/mine/blobs/uploads/?mount=${layer}&from=team/vault/secret`, { method: 'POST', headers: { authorization: basic(VAULT_READER) } });
    expect(bridged.status).toBe(201);
    expect((await fetch(`${server.url}/v2/team/public/mine/blobs/${layer}`)).status).toBe(200);
  });

  it('an anonymous pull is refused with the bearer challenge, and crane says so; the open index beside it pulls', async () => {
    const res = await fetch(`${server.url}/v2/team/vault/app/manifests/v1`);
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe(`Bearer realm="${server.url}/v2/token",service="velodex",scope="repository:team/vault/app:pull"`);
    const pull = await crane(['pull', '--format', 'oci', `${host()}/team/vault/app:v1`, join(work, 'anon')], true);
    expect(pull.code).not.toBe(0);
    expect(pull.stderr).toMatch(/UNAUTHORIZED|unauthorized/);
    await crane(['pull', '--format', 'oci', `${host()}/team/public/app:v1`, join(work, 'public')]);
  });

  it('crane pulls with a read token, and may not push with it', async () => {
    await login(VAULT_READER);
    await crane(['pull', '--format', 'oci', `${host()}/team/vault/app:v1`, join(work, 'vault')]);
    const layout = writeLayout(join(work, 'layout2'), [{ tag: 'v2', item: buildImage({ seed: 'private-2', layers: 1, bigFileSize: 1024 }) }]);
    const push = await crane(['push', layout, `${host()}/team/vault/app:v2`], true);
    expect(push.code).not.toBe(0);
    // Basic credentials read too, straight away.
    expect((await fetch(`${server.url}/v2/team/vault/app/manifests/v1`, { headers: { authorization: basic(VAULT_READER), accept: 'application/vnd.oci.image.manifest.v1+json' } })).status).toBe(200);
  });

  it('the catalog lists its repositories only to a reader, with Basic credentials or through the realm', async () => {
    expect(await catalog()).toEqual(['team/public/app']);
    expect(await catalog(basic(VAULT_READER))).toEqual(['team/public/app', 'team/vault/app', 'team/vault/secret']);
    await login(VAULT_READER);
    expect((await crane(['catalog', host()])).stdout.trim().split('\n')).toEqual(['team/public/app', 'team/vault/app', 'team/vault/secret']);
  });
});

function basic(password: string): string {
  return `Basic ${Buffer.from(`__token__:${password}`).toString('base64')}`;
}
