/**
 * One velodex endpoint as the mirror of several registries (`[[mirror]]`, containerd's `?ns=`):
 * three Distribution registries on loopback; the first two are mirrored, each the upstream (through
 * a fault proxy that counts its requests) of a cached index, the second one private; the third is
 * not mirrored. Over plain HTTP: `ns` picks the index, the repository path is the registry's own,
 * an unmapped or malformed `ns` is a 404 NAME_UNKNOWN naming it, requests without `ns` are as
 * before, the private index's read rule holds. Then a private containerd pulls images of both
 * mirrored registries through the one endpoint with the `hosts.toml` files `/+api` gives, and an
 * image of the third from the registry itself after velodex's 404.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DiscoveryDocument } from '../../registry/src/discovery/types.js';
import { mirrors, oci, toml } from '../support/config.js';
import { startContainerd, type Containerd } from '../support/containerd.js';
import { startDistribution, type Distribution } from '../support/distribution.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { allBlobs, buildImage, writeLayout, type Image } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { storeProbe } from '../support/store-probe.js';
import { until } from '../support/until.js';
import { basicAuth, startVelodex, tempDir, type Velodex } from '../support/velodex.js';
import { expectOciError } from './api-support.js';

/** The private index's read token. */
const READ_TOKEN = 'mirror-read-7c21e9';

interface Upstream {
  registry: Distribution;
  /** Between velodex and the registry: counts what velodex asked. */
  proxy: FaultProxy | null;
}

let work: string;
let server: Velodex;
/** `http://127.0.0.1:<port>`: the one endpoint. */
let endpoint: string;
const up: { a: Upstream; b: Upstream; c: Upstream } = {} as never;
let daemon: Containerd;

const images = {
  a: buildImage({ seed: 'mirror-a', layers: 2, bigFileSize: 32 * 1024 }),
  b: buildImage({ seed: 'mirror-b', layers: 1, bigFileSize: 16 * 1024 }),
  c: buildImage({ seed: 'mirror-c', layers: 1, bigFileSize: 16 * 1024 }),
  // Pulled by ctr only: containerd fetches its blobs, none of them already in its store.
  ctrA: buildImage({ seed: 'mirror-ctr-a', layers: 2, bigFileSize: 32 * 1024 }),
  ctrB: buildImage({ seed: 'mirror-ctr-b', layers: 1, bigFileSize: 16 * 1024 }),
};

async function startUpstream(name: string, proxied: boolean): Promise<Upstream> {
  const dir = join(work, name);
  mkdirSync(dir);
  const registry = await startDistribution(dir, null);
  return { registry, proxy: proxied ? await FaultProxy.start(registry.url) : null };
}

/** Pushes `image` to the registry itself as `<repo>:<tag>`, with crane. */
async function seed(u: Upstream, repo: string, tag: string, image: Image): Promise<void> {
  const layout = writeLayout(join(work, `seed-${u.registry.host.replace(':', '_')}-${repo.replaceAll('/', '_')}-${tag}`), [{ tag, item: image }]);
  await run(tool('crane'), ['push', layout, `${u.registry.host}/${repo}:${tag}`, '--insecure'], { env: { HOME: work }, timeoutMs: 60_000 });
}

beforeAll(async () => {
  work = tempDir('velodex-mirror-');
  up.a = await startUpstream('a', true);
  up.b = await startUpstream('b', true);
  up.c = await startUpstream('c', false);
  server = await startVelodex({
    config: toml(
      oci.cached('reg-a', up.a.proxy!.url, { route: 'mirror/a', ttlSecs: 0 }),
      oci.cached('reg-b', up.b.proxy!.url, { route: 'mirror/b', ttlSecs: 0, read: 'token', tokens: [{ name: 'node', secret: READ_TOKEN, scopes: ['read'] }] }),
      // Never asked in this suite: only its hosts.toml is read.
      oci.cached('hub', 'https://registry-1.docker.io', { route: 'hub' }),
      mirrors([
        { registry: up.a.registry.host, index: 'reg-a' },
        { registry: up.b.registry.host, index: 'reg-b' },
        { registry: 'index.docker.io', index: 'hub' },
      ]),
    ),
  });
  endpoint = server.url;
  await seed(up.a, 'team/app', 'v1', images.a);
  await seed(up.b, 'team/web', 'v1', images.b);
  await seed(up.c, 'team/tool', 'v1', images.c);
  await seed(up.a, 'library/alpine', '3.20', images.ctrA);
  await seed(up.b, 'team/api', '2.0', images.ctrB);
  const dir = join(work, 'containerd');
  mkdirSync(dir);
  daemon = await startContainerd(dir);
}, 120_000);

