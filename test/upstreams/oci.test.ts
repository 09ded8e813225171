/**
 * Ordered upstreams of a cached OCI index, with real clients: two distribution registries (the
 * first with token auth, its realm on `localhost`; the second anonymous), each behind a fault
 * proxy that counts what it is asked, holding the same images (same digests). crane, skopeo and
 * containerd's ctr pull while the first is killed, answers 429, answers 503, and hangs past its
 * timeout: every pull succeeds from the second, and the requests each upstream saw are counted. A
 * tag's revalidation asks the upstreams in order too; a repository only the second has is found
 * with `failover_on_404` and not without. Concurrent HEADs of one blob make one upstream HEAD.
 *
 * Every scenario has an index of its own over the same two upstreams, so one scenario's backoff
 * is not the next one's.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { oci, toml, type UpstreamOptions } from '../support/config.js';
import { startContainerd, type Containerd } from '../support/containerd.js';
import { startDistribution, type Distribution } from '../support/distribution.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { allBlobs, buildImage, layoutMismatches, readLayout, writeLayout, type Image } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run, type RunOptions } from '../support/run.js';
import { startTokenServer, type TokenServer } from '../support/token-server.js';
import { startVelodex, tempDir, type Velodex } from '../support/velodex.js';

const SEED_USER = 'seeder';
const SEED_PASSWORD = 'seed-password';
const MIRROR_USER = 'mirror';
const MIRROR_PASSWORD = 'mirror-password';
const SCENARIOS = ['killed', 'limited', 'failing', 'hanging'] as const;

let work: string;
let env: Record<string, string>;
let tokens: TokenServer;
let d1: Distribution;
let d2: Distribution;
let p1: FaultProxy;
let p2: FaultProxy;
let server: Velodex;
let daemon: Containerd;
let host: string;
const images = new Map<string, Image>();

const client = (name: string, args: string[], opts: RunOptions = {}) =>
  run(tool(name), args, { env: { ...env, REGISTRY_AUTH_FILE: join(work, 'auth.json') }, timeoutMs: 180_000, ...opts });
const crane = (args: string[], input?: string) => client('crane', [...args, '--insecure'], input !== undefined ? { input } : {});

/** Pushes `image` as `<repo>:v1` to a registry directly (not through velodex). */
async function seed(registry: Distribution, repo: string, image: Image): Promise<void> {
  const layout = writeLayout(join(work, `seed-${registry.host.replace(':', '_')}-${repo.replaceAll('/', '_')}`), [{ tag: 'v1', item: image }]);
  await crane(['push', layout, `${registry.host}/${repo}:v1`]);
}

beforeAll(async () => {
  work = tempDir('velodex-upstreams-oci-');
  env = { HOME: work, DOCKER_CONFIG: join(work, 'docker') };
  writeFileSync(join(work, 'policy.json'), JSON.stringify({ default: [{ type: 'insecureAcceptAnything' }] }));
  writeFileSync(join(work, 'auth.json'), '{}');
  tokens = await startTokenServer({ dir: work, users: { [SEED_USER]: SEED_PASSWORD, [MIRROR_USER]: MIRROR_PASSWORD } });
  const dir1 = join(work, 'd1');
  const dir2 = join(work, 'd2');
  mkdirSync(dir1);
  mkdirSync(dir2);
  [d1, d2] = await Promise.all([startDistribution(dir1, tokens), startDistribution(dir2, null)]);
  [p1, p2] = await Promise.all([FaultProxy.start(d1.url), FaultProxy.start(d2.url)]);
  const passwordFile = join(work, 'mirror-password');
  writeFileSync(passwordFile, `${MIRROR_PASSWORD}\n`);
  const both = (o: Partial<UpstreamOptions> = {}): UpstreamOptions[] => [
    // The first's token realm is on `localhost`, another name than its address.
    { url: p1.url, credentials: { username: MIRROR_USER, password: { file: passwordFile } }, hosts: ['localhost'], timeout: 2, ...o },
    { url: p2.url },
  ];
  server = await startVelodex({
    config: toml(
      ...SCENARIOS.map((s) => oci.cachedFrom(s, both(), { route: s })),
      oci.cachedFrom('tags', both(), { route: 'tags', ttlSecs: 0 }),
      oci.cachedFrom('heads', both(), { route: 'heads' }),
      oci.cachedFrom('fallthrough', both({ failoverOn404: true }), { route: 'fallthrough' }),
      oci.cachedFrom('strict', both(), { route: 'strict' }),
    ),
  });
  host = `127.0.0.1:${server.port}`;
  await crane(['auth', 'login', d1.host, '-u', SEED_USER, '--password-stdin'], SEED_PASSWORD);
  const repos = [...SCENARIOS.flatMap((s) => [`${s}/crane`, `${s}/skopeo`]), 'killed/ctr', 'team/tagged', 'team/heads'];
  for (const repo of repos) images.set(repo, buildImage({ seed: `upstreams-${repo}`, layers: 2, bigFileSize: 64 * 1024 }));
  for (const repo of repos) await Promise.all([seed(d1, repo, images.get(repo)!), seed(d2, repo, images.get(repo)!)]);
  const only = buildImage({ seed: 'upstreams-only-second', layers: 1, bigFileSize: 1024 });
  images.set('team/only-second', only);
  await seed(d2, 'team/only-second', only);
  const containerdDir = join(work, 'containerd');
  mkdirSync(containerdDir);
  daemon = await startContainerd(containerdDir);
}, 300_000);

