/**
 * What `/+status` shows of the configuration: a server configured with every kind of secret
 * (inline, `_env`, `_file` tokens; upstream user info, query and fragment; upstream credentials;
 * webhook user info, query and secrets) never returns one of their values, nor the variable
 * names and file paths, in any status or stats document. And a cached index whose upstream fails
 * while a stale page is served reports `upstream.offline: true`.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { displayUrl } from '../../registry/src/config/sanitize.js';
import { cached, hosted, oci, toml, virtual } from '../support/config.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { Origin } from '../roles/origin.js';

/** Every secret value, each distinct so a leak names itself. */
const S = {
  inline: 'inline-token-Zq81',
  env: 'env-token-Yw72',
  file: 'file-token-Xv63',
  urlUser: 'urluser-Wu54',
  urlPass: 'urlpass-Vt45',
  urlQuery: 'urlquery-Us36',
  urlFragment: 'urlfrag-Tr27',
  upUserEnv: 'upuser-Sq18',
  upPassFile: 'uppass-Rp09',
  hookUser: 'hookuser-Qo91',
  hookPass: 'hookpass-Pn82',
  hookQuery: 'hookquery-Om73',
  hookSecret: 'hooksecret-Nl64',
  hookSecretEnv: 'hooksecretenv-Mk55',
};
const ENV_NAMES = ['OBSERVE_UPLOAD_TOKEN', 'OBSERVE_UPSTREAM_USER', 'OBSERVE_HOOK_SECRET'];

let origin: Origin;
let proxy: FaultProxy;
let server: Velodex;
let secretDir: string;

const PAGE = JSON.stringify({ meta: { 'api-version': '1.1' }, name: 'alpha', files: [] });

function config(upstream: string): string {
  const file = (name: string) => join(secretDir, name);
  return toml(
    hosted('inline', { token: S.inline }),
    hosted('fromenv', {
      token: { env: 'OBSERVE_UPLOAD_TOKEN' },
      volatile: true,
      webhooks: [
        { url: `http://${S.hookUser}:${S.hookPass}@127.0.0.1:9/hook?sig=${S.hookQuery}#x`, secret: S.hookSecret },
        { url: 'http://127.0.0.1:9/other', secret: { env: 'OBSERVE_HOOK_SECRET' }, events: ['upload'] },
      ],
    }),
    oci.hosted('images', { token: { file: file('token') } }),
    cached('pypi', `${upstream}/simple/`, { ttlSecs: 0 }),
    cached('private', `http://${S.urlUser}:${S.urlPass}@127.0.0.1:9/simple/?token=${S.urlQuery}#${S.urlFragment}`, {
      credentials: { username: { env: 'OBSERVE_UPSTREAM_USER' }, password: { file: file('password') } },
    }),
    virtual('all', ['inline', 'pypi'], { uploadTarget: 'inline', policy: { denyProjects: ['evil'], maxFileSize: 1000000 } }),
  );
}

beforeAll(async () => {
  origin = await new Origin().start();
  origin.docs.set('/simple/alpha/', { body: PAGE, headers: { 'content-type': 'application/vnd.pypi.simple.v1+json' } });
  proxy = await FaultProxy.start(origin.url);
  secretDir = tempDir('velodex-observe-secrets-');
  writeFileSync(join(secretDir, 'token'), `${S.file}\n`);
  writeFileSync(join(secretDir, 'password'), `${S.upPassFile}\n`);
  server = await startVelodex({
    config: config(proxy.url),
    env: { OBSERVE_UPLOAD_TOKEN: S.env, OBSERVE_UPSTREAM_USER: S.upUserEnv, OBSERVE_HOOK_SECRET: S.hookSecretEnv },
  });
});

afterAll(async () => {
  await server?.stop();
  await proxy?.close();
  await origin?.close();
});

async function raw(path: string): Promise<string> {
  const res = await fetch(`${server.url}${path}`);
  const body = await res.text();
  expect(res.status, body).toBe(200);
  return body;
}

