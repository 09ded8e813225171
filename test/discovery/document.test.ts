/**
 * The discovery documents over HTTP, from a real server configured with every kind of index and
 * every way to give a secret: no secret ever appears in any document; read-only routes carry no
 * upload URL and no upload text; the origin comes from Host or from valid X-Forwarded-* headers
 * (the server trusts 127.0.0.1 as a proxy; forwarded.test.ts has an untrusted peer); garbage
 * headers are ignored; without an origin the URLs are paths and there are no texts.
 */
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DiscoveryDocument, IndexEntry } from '../../registry/src/discovery/types.js';
import { cached, hosted, oci, toml, trustedProxies, virtual } from '../support/config.js';
import { rawRequest } from '../support/raw-http.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';

/** Every secret the config holds; each carries the marker, so one search finds any of them. */
const S = {
  inlineToken: 'inline-token-SECRET-1a',
  envToken: 'env-token-SECRET-2b',
  fileToken: 'file-token-SECRET-3c',
  ociToken: 'oci-token-SECRET-4d',
  upstreamUser: 'up-user-SECRET-5e',
  upstreamPass: 'up-pass-SECRET-6f',
  upstreamQuery: 'up-query-SECRET-7a',
  upstreamFragment: 'up-frag-SECRET-8b',
  usernameEnv: 'username-env-SECRET-9c',
  hookPass: 'hook-pass-SECRET-0d',
  hookQuery: 'hook-query-SECRET-1e',
  hookInline: 'hook-inline-SECRET-2f',
  hookEnv: 'hook-env-SECRET-3a',
  hookFile: 'hook-file-SECRET-4b',
};

function config(dir: string): string {
  const tokenFile = join(dir, 'token');
  const hookFile = join(dir, 'hook-secret');
  writeFileSync(tokenFile, `${S.fileToken}\n`);
  writeFileSync(hookFile, S.hookFile);
  return toml(
    trustedProxies(['127.0.0.1']),
    hosted('private', {
      route: 'team/private',
      token: S.inlineToken,
      volatile: true,
      webhooks: [{ url: `https://hook-user:${S.hookPass}@hooks.example/velodex?sig=${S.hookQuery}`, secret: S.hookInline }],
    }),
    hosted('env', { route: 'team/env', token: { env: 'DISCOVERY_TEST_TOKEN' }, webhooks: [{ url: 'https://hooks.example/env', secret: { env: 'DISCOVERY_TEST_HOOK' } }] }),
    hosted('file', { route: 'team/file', token: { file: tokenFile }, webhooks: [{ url: 'https://hooks.example/file', secret: { file: hookFile } }] }),
    hosted('nokey', { route: 'team/nokey' }),
    cached('pypi', `https://${S.upstreamUser}:${S.upstreamPass}@upstream.example/simple/?token=${S.upstreamQuery}#${S.upstreamFragment}`, {
      route: 'team/pypi',
      credentials: { username: { env: 'DISCOVERY_TEST_USERNAME' } },
    }),
    virtual('blend', ['private', 'pypi'], { route: 'team/blend', uploadTarget: 'private' }),
    virtual('readonly', ['private', 'pypi'], { route: 'team/readonly' }),
    oci.hosted('images', { route: 'team/images', token: S.ociToken }),
    oci.virtual('images-ro', ['images'], { route: 'team/images-ro' }),
  );
}

let server: Velodex;

beforeAll(async () => {
  const dir = tempDir('velodex-discovery-');
  server = await startVelodex({
    config: config(dir),
    dataDir: dir,
    env: { DISCOVERY_TEST_TOKEN: S.envToken, DISCOVERY_TEST_HOOK: S.hookEnv, DISCOVERY_TEST_USERNAME: S.usernameEnv },
  });
});

afterAll(async () => {
  await server?.stop();
});

async function get(path: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Record<string, unknown>; body: string; doc: DiscoveryDocument }> {
  const res = await rawRequest(server.url, path, 'GET', headers);
  return { ...res, doc: (res.status === 200 ? JSON.parse(res.body) : null) as DiscoveryDocument };
}

function entry(doc: DiscoveryDocument, name: string): IndexEntry {
  const found = doc.indexes.find((ix) => ix.name === name);
  if (!found) throw new Error(`no entry for ${name}`);
  return found;
}