afterAll(async () => {
  await daemon?.stop();
  await server?.stop();
  await Promise.all([p1?.close(), p2?.close()]);
  await Promise.all([d1?.stop(), d2?.stop()]);
  await tokens?.close();
});

/** crane pulls `<index>/<repo>` and skopeo copies another, both through velodex; the bytes arrive whole. */
async function pullBoth(index: string): Promise<void> {
  const craneOut = join(tempDir('velodex-crane-'), 'out');
  await crane(['pull', '--format', 'oci', `${host}/${index}/${index}/crane:v1`, craneOut]);
  expect(layoutMismatches(readLayout(craneOut), allBlobs(images.get(`${index}/crane`)!))).toEqual([]);
  const skopeoOut = join(tempDir('velodex-skopeo-'), 'out');
  await client('skopeo', ['--policy', join(work, 'policy.json'), 'copy', '--src-tls-verify=false', '--preserve-digests', `docker://${host}/${index}/${index}/skopeo:v1`, `oci:${skopeoOut}:v1`]);
  expect(layoutMismatches(readLayout(skopeoOut), allBlobs(images.get(`${index}/skopeo`)!))).toEqual([]);
}

/** Requests an upstream saw for `repo`, as `METHOD kind` (`GET manifests`, `HEAD blobs`, ...). */
function seenFor(proxy: FaultProxy, repo: string): string[] {
  const prefix = `/v2/${repo}/`;
  return proxy.seen.filter((r) => r.path.startsWith(prefix)).map((r) => `${r.method} ${r.path.slice(prefix.length).split('/')[0]}`);
}

/** How many blob GETs of `repo` an upstream saw: one per blob of the image when it served the pull. */
const blobGets = (proxy: FaultProxy, repo: string) => seenFor(proxy, repo).filter((r) => r === 'GET blobs').length;
const manifestGets = (proxy: FaultProxy, repo: string) => seenFor(proxy, repo).filter((r) => r === 'GET manifests').length;
/** Blobs of an image besides its manifest: config and layers. */
const blobCount = (repo: string) => allBlobs(images.get(repo)!).length - 1;

interface StatusUpstream {
  state: string;
  online: boolean;
  last_error: { kind: string } | null;
  rate_limited_total: number;
  rate_limit: { limit: number | null; remaining: number | null; window_secs: number | null } | null;
}

async function upstreamsOf(index: string): Promise<{ summary: string; upstreams: StatusUpstream[] }> {
  const doc = (await (await fetch(`${server.url}/+status`)).json()) as { indexes: Array<{ name: string; upstream: { summary: string }; upstreams: StatusUpstream[] }> };
  const entry = doc.indexes.find((ix) => ix.name === index)!;
  return { summary: entry.upstream.summary, upstreams: entry.upstreams };
}

/** Each scenario's pulls came from the second alone: every blob once, nothing from the first. */
function expectServedBySecond(index: string): void {
  for (const repo of [`${index}/crane`, `${index}/skopeo`]) {
    expect(blobGets(p2, repo), repo).toBe(blobCount(repo));
    expect(blobGets(p1, repo), repo).toBe(0);
  }
}