interface IndexEntry {
  name: string;
  upstream?: { url: string; offline: boolean; username: unknown; password: unknown };
  upload_token?: unknown;
  webhooks: Array<{ url: string; secret: unknown; basic_auth: unknown; events: string[] | null }>;
  policy: Record<string, unknown>;
}
const entryOf = async (name: string) => ((JSON.parse(await raw('/+status')) as { indexes: IndexEntry[] }).indexes.find((i) => i.name === name))!;

describe('/+status shows configuration without its secrets', () => {
  it('no secret value, variable name or secret file path appears in any status or stats document', async () => {
    // Some traffic first, so every document has content.
    expect((await fetch(`${server.url}/root/pypi/simple/alpha/`)).status).toBe(200);
    const bodies = await Promise.all(
      ['/+status', '/+status?details=admin', '/+stats', '/+stats?index=root/pypi', '/+stats?index=root/pypi&project=alpha', '/+stats?index=root/fromenv'].map(raw),
    );
    const forbidden = [...Object.values(S), ...ENV_NAMES, secretDir];
    for (const body of bodies) {
      for (const value of forbidden) expect(body.includes(value), `${value} leaked`).toBe(false);
    }
  });

  it('describes each secret by whether it is set and the kind of its source', async () => {
    expect((await entryOf('inline')).upload_token).toEqual({ configured: true, source: 'inline' });
    expect((await entryOf('fromenv')).upload_token).toEqual({ configured: true, source: 'env' });
    expect((await entryOf('images')).upload_token).toEqual({ configured: true, source: 'file' });
    const priv = await entryOf('private');
    expect(priv.upstream).toMatchObject({
      // Scheme and host only: the rest (user info, path, query, fragment) is a fingerprint.
      url: displayUrl(`http://${S.urlUser}:${S.urlPass}@127.0.0.1:9/simple/?token=${S.urlQuery}#${S.urlFragment}`),
      username: { configured: true, source: 'env' },
      password: { configured: true, source: 'file' },
    });
    const hooks = (await entryOf('fromenv')).webhooks;
    expect(hooks).toEqual([
      { url: displayUrl(`http://127.0.0.1:9/hook?sig=${S.hookQuery}#x`), events: null, secret: { configured: true, source: 'inline' }, basic_auth: { configured: true, source: 'inline' } },
      { url: displayUrl('http://127.0.0.1:9/other'), events: ['upload'], secret: { configured: true, source: 'env' }, basic_auth: { configured: false } },
    ]);
    expect(priv.upstream?.url).toMatch(/^http:\/\/127\.0\.0\.1:9\/\.\.\.#[0-9a-f]{8}$/);
    expect(hooks.map((h) => h.url)).not.toContain(displayUrl('http://127.0.0.1:9/hook'));
    expect((await entryOf('all')).policy).toEqual({ max_file_size: 1000000, deny_projects: ['evil'], allow_projects: [], min_release_age_secs: null });
  });
});

describe('upstream.offline', () => {
  it('turns true when the upstream fails and only the cached page is served', async () => {
    expect((await fetch(`${server.url}/root/pypi/simple/alpha/`)).status).toBe(200);
    expect((await entryOf('pypi')).upstream?.offline).toBe(false);
    const before = (JSON.parse(await raw('/+stats?index=root/pypi')) as { totals: Record<string, number> }).totals.stale_served!;

    proxy.on('/simple/alpha/', { kind: 'status', status: 503 });
    const stale = await fetch(`${server.url}/root/pypi/simple/alpha/`, { headers: { accept: 'application/vnd.pypi.simple.v1+json' } });
    expect(stale.status).toBe(200);
    expect(((await stale.json()) as { name: string }).name).toBe('alpha');
    expect((await entryOf('pypi')).upstream?.offline).toBe(true);
    const after = (JSON.parse(await raw('/+stats?index=root/pypi')) as { totals: Record<string, number> }).totals.stale_served!;
    expect(after).toBe(before + 1);
  });
});