const ALL_ROUTES = ['team/private', 'team/env', 'team/file', 'team/nokey', 'team/pypi', 'team/blend', 'team/readonly', 'team/images', 'team/images-ro'];

describe('secrets', () => {
  it('never appear, with or without an origin, server-wide or per index', async () => {
    const variants: Record<string, string>[] = [{}, { host: 'bad host' }, { 'x-forwarded-host': 'pkgs.example.com', 'x-forwarded-proto': 'https' }];
    for (const headers of variants) {
      for (const path of ['/+api', ...ALL_ROUTES.map((r) => `/${r}/+api`)]) {
        const res = await get(path, headers);
        expect(res.status, path).toBe(200);
        expect(res.body).not.toMatch(/SECRET/);
        expect(res.body).not.toContain('hook-user');
      }
    }
  });

  it('shows the upstream as scheme and host, and a fingerprint of the rest', async () => {
    const configured = `https://${S.upstreamUser}:${S.upstreamPass}@upstream.example/simple/?token=${S.upstreamQuery}#${S.upstreamFragment}`;
    const shown = entry((await get('/team/pypi/+api')).doc, 'pypi').upstream;
    expect(shown).toBe(`https://upstream.example/...#${createHash('sha256').update(new URL(configured).href).digest('hex').slice(0, 8)}`);
  });

  it('texts carry the placeholder, never a token', async () => {
    const { doc } = await get('/+api');
    for (const name of ['private', 'env', 'file', 'blend']) expect(entry(doc, name).client_configuration?.pypirc?.text).toContain('password = <upload-token>');
    expect(entry(doc, 'images').client_configuration?.crane?.text).toContain("'<upload-token>'");
  });
});

describe('the server-wide document', () => {
  it('lists global URLs and every index', async () => {
    const res = await get('/+api');
    const host = new URL(server.url).host;
    expect(res.headers.vary).toBe('Host, X-Forwarded-Host, X-Forwarded-Proto');
    expect(res.doc.urls).toEqual({
      api: `http://${host}/+api`,
      status: `http://${host}/+status`,
      stats: `http://${host}/+stats`,
      metrics: `http://${host}/metrics`,
      search: `http://${host}/+search`,
      registry: `http://${host}/v2/`,
    });
    expect(res.doc.indexes.map((ix) => ix.route)).toEqual(ALL_ROUTES);
    expect(res.doc.index_apis.images).toBe(`http://${host}/team/images/+api`);
    expect(entry(res.doc, 'blend')).toMatchObject({ ecosystem: 'python', role: 'virtual', members: ['private', 'pypi'], upload_target: 'private' });
  });

  it('answers HEAD too', async () => {
    expect((await rawRequest(server.url, '/team/images/+api', 'HEAD')).status).toBe(200);
  });
});