describe('a cached OCI index with two upstreams', () => {
  it('pulls from the second while the first is killed (crane, skopeo, ctr)', async () => {
    await p1.kill();
    try {
      await pullBoth('killed');
      await daemon.ctr(['images', 'pull', '--plain-http', '--snapshotter', 'native', `${host}/killed/killed/ctr:v1`], { timeoutMs: 120_000 });
    } finally {
      await p1.revive();
    }
    expectServedBySecond('killed');
    expect(blobGets(p2, 'killed/ctr')).toBe(blobCount('killed/ctr'));
    // A dead upstream sees nothing at all.
    expect(seenFor(p1, 'killed/crane')).toEqual([]);
    expect((await upstreamsOf('killed')).upstreams[0]).toMatchObject({ state: 'backing_off', online: false, last_error: { kind: 'connect' } });
  });

  it('pulls from the second while the first answers 429, and leaves the first alone for its Retry-After', async () => {
    p1.on((path) => path.startsWith('/v2/limited/'), { kind: 'status', status: 429, headers: { 'retry-after': '300', 'ratelimit-limit': '100;w=21600', 'ratelimit-remaining': '0;w=21600' } });
    try {
      await pullBoth('limited');
    } finally {
      p1.clear();
    }
    expectServedBySecond('limited');
    // One 429 (crane's tag), then nothing: skopeo's pull never reaches the first.
    expect(seenFor(p1, 'limited/crane')).toEqual(['GET manifests']);
    expect(seenFor(p1, 'limited/skopeo')).toEqual([]);
    const { summary, upstreams } = await upstreamsOf('limited');
    expect(summary).toBe('1/2 online');
    expect(upstreams[0]).toMatchObject({ state: 'rate_limited', rate_limited_total: 1, rate_limit: { limit: 100, remaining: 0, window_secs: 21600 } });
  });

  it('pulls from the second while the first answers 503', async () => {
    p1.on((path) => path.startsWith('/v2/failing/'), { kind: 'status', status: 503 });
    try {
      await pullBoth('failing');
    } finally {
      p1.clear();
    }
    expectServedBySecond('failing');
    expect(seenFor(p1, 'failing/crane')).toEqual(['GET manifests']);
    expect((await upstreamsOf('failing')).upstreams[0]).toMatchObject({ state: 'backing_off', last_error: { kind: 'status' } });
  });

  it('pulls from the second while the first hangs past its timeout', async () => {
    p1.on((path) => path.startsWith('/v2/hanging/'), { kind: 'stall' });
    try {
      await pullBoth('hanging');
    } finally {
      p1.clear();
      p1.release();
    }
    expectServedBySecond('hanging');
    expect(seenFor(p1, 'hanging/crane')).toEqual(['GET manifests']);
    expect((await upstreamsOf('hanging')).upstreams[0]).toMatchObject({ last_error: { kind: 'timeout' } });
  });

  it("revalidates a tag with the upstreams in order: the second's HEAD while the first fails", async () => {
    const repo = 'team/tagged';
    const ref = `${host}/tags/${repo}:v1`;
    const digest = (await crane(['digest', ref])).stdout.trim();
    expect(manifestGets(p1, repo)).toBe(1);
    const before = seenFor(p1, repo).length;
    p1.on((path) => path.startsWith(`/v2/${repo}/`), { kind: 'status', status: 503 });
    try {
      // cache_ttl_secs = 0: the tag is asked about again; the first fails, the second's HEAD confirms it.
      expect((await crane(['digest', ref])).stdout.trim()).toBe(digest);
    } finally {
      p1.clear();
    }
    expect(seenFor(p1, repo)[before]).toBe('HEAD manifests');
    // The second confirms the stored digest with HEADs alone: the manifest is not fetched again.
    const second = seenFor(p2, repo);
    expect(second.length).toBeGreaterThan(0);
    expect(new Set(second)).toEqual(new Set(['HEAD manifests']));
  });

  it('merges identical concurrent HEADs of a blob into one upstream HEAD', async () => {
    const repo = 'team/heads';
    const layer = images.get(repo)!.layers[0]!.descriptor.digest;
    const url = `${server.url}/v2/heads/${repo}/blobs/${layer}`;
    p1.on((path, method) => method === 'HEAD' && path === `/v2/${repo}/blobs/${layer}`, { kind: 'stall', ms: 500 });
    const answers = await Promise.all(Array.from({ length: 6 }, () => fetch(url, { method: 'HEAD' })));
    p1.clear();
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200]);
    expect(seenFor(p1, repo).filter((r) => r === 'HEAD blobs')).toHaveLength(1);
  });

  it('makes one upstream GET of a blob however many clients miss it at once, from the second while the first is down', async () => {
    const repo = 'team/heads';
    const layer = images.get(repo)!.layers[1]!;
    const path = `/v2/${repo}/blobs/${layer.descriptor.digest}`;
    p1.on(path, { kind: 'status', status: 503 });
    p2.on(path, { kind: 'stall', ms: 500 });
    try {
      const answers = await Promise.all(Array.from({ length: 6 }, () => fetch(`${server.url}/v2/heads/${repo}/blobs/${layer.descriptor.digest}`)));
      const bodies = await Promise.all(answers.map(async (a) => Buffer.from(await a.arrayBuffer())));
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200]);
      for (const body of bodies) expect(body.equals(layer.bytes)).toBe(true);
    } finally {
      p1.clear();
      p2.clear();
    }
    expect(p1.seen.filter((r) => r.method === 'GET' && r.path === path)).toHaveLength(1);
    expect(p2.seen.filter((r) => r.method === 'GET' && r.path === path)).toHaveLength(1);
  });

  it('finds a repository only the second has with failover_on_404, and not without', async () => {
    const repo = 'team/only-second';
    const out = join(tempDir('velodex-only-'), 'out');
    await crane(['pull', '--format', 'oci', `${host}/fallthrough/${repo}:v1`, out]);
    expect(layoutMismatches(readLayout(out), allBlobs(images.get(repo)!))).toEqual([]);
    expect(seenFor(p1, repo)).toEqual(['GET manifests']);
    expect(blobGets(p2, repo)).toBe(blobCount(repo));

    const refused = await client('crane', ['digest', `${host}/strict/${repo}:v1`, '--insecure'], { allowFailure: true });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/MANIFEST_UNKNOWN|NAME_UNKNOWN|not found/i);
    // The first's 404 is the answer (crane asks more than once): the second is not asked again.
    const first = seenFor(p1, repo);
    expect(first.length).toBeGreaterThan(1);
    expect(new Set(first)).toEqual(new Set(['GET manifests']));
    expect(seenFor(p2, repo).filter((r) => r.endsWith('manifests'))).toEqual(['GET manifests']);
  });
});
