/**
 * Real clients pulling through velodex's cached OCI index (distribution registry upstream with
 * token auth, fault proxy between): skopeo, regctl, oras (referrers attached upstream, discovered
 * through the cache) and containerd's `ctr`, which pulls the upstream's image name the way a node
 * does, with the `hosts.toml` mirror configuration velodex's discovery document hands out.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startContainerd, type Containerd } from '../support/containerd.js';
import { allBlobs, buildImage, buildIndex, layoutMismatches, readLayout } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run, type RunOptions } from '../support/run.js';
import { blobPaths, CACHE, cacheStats, countOf, pullThroughSuite, SEED_PASSWORD, SEED_USER, seed, since } from './pull-through-support.js';

const s = pullThroughSuite('pull-through-clients');
let daemon: Containerd;

beforeAll(async () => {
  writeFileSync(join(s.work, 'policy.json'), JSON.stringify({ default: [{ type: 'insecureAcceptAnything' }] }));
  writeFileSync(join(s.work, 'auth.json'), '{}');
  const dir = join(s.work, 'containerd');
  mkdirSync(dir);
  daemon = await startContainerd(dir);
}, 60_000);

afterAll(async () => {
  await daemon?.stop();
});

const client = (name: string, args: string[], opts: RunOptions = {}) =>
  run(tool(name), args, { env: { ...s.env, REGISTRY_AUTH_FILE: join(s.work, 'auth.json'), REGCTL_CONFIG: join(s.work, 'regctl.json') }, timeoutMs: 180_000, ...opts });

describe('clients through the pull-through cache', () => {
  it('skopeo copies an image out of the cache byte for byte', async () => {
    const image = buildImage({ seed: 'ptc-skopeo', layers: 2, bigFileSize: 128 * 1024 });
    await seed(s, 'team/skopeo', 'v1', image);
    const dest = join(s.work, 'skopeo-out');
    await client('skopeo', ['--policy', join(s.work, 'policy.json'), 'copy', '--src-tls-verify=false', '--preserve-digests', `docker://${s.host}/${CACHE}/team/skopeo:v1`, `oci:${dest}:v1`]);
    expect(layoutMismatches(readLayout(dest), allBlobs(image))).toEqual([]);
    const raw = await client('skopeo', ['inspect', '--raw', '--tls-verify=false', `docker://${s.host}/${CACHE}/team/skopeo:v1`]);
    expect(Buffer.from(raw.stdout).equals(image.manifest.bytes)).toBe(true);
  });

  it('regctl copies a multi-platform index out of the cache and lists its tags', async () => {
    const index = buildIndex('ptc-regctl');
    await seed(s, 'team/regctl', '2.0', index);
    await client('regctl', ['registry', 'set', s.host, '--tls', 'disabled']);
    const ref = `${s.host}/${CACHE}/team/regctl:2.0`;
    expect((await client('regctl', ['image', 'digest', ref])).stdout.trim()).toBe(index.index.descriptor.digest);
    const dest = join(s.work, 'regctl-out');
    await client('regctl', ['image', 'copy', ref, `ocidir://${dest}:2.0`]);
    expect(layoutMismatches(readLayout(dest), allBlobs(index))).toEqual([]);
    expect((await client('regctl', ['tag', 'ls', `${s.host}/${CACHE}/team/regctl`])).stdout.trim().split('\n')).toEqual(['2.0']);
  });

  it('oras discovers through the cache the referrers attached upstream', async () => {
    const image = buildImage({ seed: 'ptc-oras', layers: 1, bigFileSize: 1024 });
    await seed(s, 'team/oras', 'v1', image);
    const dir = join(s.work, 'oras');
    mkdirSync(dir);
    writeFileSync(join(dir, 'sbom.json'), '{"sbom":true}\n');
    const upstreamRef = `${s.upstream.host}/team/oras:v1`;
    const attached = JSON.parse(
      (
        await client('oras', ['attach', '--plain-http', '-u', SEED_USER, '-p', SEED_PASSWORD, '--artifact-type', 'application/vnd.example.sbom', '--format', 'json', upstreamRef, 'sbom.json:application/json'], {
          cwd: dir,
        })
      ).stdout,
    ) as { digest: string };

    const found = JSON.parse((await client('oras', ['discover', '--plain-http', '--format', 'json', `${s.host}/${CACHE}/team/oras:v1`])).stdout) as {
      manifests?: Array<{ digest: string; artifactType?: string }>;
    };
    expect(found.manifests?.map((m) => [m.digest, m.artifactType])).toEqual([[attached.digest, 'application/vnd.example.sbom']]);
    await client('oras', ['pull', '--plain-http', '-o', join(dir, 'pulled'), `${s.host}/${CACHE}/team/oras@${attached.digest}`]);
  });

  it('ctr pulls the upstream image name through the cache with the hosts.toml from /+api', async () => {
    const image = buildImage({ seed: 'ptc-ctr', layers: 2, bigFileSize: 64 * 1024 });
    await seed(s, 'team/node', 'v1', image);
    const api = (await (await fetch(`${s.server.url}/${CACHE}/+api`)).json()) as {
      indexes: Array<{ name: string; client_configuration?: { containerd?: { path: string; text: string } } }>;
    };
    const hosts = api.indexes.find((ix) => ix.name === 'cache')?.client_configuration?.containerd;
    expect(hosts?.path).toBe(`/etc/containerd/certs.d/${s.proxy.url.slice('http://'.length)}/hosts.toml`);
    const certsDir = join(s.work, 'certs.d');
    const namespaceDir = join(certsDir, s.proxy.url.slice('http://'.length));
    mkdirSync(namespaceDir, { recursive: true });
    writeFileSync(join(namespaceDir, 'hosts.toml'), hosts!.text);

    const before = await cacheStats(s);
    const from = s.proxy.requests.length;
    // The node pulls the upstream's own name; the mirror (velodex) answers it.
    const name = `${s.proxy.url.slice('http://'.length)}/team/node:v1`;
    await daemon.ctr(['images', 'pull', '--hosts-dir', certsDir, '--snapshotter', 'native', name], { timeoutMs: 120_000 });
    const listed = await daemon.ctr(['images', 'ls', '-q']);
    expect(listed.stdout.split('\n')).toContain(name);
    const after = await cacheStats(s);
    expect(after.downloads - before.downloads).toBe(allBlobs(image).length - 1);
    // Every blob came from the upstream once, by velodex (containerd never fell back to it).
    const seen = since(s, from);
    for (const path of blobPaths('team/node', image).slice(1)) expect(countOf(seen, 'GET', path), path).toBe(1);
  });
});