afterAll(async () => {
  await daemon?.stop();
  await server?.stop();
  for (const u of [up.a, up.b, up.c]) {
    await u?.proxy?.close();
    await u?.registry.stop();
  }
});

const ns = (u: Upstream) => `ns=${encodeURIComponent(u.registry.host)}`;

describe('requests that name a registry (?ns=)', () => {
  it('are served by the mapped index, with the repository path as the registry names it', async () => {
    const from = up.a.proxy!.requests.length;
    const res = await fetch(`${endpoint}/v2/team/app/manifests/v1?${ns(up.a)}`, { headers: { accept: images.a.manifest.descriptor.mediaType } });
    expect(res.status, await res.clone().text()).toBe(200);
    expect(res.headers.get('docker-content-digest')).toBe(images.a.manifest.descriptor.digest);
    expect(Buffer.from(await res.arrayBuffer()).equals(images.a.manifest.bytes)).toBe(true);
    const layer = allBlobs(images.a).at(-1)!;
    const blob = await fetch(`${endpoint}/v2/team/app/blobs/${layer.descriptor.digest}?${ns(up.a)}`);
    expect(Buffer.from(await blob.arrayBuffer()).equals(layer.bytes)).toBe(true);
    // velodex asked its upstream for the registry's own path.
    expect(up.a.proxy!.requests.slice(from)).toContain(`GET /v2/team/app/manifests/v1`);
    // The same cache on the index's route: nothing asked again for the bytes, once they are stored
    // (a pull-through publishes a blob as its response ends; on S3 that can come a moment later).
    const store = await storeProbe(server.dataDir);
    await until('the layer stored', async () => ((await store.has(layer.descriptor.digest.slice('sha256:'.length))) ? true : undefined), { timeoutMs: 10_000, intervalMs: 50 });
    const before = up.a.proxy!.requests.length;
    const routed = await fetch(`${endpoint}/v2/mirror/a/team/app/blobs/${layer.descriptor.digest}`);
    expect(Buffer.from(await routed.arrayBuffer()).equals(layer.bytes)).toBe(true);
    expect(up.a.proxy!.requests.slice(before)).toEqual([]);
  });

  it('answers an unmapped registry 404 NAME_UNKNOWN naming it (curl), before looking at credentials', async () => {
    const url = `${endpoint}/v2/team/tool/manifests/v1?${ns(up.c)}`;
    const res = await run(tool('curl'), ['-sS', '-H', 'Authorization: Bearer not-a-token', '-w', '\n%{http_code}', url]);
    const [body, status] = res.stdout.split('\n');
    expect(status).toBe('404');
    const error = (JSON.parse(body ?? '') as { errors: Array<{ code: string; message: string }> }).errors[0];
    expect(error?.code).toBe('NAME_UNKNOWN');
    expect(error?.message).toContain(`registry "${up.c.registry.host}" is not mirrored here`);
    expect(error?.message).toContain('pull it from the registry itself');
    // HEAD, as containerd resolves: the status alone.
    expect((await fetch(url, { method: 'HEAD' })).status).toBe(404);
  });

  it.each([
    ['an empty ns', 'ns='],
    ['a URL', `ns=${encodeURIComponent('http://127.0.0.1:5000')}`],
    ['two registries', 'ns=docker.io&ns=ghcr.io'],
  ])('answers %s 404 NAME_UNKNOWN', async (_what, query) => {
    const error = await expectOciError(await fetch(`${endpoint}/v2/team/app/manifests/v1?${query}`), 404, 'NAME_UNKNOWN');
    expect(error.message).toMatch(/is not a registry host/);
  });

  it('answers the version check with a mapped registry as without ns, and 404 for an unmapped one', async () => {
    const plain = await fetch(`${endpoint}/v2/`);
    const mapped = await fetch(`${endpoint}/v2/?${ns(up.a)}`);
    expect(mapped.status).toBe(plain.status);
    expect(mapped.headers.get('www-authenticate')).toBe(plain.headers.get('www-authenticate'));
    await expectOciError(await fetch(`${endpoint}/v2/?${ns(up.c)}`), 404, 'NAME_UNKNOWN');
  });

  it('serves a name under the route of the mapped registry’s index as on that route (the per-index hosts.toml), and never from another index', async () => {
    const routed = await fetch(`${endpoint}/v2/mirror/a/team/app/manifests/v1?${ns(up.a)}`, { method: 'HEAD' });
    expect(routed.status).toBe(200);
    expect(routed.headers.get('docker-content-digest')).toBe(images.a.manifest.descriptor.digest);
    // For the first registry, `mirror/b/...` is a repository of its own, not reg-b's route.
    const fromB = up.b.proxy!.requests.length;
    const fromA = up.a.proxy!.requests.length;
    expect((await fetch(`${endpoint}/v2/mirror/b/team/web/manifests/v1?${ns(up.a)}`, { method: 'HEAD' })).status).toBe(404);
    expect(up.a.proxy!.requests.slice(fromA).filter((r) => r.endsWith(' /v2/mirror/b/team/web/manifests/v1'))).not.toEqual([]);
    expect(up.b.proxy!.requests.slice(fromB)).toEqual([]);
  });

  it('serves a name under an index route for the registry that index caches, and refuses it for another registry', async () => {
    // The per-index hosts.toml of reg-a sits under its upstream's name (here the proxy in front of the first registry).
    const proxied = new URL(up.a.proxy!.url).host;
    const res = await fetch(`${endpoint}/v2/mirror/a/team/app/manifests/v1?ns=${encodeURIComponent(proxied)}`, { method: 'HEAD' });
    expect(res.status).toBe(200);
    expect(res.headers.get('docker-content-digest')).toBe(images.a.manifest.descriptor.digest);
    // The third registry's `mirror/a/team/app` is not reg-a's `team/app`.
    const other = await fetch(`${endpoint}/v2/mirror/a/team/app/manifests/v1?${ns(up.c)}`);
    expect((await expectOciError(other, 404, 'NAME_UNKNOWN')).message).toContain(`registry "${up.c.registry.host}" is not mirrored here`);
  });

  it('leaves requests without ns as they were', async () => {
    const error = await expectOciError(await fetch(`${endpoint}/v2/team/app/manifests/v1`), 404, 'NAME_UNKNOWN');
    expect(error.message).toContain('no OCI index serves "team/app"');
  });

  it('applies the private index’s read rule: a challenge for its name on the route, the read token, a realm token', async () => {
    const url = `${endpoint}/v2/team/web/manifests/v1?${ns(up.b)}`;
    const refused = await fetch(url);
    await expectOciError(refused.clone(), 401, 'UNAUTHORIZED');
    const challenge = refused.headers.get('www-authenticate') ?? '';
    expect(challenge).toContain('scope="repository:mirror/b/team/web:pull"');
    expect((await fetch(url, { headers: { authorization: basicAuth(READ_TOKEN, 'node') } })).status).toBe(200);
    // What docker and containerd do with the challenge: a token from the realm for its scope.
    const realm = /realm="([^"]+)"/.exec(challenge)?.[1] ?? '';
    const tokenRes = await fetch(`${realm}?service=velodex&scope=${encodeURIComponent('repository:mirror/b/team/web:pull')}`, { headers: { authorization: basicAuth(READ_TOKEN, 'node') } });
    const { token } = (await tokenRes.json()) as { token: string };
    expect((await fetch(url, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    // An anonymous realm token grants no pull of a private index.
    const anonymous = (await (await fetch(`${realm}?service=velodex&scope=${encodeURIComponent('repository:mirror/b/team/web:pull')}`)).json()) as { token: string };
    expect((await fetch(url, { headers: { authorization: `Bearer ${anonymous.token}` } })).status).toBe(401);
  });

  it('takes no writes for a mirrored registry: its index is a cache', async () => {
    const res = await fetch(`${endpoint}/v2/team/app/blobs/uploads/?${ns(up.a)}`, { method: 'POST', headers: { authorization: basicAuth(READ_TOKEN, 'node') } });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
  });
});

describe('/+api for the node mirror', () => {
  async function apiDoc(path = '/+api'): Promise<DiscoveryDocument> {
    return (await (await fetch(`${endpoint}${path}`)).json()) as DiscoveryDocument;
  }

  it('gives each mapped registry a hosts.toml pointing at the one endpoint, the registry itself as the fallback', async () => {
    const doc = await apiDoc();
    const registries = doc.node_mirror?.registries ?? {};
    expect(Object.keys(registries)).toEqual([up.a.registry.host, up.b.registry.host, 'docker.io']);
    const a = registries[up.a.registry.host];
    expect(a?.index).toBe('reg-a');
    expect(a?.api).toBe(`${endpoint}/mirror/a/+api`);
    expect(a?.client_configuration?.containerd?.path).toBe(`/etc/containerd/certs.d/${up.a.registry.host}/hosts.toml`);
    // The index's upstream is a proxy, not the registry: the fallback is the registry, over HTTP on loopback.
    expect(a?.client_configuration?.containerd?.text).toBe(`server = "http://${up.a.registry.host}"\n\n[host."${endpoint}"]\n  capabilities = ["pull", "resolve"]\n`);
    const b = registries[up.b.registry.host]?.client_configuration?.containerd;
    expect(b?.text).toContain(`[host."${endpoint}".header]`);
    expect(b?.text).toContain('Authorization = "Basic <base64>"');
    expect(b?.description).toContain('private: put a read token in the header');
    const hub = registries['docker.io']?.client_configuration?.containerd;
    expect(hub?.path).toBe('/etc/containerd/certs.d/docker.io/hosts.toml');
    expect(hub?.text).toMatch(/^server = "https:\/\/registry-1\.docker\.io"\n/);
    expect(hub?.text).not.toMatch(/override_path|skip_verify|ca =/);
  });

  it('names the mirrored registries in the start-up lines', () => {
    expect(server.logs()).toContain(`  mirror of ${up.a.registry.host} (reg-a), ${up.b.registry.host} (reg-b), docker.io (hub) on ${endpoint}/v2/`);
  });

  it('has no node_mirror in an index’s own document, and no texts without a host', async () => {
    expect((await apiDoc('/mirror/a/+api')).node_mirror).toBeUndefined();
    const res = await run(tool('curl'), ['-sS', '--http1.0', '-H', 'Host:', `${endpoint}/+api`]);
    const doc = JSON.parse(res.stdout) as DiscoveryDocument;
    expect(doc.node_mirror?.registries[up.a.registry.host]).toEqual({ index: 'reg-a', api: '/mirror/a/+api' });
  });
});

describe('ctr through the one endpoint', () => {
  const pull = (args: string[]) => daemon.ctr(['images', 'pull', '--snapshotter', 'native', ...args], { timeoutMs: 60_000, allowFailure: true });

  async function digestIn(ref: string): Promise<string | undefined> {
    const list = await daemon.ctr(['images', 'list', `name==${ref}`]);
    return /sha256:[0-9a-f]{64}/.exec(list.stdout)?.[0];
  }

  let hostsDir: string;

  beforeAll(async () => {
    // The node's folder, as a platform team fills it from /+api: one file per mapped registry.
    const doc = (await (await fetch(`${endpoint}/+api`)).json()) as DiscoveryDocument;
    hostsDir = join(work, 'certs.d');
    for (const u of [up.a, up.b]) {
      const hosts = doc.node_mirror?.registries[u.registry.host]?.client_configuration?.containerd;
      const dir = join(hostsDir, u.registry.host);
      mkdirSync(dir, { recursive: true });
      // The private index's placeholder filled in as its comment says.
      writeFileSync(join(dir, 'hosts.toml'), (hosts?.text ?? '').replace('<base64>', Buffer.from(`node:${READ_TOKEN}`).toString('base64')));
    }
    // Every other registry tried at velodex first as well (containerd's `_default`, no server:
    // the registry itself is the fallback), so adding a [[mirror]] later needs no change on the node.
    const dir = join(hostsDir, '_default');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'hosts.toml'), `[host."${endpoint}"]\n  capabilities = ["pull", "resolve"]\n`);
  });

  it('pulls images of both mapped registries by their own names, through velodex', async () => {
    for (const [u, repo, tag, image] of [
      [up.a, 'library/alpine', '3.20', images.ctrA],
      [up.b, 'team/api', '2.0', images.ctrB],
    ] as const) {
      const from = u.proxy!.requests.length;
      const ref = `${u.registry.host}/${repo}:${tag}`;
      const res = await pull(['--hosts-dir', hostsDir, ref]);
      expect(res.code, res.stderr).toBe(0);
      expect(await digestIn(ref)).toBe(image.manifest.descriptor.digest);
      // Every blob came through velodex: its upstream was asked for each, once.
      const asked = u.proxy!.requests.slice(from);
      for (const blob of allBlobs(image).slice(1)) expect(asked.filter((r) => r === `GET /v2/${repo}/blobs/${blob.descriptor.digest}`), blob.descriptor.digest).toHaveLength(1);
    }
  });

  it('pulls an image of the unmapped registry from the registry itself, after velodex answered 404 NAME_UNKNOWN', async () => {
    const ref = `${up.c.registry.host}/team/tool:v1`;
    const mark = server.logs().length;
    const res = await pull(['--hosts-dir', hostsDir, ref]);
    expect(res.code, res.stderr).toBe(0);
    expect(await digestIn(ref)).toBe(images.c.manifest.descriptor.digest);
    // What containerd asked velodex (each with the registry in ns), and what velodex answered.
    const lines = server
      .logs()
      .slice(mark)
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { reqId?: string; req?: { method: string; url: string }; res?: { statusCode: number } });
    const asked = lines.filter((l) => l.req?.url.includes(`?ns=${encodeURIComponent(up.c.registry.host)}`));
    expect(asked.map((l) => `${l.req?.method} ${l.req?.url.replace(/\?.*/, '')}`)).toContain('HEAD /v2/team/tool/manifests/v1');
    const answers = asked.map((a) => lines.find((l) => l.reqId === a.reqId && l.res)?.res?.statusCode);
    expect(new Set(answers)).toEqual(new Set([404]));
  });
});