describe('per index', () => {
  it('answers for Python and OCI routes alike, with that index alone', async () => {
    for (const route of ALL_ROUTES) {
      const { doc } = await get(`/${route}/+api`);
      expect(doc.indexes.map((ix) => ix.route)).toEqual([route]);
    }
  });

  it('answers 404 under no index route', async () => {
    expect((await get('/team/+api')).status).toBe(404);
    expect((await get('/nowhere/+api')).status).toBe(404);
  });

  it('writable Python routes: upload URL and texts; capabilities follow the upload target', async () => {
    const host = new URL(server.url).host;
    const blend = entry((await get('/team/blend/+api')).doc, 'blend');
    expect(blend.urls).toEqual({
      api: `http://${host}/team/blend/+api`,
      search: `http://${host}/team/blend/+search`,
      simple: `http://${host}/team/blend/simple/`,
      files: `http://${host}/team/blend/files/`,
      upload: `http://${host}/team/blend/`,
    });
    expect(blend.capabilities).toMatchObject({ uploads: true, yanking: true, volatile_deletes: true, simple_json: true, pep658_metadata: true, legacy_json: true });
    expect(Object.keys(blend.client_configuration ?? {}).sort()).toEqual(['pip', 'pypirc', 'uv']);
    // The blend reaches an upstream: uv takes it as the default index, replacing PyPI.
    expect(blend.client_configuration?.uv?.text).toContain('default = true');
    expect(blend.client_configuration?.uv?.text).toContain(`publish-url = "http://${host}/team/blend/"`);

    const env = entry((await get('/team/env/+api')).doc, 'env');
    expect(env.capabilities).toMatchObject({ uploads: true, volatile_deletes: false });
    // Hosted alone: PyPI stays uv's default, so `uv build` finds its backend.
    expect(env.client_configuration?.uv?.text).not.toContain('default');
  });

  it('read-only routes have no upload URL, no upload text, no writes in capabilities', async () => {
    for (const name of ['nokey', 'pypi', 'readonly']) {
      const ix = entry((await get('/+api')).doc, name);
      expect(ix.urls.upload, name).toBeUndefined();
      expect(ix.client_configuration?.pypirc, name).toBeUndefined();
      expect(ix.client_configuration?.uv?.text, name).not.toContain('publish-url');
      expect(ix.capabilities, name).toMatchObject({ uploads: false, yanking: false, volatile_deletes: false, simple_html: true, provenance: true });
    }
    const images = entry((await get('/+api')).doc, 'images-ro');
    expect(images.capabilities).toMatchObject({ pull: true, push: false, delete: false, referrers: true });
    const texts = Object.values(images.client_configuration ?? {}).map((t) => t.text).join('\n');
    expect(texts).not.toContain('<upload-token>');
    expect(texts).not.toMatch(/login|push/);
  });

  it('OCI: registry URL, image prefix, containerd hosts.toml for the origin', async () => {
    const host = new URL(server.url).host;
    const images = entry((await get('/team/images/+api')).doc, 'images');
    expect(images.urls).toMatchObject({ registry: `http://${host}/v2/`, image_prefix: `${host}/team/images/` });
    expect(images.capabilities).toMatchObject({ pull: true, push: true, delete: true, layer_contents: true, pull_through: false });
    expect(images.client_configuration?.containerd?.path).toBe(`/etc/containerd/certs.d/${host}/hosts.toml`);
    expect(images.client_configuration?.skopeo?.text).toContain('--tls-verify=false');
  });
});

describe('the origin', () => {
  it('honours X-Forwarded-Host and X-Forwarded-Proto from a trusted proxy', async () => {
    const { doc } = await get('/team/private/+api', { 'x-forwarded-host': 'pkgs.example.com', 'x-forwarded-proto': 'https' });
    const ix = entry(doc, 'private');
    expect(doc.urls.api).toBe('https://pkgs.example.com/+api');
    expect(ix.urls.simple).toBe('https://pkgs.example.com/team/private/simple/');
    expect(ix.client_configuration?.pip?.text).toBe('[global]\nindex-url = https://pkgs.example.com/team/private/simple/\n');
    const oci = entry((await get('/team/images/+api', { 'x-forwarded-host': 'reg.example.com:8443', 'x-forwarded-proto': 'https' })).doc, 'images');
    expect(oci.urls.image_prefix).toBe('reg.example.com:8443/team/images/');
    expect(oci.client_configuration?.skopeo?.text).not.toContain('tls-verify');
  });

  it('trusts a plain-HTTP host for pip when it is not loopback', async () => {
    const ix = entry((await get('/team/private/+api', { host: 'pkgs.internal:4433' })).doc, 'private');
    expect(ix.client_configuration?.pip?.text).toContain('trusted-host = pkgs.internal:4433');
  });

  it('ignores garbage headers: never reflected, Host used instead', async () => {
    const host = new URL(server.url).host;
    for (const bad of ['evil.example/<script>', 'user@evil.example', 'evil.example:99999', '"quoted"', 'a'.repeat(300)]) {
      const res = await get('/+api', { 'x-forwarded-host': bad, 'x-forwarded-proto': 'javascript' });
      expect(res.doc.urls.api).toBe(`http://${host}/+api`);
      expect(res.body).not.toContain('evil');
      expect(res.body).not.toContain('javascript');
    }
  });

  it('without a valid origin: paths, and no client texts', async () => {
    const { doc, body } = await get('/+api', { host: 'not a host' });
    expect(doc.urls).toMatchObject({ api: '/+api', registry: '/v2/' });
    expect(entry(doc, 'private').urls.simple).toBe('/team/private/simple/');
    expect(entry(doc, 'images').urls.image_prefix).toBeUndefined();
    expect(body).not.toContain('client_configuration');
    expect(body).not.toContain('not a host');
  });
});
